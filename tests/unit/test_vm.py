"""The VM launcher (ktui/vm/) on the host, with a stand-in for vng.

The real VM runs the kernel tests (make test-kernel boots it through the
same code). Here a fake `vng` runs the guest's shell command on the host, so
what the launcher promises can be checked without a VM: the guest runs the
interpreter that runs ktui (no checkout path), output comes back through a
file, the command's exit status passes through, and a guest that never
finishes gets its console log shown and exit 3.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

import pytest

from ktui.vm import boot
from ktui.vm.__main__ import main as vm_main
from ktui.vm.boot import Machine, VmError, run_command
from ktui.vm.dashboard import guest_script
from ktui.vm.guestrun import GuestFiles

REPO = Path(__file__).resolve().parents[2]

# Records its arguments, prints console noise, then runs what follows `--`
# with bash, as the guest would (but on the host, in the same process group;
# `mount` does nothing there: the guest's debugfs mount is not for the host).
FAKE_VNG = """#!/bin/bash
printf '%s\\0' "$@" > "$(dirname "$0")/vng-args"
echo "$PATH" > "$(dirname "$0")/vng-path"
echo "[    0.000000] Linux version (fake console)"
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
echo $$ > "$(dirname "$0")/vng-pid"
export FAKE_VNG_DIR="$(dirname "$0")"
mount() { echo "mount $*" >> "$FAKE_VNG_DIR/mounts"; }
export -f mount
bash -c "$1"
"""


@pytest.fixture
def fake_vng(tmp_path, monkeypatch) -> Path:
    """A bin/ folder with the fake vng, standing in for the interpreter's."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "vng").write_text(FAKE_VNG)
    (bindir / "vng").chmod(0o755)
    monkeypatch.setattr(boot, "interpreter_bin", lambda: bindir)
    return bindir


def vng_args(bindir: Path) -> list[str]:
    return (bindir / "vng-args").read_bytes().decode().split("\0")[:-1]


def machine(cwd: Path, **kw) -> Machine:
    return Machine(kernel="6.1.0-0-amd64", cwd=cwd, rwdirs=(cwd,), **kw)


def test_output_and_exit_status_come_back(fake_vng, tmp_path, capfd):
    rc = run_command(machine(tmp_path), "echo out; echo err >&2; pwd; exit 7", rundir=tmp_path / ".vmout")
    assert rc == 7
    out, err = capfd.readouterr()
    assert out == f"out\nerr\n{tmp_path}\n"  # merged, from the guest's cwd
    assert "fake console" not in out + err  # the console stays in its log
    assert list((tmp_path / ".vmout").iterdir()) == []  # a finished run leaves nothing
    assert (fake_vng / "mounts").read_text() == "mount -t debugfs none /sys/kernel/debug\n"


def test_vng_and_the_guest_find_the_interpreters_bin_first(fake_vng, tmp_path, capfd):
    assert run_command(machine(tmp_path), 'echo "$PATH"', rundir=tmp_path / ".vmout") == 0
    assert capfd.readouterr().out.split(":")[0] == str(fake_vng)
    # vng starts virtme-run by name: it must find the one beside it
    assert (fake_vng / "vng-path").read_text().split(":")[0] == str(fake_vng)


def test_the_guest_command_runs_with_the_environment_it_is_given(fake_vng, tmp_path, capfd):
    env = {"XDG_CACHE_HOME": str(tmp_path / "a dir"), "KTUI_TEST_FLAG": "1"}
    rc = run_command(machine(tmp_path), 'echo "$XDG_CACHE_HOME|$KTUI_TEST_FLAG"', rundir=tmp_path / ".vmout",
                     env=env)
    assert rc == 0
    assert capfd.readouterr().out == f"{tmp_path}/a dir|1\n"


def test_a_guest_that_never_finishes_shows_its_console_and_exits_3(fake_vng, tmp_path, capfd):
    # `kill -9 $PPID`: the guest shell (the command runs as its child) dies
    # before it can write the status file
    rc = run_command(machine(tmp_path), "echo partial; kill -9 $PPID", rundir=tmp_path / ".vmout")
    assert rc == 3
    out, err = capfd.readouterr()
    assert out == "partial\n"
    assert "the guest did not finish" in err and "fake console" in err


def test_a_timeout_takes_the_whole_vm_down(fake_vng, tmp_path, capfd):
    rc = run_command(machine(tmp_path), "sleep 300 & echo $! > child; wait", rundir=tmp_path / ".vmout",
                     timeout=1)
    assert rc == 3
    assert "no result after 1 s" in capfd.readouterr().err
    # vng and what it started (QEMU, here a sleep) were one process group
    for pid in ((fake_vng / "vng-pid").read_text(), (tmp_path / "child").read_text()):
        assert _ends(int(pid)), f"pid {pid} still running"


