"""What ktui prints in the VM, and its exit status, reach the host
(issue 15: `ktui vm stream ... --duration 5` printed nothing and exited 0;
a startup error flashed and was cleared). On the host, with stand-ins: a
fake vng runs the guest script here, a fake tmux runs the pane's command,
and a fake `python -m ktui` does what $FAKE_KTUI says. What is checked is
the plumbing: stdout byte for byte, stderr, the status, the guest's log kept
beside the host's, and no file of the run left behind on any way out.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from ktui.vm import boot, launch
from ktui.vm.guestrun import GuestFiles, OutputPump, exit_status, keep_guest_log, terminal_text

FAKE_VNG = """#!/bin/bash
d="$(dirname "$0")"
echo "[    0.000000] Linux version (fake console)"
mount() { :; }; export -f mount
poweroff() { :; }; export -f poweroff
shell=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    [ "$1" = "--shell" ] && { shell=$2; shift; }
    shift
done
[ -n "$shell" ] && exec bash "$shell"
shift
bash -c "$1"
"""

# new-session: the pane's command, its terminal a file; capture-pane: that file
FAKE_TMUX = """#!/bin/bash
d="$(dirname "$0")"
for a; do last=$a; done
case " $* " in
    *" new-session "*) bash -c "$last" > "$d/pane" 2>&1 ;;
    *" capture-pane "*) printf '\\n%s\\n\\n\\n' "$(cat "$d/pane")" ;;
esac
"""

# `python -m ktui COMMAND ...`: logs a line where --log says, then $FAKE_KTUI
FAKE_PYTHON = """#!/bin/bash
d="$(dirname "$0")"
printf '%s\\n' "$@" > "$d/ktui-args"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    [ "${args[i]}" = --log ] && echo "guest log line" >> "${args[i+1]}"
done
eval "$FAKE_KTUI"
"""

# Belt and braces: the dashboard's guest script ends in `poweroff -f`, which
# the fake vng's exported function already swallows.
STUBS = {"vng": FAKE_VNG, "tmux": FAKE_TMUX, "python": FAKE_PYTHON, "poweroff": "#!/bin/sh\n"}


@pytest.fixture
def guest(tmp_path, monkeypatch) -> Path:
    """A bin/ folder standing in for the interpreter's, kernels to boot, a
    state directory of our own; the working directory is tmp_path/work."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, text in STUBS.items():
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    monkeypatch.setattr(boot, "interpreter_bin", lambda: bindir)
    monkeypatch.setattr("sys.executable", str(bindir / "python"))
    monkeypatch.setattr(boot, "BOOT", tmp_path)
    monkeypatch.setattr(boot, "MODULES", tmp_path)
    (tmp_path / "vmlinuz-6.1.0-3-amd64").touch()
    (tmp_path / "6.1.0-3-amd64" / "build").mkdir(parents=True)
    monkeypatch.setenv("KTUI_VM_KERNEL", "6.1.0-3-amd64")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return bindir


def left_behind(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "state" / "ktui" / "vm").iterdir())


