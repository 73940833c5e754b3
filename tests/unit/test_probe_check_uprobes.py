"""The add dialog's check of a user-function probe: looked up in its file,
the kernel's function index never loaded."""

from __future__ import annotations

from ktui.lang.spec import parse_spec
from ktui.screens.probe_check import ProbeCheck


class UnusedIndex:
    def load(self):
        raise AssertionError("the kernel's functions were asked about a user function")


def test_a_user_function_is_checked_in_its_file(tmp_path):
    check = ProbeCheck(UnusedIndex())
    spec = "/nope/bin:f:c"
    found = check.problem(parse_spec(spec), spec)
    assert found.fatal and found.error.col == 1 and found.error.message == "/nope/bin: no such file"
    spec = "/bin/sh:no_such_function_here:c"
    found = check.problem(parse_spec(spec), spec)
    assert found.error.col == len("/bin/sh:") + 1 and "no_such_function_here" in found.error.message