def _ends(pid: int, within: float = 30.0) -> bool:
    """The process is gone (a killed one may linger a moment as a zombie
    before whoever inherited it reaps it)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_vng_options_follow_the_environment(fake_vng, tmp_path, monkeypatch):
    run_command(machine(tmp_path), "true", rundir=tmp_path / ".vmout")
    args = vng_args(fake_vng)
    assert "--qemu-opts=-accel tcg,thread=single" in args and "-v" not in args
    assert args[args.index("--rwdir") + 1] == str(tmp_path)
    assert args[args.index("-r") + 1] == "/boot/vmlinuz-6.1.0-0-amd64"

    monkeypatch.setattr(boot, "BOOT", tmp_path)
    monkeypatch.setattr(boot, "MODULES", tmp_path)
    (tmp_path / "vmlinuz-6.1.0-9-amd64").touch()
    (tmp_path / "6.1.0-9-amd64" / "build").mkdir(parents=True)
    monkeypatch.setenv("KTUI_VM_QEMU_OPTS", "")
    monkeypatch.setenv("KTUI_VM_VERBOSE", "1")
    m = Machine.from_env(None, cwd=tmp_path, rwdirs=(tmp_path,))
    assert m.kernel == "6.1.0-9-amd64"  # the newest 6.1 under /boot
    args = m.vng_args()
    assert "-v" in args and not any(a.startswith("--qemu-opts") for a in args)
    monkeypatch.setenv("KTUI_VM_QEMU_OPTS", "-accel tcg")
    assert "--qemu-opts=-accel tcg" in Machine.from_env(None, cwd=tmp_path, rwdirs=()).vng_args()


def test_newest_kernel_sorts_versions_as_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(boot, "BOOT", tmp_path)
    for v in ("6.1.0-9-amd64", "6.1.0-57-amd64", "6.12.117+deb12-amd64"):
        (tmp_path / f"vmlinuz-{v}").touch()
    assert boot.newest_kernel() == "6.1.0-57-amd64"
    assert boot.newest_kernel("6.12") == "6.12.117+deb12-amd64"
    assert boot.newest_kernel("5.10") is None


def test_a_missing_kernel_or_headers_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(boot, "BOOT", tmp_path)
    monkeypatch.setattr(boot, "MODULES", tmp_path)
    assert vm_main(["--kernel", "6.1.0-1-amd64", "--", "true"]) == 2
    assert capsys.readouterr().err == f"vm: no kernel image {tmp_path}/vmlinuz-6.1.0-1-amd64 " \
                                      "(run scripts/install.sh --test)\n"
    (tmp_path / "vmlinuz-6.1.0-1-amd64").touch()
    with pytest.raises(VmError, match="headers for 6.1.0-1-amd64 missing"):
        Machine.from_env("6.1.0-1-amd64", cwd=tmp_path, rwdirs=())


def test_python_m_ktui_vm_runs_the_command_from_here(fake_vng, tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(boot, "BOOT", tmp_path)
    monkeypatch.setattr(boot, "MODULES", tmp_path)
    (tmp_path / "vmlinuz-6.1.0-3-amd64").touch()
    (tmp_path / "6.1.0-3-amd64" / "build").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert vm_main(["--kernel", "6.1.0-3-amd64", "--", "echo", "a", "b;", "exit", "5"]) == 5
    assert capfd.readouterr().out == "a b\n"


def _tmux_line(script: str) -> list[str]:
    line = next(ln for ln in script.splitlines() if "tmux" in ln and "new-session" in ln)
    return shlex.split(line)


def test_the_dashboard_runs_the_interpreter_that_runs_ktui(monkeypatch, tmp_path):
    """Not the checkout's .venv: whatever Python runs `ktui vm` runs inside."""
    monkeypatch.setattr(sys, "executable", "/opt/elsewhere/bin/python3")
    files = GuestFiles.in_dir(tmp_path, "t")
    script = guest_script(["run"], workload=False, cwd=tmp_path, files=files)
    assert "export PATH=/opt/elsewhere/bin:$PATH" in script
    assert f"cd {shlex.quote(str(tmp_path))}" in script
    assert str(REPO) not in script
    pane = _tmux_line(script)[-1]  # ktui, then its status and what it left on the pane
    ktui = pane.split(";")[0]
    assert shlex.split(ktui) == ["/opt/elsewhere/bin/python3", "-m", "ktui", "run", "--log", str(files.log),
                                 "--refresh", "1"]
    assert f"echo $? > {files.status}" in pane
    assert f"capture-pane -p -J -S - > {files.stderr}" in pane