def test_stream_output_comes_back_byte_for_byte_with_ktuis_status(guest, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("FAKE_KTUI", r'printf "{\"a\":1}\n{\"b\":\"\\u00e9\"}"; echo "ktui: oops" >&2; exit 4')
    rc = launch.run_in_vm(["stream", "-e", "vfs_read:c", "--duration", "5"], workload=False)
    out, err = capfd.readouterr()
    assert rc == 4
    assert out == '{"a":1}\n{"b":"\u00e9"}'  # stdout is ktui's alone (UTF-8 intact), no newline added
    assert err.splitlines()[-1] == "ktui: oops" and "fake console" not in out + err
    args = (guest / "ktui-args").read_text().splitlines()
    assert args[:4] == ["-m", "ktui", "stream", "--log"] and args[5:] == ["-e", "vfs_read:c", "--duration", "5"]
    assert left_behind(tmp_path) == []
    assert (tmp_path / "state" / "ktui" / "ktui-vm.log").read_text() == "guest log line\n"


def test_a_dashboard_startup_error_reaches_the_host(guest, tmp_path, monkeypatch, capfd):
    """The full screen draws on stderr, so what ktui left on its terminal is
    captured from the pane once it ended, and printed here."""
    monkeypatch.setenv("FAKE_KTUI", 'echo "ktui: -e #1:5: bad spec" >&2; exit 1')
    rc = launch.run_in_vm(["run", "-e", "x"], workload=False)
    out, err = capfd.readouterr()
    assert rc == 1
    assert "bad spec" not in out  # (out is the guest console: the terminal itself)
    assert err.count("ktui: -e #1:5: bad spec") == 1
    assert err.rstrip().endswith("ktui: -e #1:5: bad spec")  # blank pane rows dropped
    assert left_behind(tmp_path) == []


def test_a_vm_that_ends_before_ktui_is_exit_3_with_the_console(guest, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("FAKE_KTUI", "echo partial; kill -9 $PPID")  # the guest script dies first
    rc = launch.run_in_vm(["stream", "-e", "vfs_read:c"], workload=False)
    out, err = capfd.readouterr()
    assert rc == 3
    assert out == "partial\n"
    assert "the VM ended before ktui did" in err and "fake console" in err
    assert left_behind(tmp_path) == []


def _when(path: Path, then, within: float = 30.0) -> threading.Thread:
    """Call THEN once PATH exists (the fake ktui has started)."""
    def wait():
        deadline = time.monotonic() + within
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        then()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


def test_ctrl_c_stops_ktui_in_the_guest_and_its_summary_comes_back(guest, tmp_path, monkeypatch, capfd):
    # A shell that starts a job in the background (CI, `make test &`) leaves
    # SIGINT ignored, and Python then never raises KeyboardInterrupt: give
    # this test the handler a terminal's Ctrl-C meets.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    # bounded: if the interrupt never comes, fail in 30 s rather than hang
    monkeypatch.setenv("FAKE_KTUI", f'trap "echo summary >&2; exit 130" INT; touch {tmp_path}/started; '
                                    "i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done")
    try:
        _ctrl_c_and_summary(tmp_path, capfd)
    finally:
        signal.signal(signal.SIGINT, previous)


def _ctrl_c_and_summary(tmp_path, capfd):
    _when(tmp_path / "started", lambda: os.kill(os.getpid(), signal.SIGINT))
    rc = launch.run_in_vm(["stream", "-e", "vfs_read:c"], workload=False)
    err = capfd.readouterr().err
    assert rc == 130
    assert "stopping ktui in the VM" in err and err.splitlines()[-1] == "summary"
    assert left_behind(tmp_path) == []


def test_sigterm_takes_the_vm_down_and_leaves_nothing(guest, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("FAKE_KTUI", f"echo before; touch {tmp_path}/started; sleep 300")
    _when(tmp_path / "started", lambda: os.kill(os.getpid(), signal.SIGTERM))
    rc = launch.run_in_vm(["stream", "-e", "vfs_read:c"], workload=False)
    out, err = capfd.readouterr()
    assert rc == 128 + signal.SIGTERM
    assert out == "before\n" and "stopped; the VM is down" in err
    assert left_behind(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back


def test_the_pump_copies_only_what_is_new(tmp_path):
    class Sink:
        def __init__(self):
            self.data = b""

        def write(self, b):
            self.data += b

        def flush(self):
            pass

    sink = Sink()
    path = tmp_path / "out"
    pump = OutputPump(path, sink)
    pump.pump()  # not there yet
    path.write_bytes(b'{"a":1}\n{"b"')
    pump.pump()
    with open(path, "ab") as f:
        f.write(b":2}\n")
    pump.pump()
    pump.pump()
    assert sink.data == b'{"a":1}\n{"b":2}\n'


def test_status_pane_text_and_kept_log(tmp_path):
    files = GuestFiles.in_dir(tmp_path, "t")
    assert exit_status(files) is None
    files.status.write_text("garbage\n")
    assert exit_status(files) is None
    files.status.write_text("4\n")
    assert exit_status(files) == 4
    files.stderr.write_text("\n\n  ktui: no kprobes  \nsecond\n\n\n")
    assert terminal_text(files.stderr) == "  ktui: no kprobes\nsecond"
    assert keep_guest_log(files, tmp_path / "logs") is None  # nothing logged, nothing kept
    files.log.write_text("one")
    keep_guest_log(files, tmp_path / "logs")
    files.log.write_text("two\n")
    kept = keep_guest_log(files, tmp_path / "logs")
    assert kept.read_text() == "one\ntwo\n" and kept.stat().st_mode & 0o777 == 0o600
    files.remove()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]


def test_the_guests_cache_outlives_the_boot(guest, tmp_path, capfd, monkeypatch):
    """The guest's home is read-only: its ktui caches where the next boot
    finds them again (the run directory)."""
    monkeypatch.setenv("FAKE_KTUI", f'echo "$XDG_CACHE_HOME" > {tmp_path}/xdg; exit 0')
    assert launch.run_in_vm(["stream", "-e", "vfs_read:c"], workload=False) == 0
    cache = tmp_path / "state" / "ktui" / "vm" / "cache"
    assert (tmp_path / "xdg").read_text() == f"{cache}\n"  # where the guest's ktui looks
    assert "(about 30 s)..." in capfd.readouterr().err
