"""`ktui check` and the commands' inputs on user-function probes: a user
probe's function is looked up in its own file (errors at file:line:col,
the notes as warnings), never against the kernel's functions; `-e` specs
are refused at their column. A gcc-built program is the file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ktui import cli
from ktui.lang.model import KtuiError

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


class KernelFunctions:
    """The kernel's function check, recording what it is asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def problem(self, name):
        self.asked.append(name)
        return None

    def unchecked(self):
        return None


class NoBtf:
    def problem(self):
        return "no BTF in this test"

    def tracefs_problem(self):
        return "no tracefs in this test"


@pytest.fixture
def program(tmp_path) -> Path:
    (tmp_path / "p.c").write_text("__attribute__((noinline)) int ktui_add(int a, int b) { return a + b; }\n"
                                  "int main(int c, char **v) { return ktui_add(c, c); }\n")
    subprocess.run(["gcc", "-O1", "-no-pie", "-o", str(tmp_path / "prog"), str(tmp_path / "p.c")], check=True)
    return tmp_path / "prog"


@pytest.fixture(autouse=True)
def no_btf(monkeypatch):
    monkeypatch.setattr(cli, "_kernel_names", lambda: NoBtf())


def test_check_looks_user_functions_up_in_their_file_not_in_the_kernel(tmp_path, program, capsys):
    f = tmp_path / "set.yaml"
    f.write_text(f"name: u\nprobes:\n  - spec: {program}:ktui_add:c:a1\n  - spec: {program}:ktui_ad:c\n"
                 f"  - vfs_read:c\n  - /nope/bin:f:r\n")
    names = KernelFunctions()
    assert cli._check_files([str(f)], names, syntax_only=False) == 1
    assert names.asked == ["vfs_read"]  # user functions are not kernel functions
    out = capsys.readouterr().out.splitlines()
    symbol_col = len(f"  - spec: {program}:") + 1
    assert out == [
        f"{f}:4:{symbol_col}: probe 2 ({program}:ktui_ad:c): {program} has no function ktui_ad; "
        "did you mean ktui_add?",
        f"{f}:6:5: probe 4 (/nope/bin:f:r): /nope/bin: no such file",
    ]


@pytest.mark.skipif(not Path(LIBC).exists(), reason="no x86-64 glibc here")
def test_notes_are_warnings_and_a_set_pid_silences_the_library_one(tmp_path, capsys):
    f = tmp_path / "set.yaml"
    f.write_text(f"name: u\nprobes:\n  - {LIBC}:malloc:c:a1\n")
    assert cli._check_files([str(f)], KernelFunctions(), syntax_only=False) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"{f}:3:5: warning: probe 1 ({LIBC}:malloc:c:a1): {LIBC} is a shared library: "
                      "without --pid the probe traps in every process that maps it")
    assert out[1].startswith(f"{f}: ok (1 probe")
    f.write_text(f"name: u\nfilter: {{pid: 1}}\nprobes:\n  - {LIBC}:malloc:c:a1\n")
    assert cli._check_files([str(f)], KernelFunctions(), syntax_only=False) == 0
    assert capsys.readouterr().out == f"{f}: ok (1 probe)\n"


def test_inputs_refuse_a_user_function_at_its_column(tmp_path, program):
    with pytest.raises(KtuiError) as info:
        cli.load_inputs((), (f"x=/{program}:ktui_ad:c:a1",))
    assert str(info.value).startswith(f"-e #1:{len(f'x=/{program}:') + 1}: /{program} has no function ktui_ad")
    with pytest.raises(KtuiError, match=r"^-e #1:1: /nope: no such file$"):
        cli.load_inputs((), ("/nope:f:c",))
    f = tmp_path / "set.yaml"
    f.write_text(f"name: u\nprobes:\n  - {program}:nope:c\n")
    with pytest.raises(KtuiError, match=rf"^{f}:3:{len(f'  - {program}:') + 1}: {program} has no function nope"):
        cli.load_inputs((str(f),), ())
    assert cli.load_inputs((), (f"{program}:ktui_add:c:a1 if a1 > 1",)).probes[0].target.path == str(program)


def test_ktui_vm_inputs_do_not_read_the_hosts_files():
    # bind=False: the files are the guest's, not this machine's
    assert cli.load_inputs((), ("/nope:f:c",), bind=False).probes[0].target.path == "/nope"
