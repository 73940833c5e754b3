"""`ktui vm ARGS` refuses on the host what ktui in the guest would refuse
anyway (issue 15: a bad filter or a missing file cost a minute of booting,
then flashed in the guest and `ktui vm` exited 0): the same one line, the
same exit status, and no VM started. Names (`count`) are checked against
the guest kernel's BTF, read from its image: tests/unit/test_guest_btf.py;
here there is none to read, and names are left to the guest.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import ktui.vm
from ktui import cli


@pytest.fixture
def boots(monkeypatch) -> list[list[str]]:
    """The VMs `ktui vm` would have booted: their guest command lines."""
    started: list[list[str]] = []

    def fake_run_in_vm(argv, kernel=None, workload=True):
        started.append(argv)
        return 0

    monkeypatch.setattr(ktui.vm, "run_in_vm", fake_run_in_vm)
    monkeypatch.setattr(cli, "_guest_names", lambda kernel: None)  # no guest BTF (test_guest_btf has one)
    return started


def run(*args):
    return CliRunner().invoke(cli.main, list(args))


@pytest.mark.parametrize("args, code", [
    (["-e", "vfs_read:c:a3 if nope ="], 1),                   # the dashboard's -e
    (["missing.yaml"], 1),                                    # a probe set that is not there
    (["stream", "-e", "vfs_read:c:a3 if nope =", "--duration", "5"], 1),
    (["record", "-e", "vfs_read:c:(", "-o", "x.ktrec"], 1),
    (["compile", "-e", "vfs_read:x"], 1),
    (["stream"], 1),                                          # nothing to probe
    (["stream", "-e", "vfs_read:c", "--duration", "-1"], 2),  # a number out of range
    (["stream", "--no-such-option"], 2),
    (["record", "-e", "vfs_read:c"], 2),                      # -o missing
    (["run", "--comm", "x" * 40], 1),
])
def test_what_ktui_refuses_is_refused_before_the_vm_boots(boots, args, code):
    own = run(*args)
    assert own.exit_code == code, own.output  # what ktui itself says, here, without root
    inside = run("vm", *args)
    assert (inside.exit_code, inside.output) == (code, own.output)
    assert len(inside.output.splitlines()) == 1 and inside.output.startswith("ktui: ")
    assert boots == []


def test_a_bad_probe_set_is_refused_with_its_location(boots, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nprobes:\n  - spec: 'vfs_read:c:('\n")
    result = run("vm", str(bad))
    assert result.exit_code == 1
    assert result.output.startswith(f"ktui: {bad}:3:") and result.output.count("\n") == 1
    assert boots == []


def test_vm_check_prints_every_syntax_error_and_does_not_boot(boots, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nprobes:\n  - spec: 'vfs_read:c:('\n  - spec: 'vfs_write:q'\n")
    result = run("vm", "check", str(bad))
    assert result.exit_code == 1
    assert [ln.split(":")[:2] for ln in result.output.splitlines()] == [[str(bad), "3"], [str(bad), "4"]]
    assert boots == []


def test_ktui_vm_inside_ktui_vm_is_refused(boots):
    result = run("vm", "vm")
    assert (result.exit_code, result.output) == (2, "ktui: vm: ktui vm cannot run inside ktui vm\n")
    assert boots == []


@pytest.mark.parametrize("args, argv", [
    ([], ["run"]),
    (["-e", "vfs_read:c:count"], ["run", "-e", "vfs_read:c:count"]),  # a name: the guest's BTF decides
    (["probesets/vfs.yaml"], ["run", "probesets/vfs.yaml"]),
    (["stream", "-e", "vfs_read:c", "--duration", "5"], ["stream", "-e", "vfs_read:c", "--duration", "5"]),
    (["stream", "--from", "missing.ktrec"], ["stream", "--from", "missing.ktrec"]),  # read in the guest
    (["list", "vfs_*"], ["list", "vfs_*"]),
    (["check", "probesets/default.yaml"], ["check", "probesets/default.yaml"]),
    (["replay", "x.ktrec"], ["replay", "x.ktrec"]),
])
def test_what_may_be_right_boots_the_vm_with_its_command_named(boots, args, argv):
    result = run("vm", *args)
    assert result.exit_code == 0, result.output
    assert boots == [argv]


def test_help_of_a_command_is_printed_here(boots):
    result = run("vm", "stream", "--help")
    assert result.exit_code == 0 and "--duration" in result.output
    assert boots == []
