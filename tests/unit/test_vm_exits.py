"""No leftovers after any exit of `ktui vm` or `python -m ktui.vm`
(issue 15: a killed `ktui vm` left its guest script behind): the run's
files go on SIGTERM, stale ones of runs killed outright are swept at the
next start (their guest log kept), and a dashboard stopped by SIGTERM takes
QEMU down with it (a child of virtme-run, which survived vng) and gives the
terminal back as it was. On the host, with the stand-ins of
test_vm_passthrough (a fake vng, tmux and ktui)."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import termios
from pathlib import Path

import pytest

from ktui.vm import launch
from ktui.vm.__main__ import main as vm_main
from tests.unit.test_vm import _ends
from tests.unit.test_vm_passthrough import _when, guest, left_behind  # noqa: F401 (a fixture)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


@pytest.fixture
def terminal_on_stdin():
    """A pseudo-terminal as fd 0 for the test, as a user's terminal would be."""
    master, slave = pty.openpty()
    saved = os.dup(0)
    os.dup2(slave, 0)
    try:
        yield master
    finally:
        os.dup2(saved, 0)
        for fd in (saved, slave, master):
            os.close(fd)


def test_sigterm_to_a_dashboard_stops_qemu_and_gives_the_terminal_back(guest, tmp_path, monkeypatch, capfd,
                                                                        terminal_on_stdin):
    before = termios.tcgetattr(0)
    # QEMU's part: raw mode on the terminal, and a process of its own
    monkeypatch.setenv("FAKE_KTUI", f"stty raw -echo; sleep 300 & echo $! > {tmp_path}/qemu; "
                                    f"touch {tmp_path}/started; wait")
    _when(tmp_path / "started", lambda: os.kill(os.getpid(), signal.SIGTERM))
    rc = launch.run_in_vm(["run"], workload=False)
    assert rc == 128 + signal.SIGTERM
    assert _ends(int((tmp_path / "qemu").read_text())), "QEMU's stand-in still runs"
    assert termios.tcgetattr(0) == before
    assert os.read(terminal_on_stdin, 4096).startswith(b"\x1b[?1049l\x1b[?25h")  # screen modes undone
    assert left_behind(tmp_path) == []
    assert "stopped; the VM is down" in capfd.readouterr().err


def test_a_run_killed_outright_is_swept_at_the_next_start(guest, tmp_path, monkeypatch):
    rundir = tmp_path / "state" / "ktui" / "vm"
    (rundir / "cache").mkdir(parents=True)
    dead, alive = _dead_pid(), os.getppid()
    for name in (f"ktui-vm-{dead}.sh", f"ktui-vm-{dead}.status", f"ktui-vm-{dead}.size.tmp",
                 f"ktui-vm-{alive}.sh", "notes.txt"):
        (rundir / name).write_text("x\n")
    (rundir / f"ktui-vm-{dead}.log").write_text("the killed run's log\n")
    monkeypatch.setenv("FAKE_KTUI", "exit 0")
    assert launch.run_in_vm(["stream", "-e", "vfs_read:c"], workload=False) == 0
    assert left_behind(tmp_path) == sorted(["cache", f"ktui-vm-{alive}.sh", "notes.txt"])
    kept = (tmp_path / "state" / "ktui" / "ktui-vm.log").read_text()
    assert kept == "the killed run's log\nguest log line\n"


@pytest.fixture
def kernel(tmp_path, monkeypatch, guest):  # noqa: F811 (the fixture above)
    return "6.1.0-3-amd64"


def test_python_m_ktui_vm_sweeps_vmout_and_leaves_nothing_on_sigterm(kernel, tmp_path, capfd):
    vmout = tmp_path / "work" / ".vmout"
    vmout.mkdir()
    dead = _dead_pid()
    for name in (f"guest-{dead}.log", f"rc-{dead}", f"console-{dead}.log", "e2e-screen.txt"):
        (vmout / name).write_text("x")
    assert vm_main(["--kernel", kernel, "--", "true"]) == 0
    assert sorted(p.name for p in vmout.iterdir()) == ["e2e-screen.txt"]

    _when(tmp_path / "started", lambda: os.kill(os.getpid(), signal.SIGTERM))
    rc = vm_main(["--kernel", kernel, "--", f"touch {tmp_path}/started; sleep 300"])
    assert rc == 128 + signal.SIGTERM
    assert "the VM is down" in capfd.readouterr().err
    assert sorted(p.name for p in vmout.iterdir()) == ["e2e-screen.txt"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_python_m_ktui_vm_on_ctrl_c_is_one_line_and_leaves_nothing(kernel, tmp_path, capfd):
    vmout = tmp_path / "work" / ".vmout"
    # a shell that started us in the background ignores SIGINT: give the
    # test the handler a terminal's Ctrl-C meets
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _when(tmp_path / "started", lambda: os.kill(os.getpid(), signal.SIGINT))
        rc = vm_main(["--kernel", kernel, "--", f"touch {tmp_path}/started; sleep 300"])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert rc == 130
    assert capfd.readouterr().err.splitlines()[-1] == "vm: interrupted: the VM is down"
    assert list(vmout.iterdir()) == []