def test_the_dashboard_runs_in_a_private_tmux_with_a_plain_shell(tmp_path):
    script = guest_script(["run"], workload=False, cwd=tmp_path, files=GuestFiles.in_dir(tmp_path, "t"))
    line = next(ln for ln in script.splitlines() if "tmux" in ln and "new-session" in ln)
    # its own socket under /run (the guest's tmpfs), not the default in /tmp
    assert "-S /run/ktui-vm.tmux" in line
    # the guest's shell is this script; tmux must not run it again for the command
    assert line.strip().startswith("SHELL=/bin/bash ")
    assert "-m ktui run --log" in line and "--refresh 1" in line
    # and the VM goes down when the dashboard ends
    assert script.rstrip().endswith("poweroff -f >/dev/null 2>&1")


def test_without_tmux_the_dashboard_runs_on_the_console(tmp_path):
    files = GuestFiles.in_dir(tmp_path, "t")
    script = guest_script(["run", "--refresh", "2", "--log", "x.log"], workload=False, cwd=tmp_path, files=files)
    fallback = script.split("else", 1)[1]
    assert "-m ktui run --refresh 2 --log x.log;" in fallback  # the user's own, not ours
    assert f"echo $? > {files.status}" in fallback


def test_vm_sh_is_a_thin_wrapper_around_the_module():
    text = (REPO / "scripts" / "vm.sh").read_text()
    assert 'exec "$python" -m ktui.vm "$@"' in text  # no second copy of the boot logic


def test_a_guest_stuck_before_its_command_is_booted_once_more(fake_vng, tmp_path, monkeypatch, capfd):
    """QEMU was seen idle from its start (no boot, nothing on the console):
    after KTUI_VM_BOOT_TIMEOUT without the command started, the VM goes down
    whole and boots again, once; the second boot runs the command."""
    vng = fake_vng / "vng"
    real = vng.read_text()
    # the first "boot" hangs before the command (its QEMU, a sleep, is recorded)
    vng.write_text(real.replace("bash -c \"$1\"",
                                'if [ ! -e "$FAKE_VNG_DIR/booted" ]; then touch "$FAKE_VNG_DIR/booted"; '
                                'sleep 300 & echo $! > "$FAKE_VNG_DIR/stuck"; wait; fi\nbash -c "$1"'))
    monkeypatch.setenv("KTUI_VM_BOOT_TIMEOUT", "1")
    rc = run_command(machine(tmp_path), "echo ran; exit 5", rundir=tmp_path / ".vmout")
    out, err = capfd.readouterr()
    assert rc == 5 and out == "ran\n", (rc, out, err)
    assert "had not started the command after 1 s" in err and "booting it again" in err
    assert _ends(int((fake_vng / "stuck").read_text())), "the stuck boot's QEMU is still running"


def test_a_guest_that_never_starts_its_command_gives_up_after_two_boots(fake_vng, tmp_path, monkeypatch, capfd):
    vng = fake_vng / "vng"
    vng.write_text(vng.read_text().replace("bash -c \"$1\"", "sleep 300"))
    monkeypatch.setenv("KTUI_VM_BOOT_TIMEOUT", "1")
    rc = run_command(machine(tmp_path), "echo ran", rundir=tmp_path / ".vmout")
    err = capfd.readouterr().err
    assert rc == 3
    assert err.count("had not started the command") == 2 and "giving up" in err


def test_a_long_command_stays_off_the_kernel_command_line(fake_vng, tmp_path, capfd):
    """vng hands the guest's command over on the kernel command line, which
    x86 cuts at 2048 bytes: CI's 6.12 pytest line (2235 bytes with its
    --deselects) left the guest idle before it ran anything. The command
    goes in a file; what vng is given stays short whatever its length."""
    words = " ".join(f"w{i:04d}" for i in range(1000))  # ~6 KB
    rc = run_command(machine(tmp_path), f"echo {words} | wc -w", rundir=tmp_path / ".vmout")
    assert rc == 0 and capfd.readouterr().out.strip() == "1000"
    passed = vng_args(fake_vng)[-1]
    assert "w0999" not in passed and len(passed) < 1024, passed
    assert not list((tmp_path / ".vmout").glob("cmd-*"))  # the file goes with the run
