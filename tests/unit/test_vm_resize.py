"""The dashboard in the VM follows the host terminal's size (issue 15:
resizing the host terminal did not resize the dashboard in the VM). On the
host, with the stand-ins of test_vm_passthrough: a SIGWINCH to `ktui vm`
must reach the guest as an stty of the console to the new size and a
SIGWINCH to the tmux client."""

from __future__ import annotations

import os
import signal

from ktui.vm import launch, resize
from ktui.vm.guestrun import GuestFiles
from ktui.vm.resize import write_size
from tests.unit.test_vm_passthrough import _when, guest, left_behind  # noqa: F401 (a fixture)

FAKE_STTY = '#!/bin/bash\necho "$*" >> "$(dirname "$0")/stty-calls"\n'
# list-clients: the fake ktui stands in for the tmux client that gets SIGWINCH
LIST_CLIENTS = '    *" list-clients "*) cat "$d/client" 2>/dev/null ;;\n'


def _stub(bindir, name, text):
    (bindir / name).write_text(text)
    (bindir / name).chmod(0o755)


def test_a_host_resize_reaches_the_guest_console_and_tmux(guest, tmp_path, monkeypatch):
    _stub(guest, "stty", FAKE_STTY)
    tmux = (guest / "tmux").read_text().replace("esac", LIST_CLIENTS + "esac")
    _stub(guest, "tmux", tmux)
    sizes = [os.terminal_size((100, 30))]
    monkeypatch.setattr(resize, "host_terminal_size", lambda: sizes[-1])
    monkeypatch.setattr(launch.dashboard, "host_terminal_size", lambda: sizes[-1])
    # ktui: exit 7 on SIGWINCH, 1 if none came within 30 s
    monkeypatch.setenv("FAKE_KTUI", f"echo $$ > {guest}/client; trap 'exit 7' WINCH; touch {tmp_path}/started; "
                                    "i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; exit 1")

    def resized():
        sizes.append(os.terminal_size((132, 50)))
        os.kill(os.getpid(), signal.SIGWINCH)

    _when(tmp_path / "started", resized)
    previous = signal.getsignal(signal.SIGWINCH)
    assert launch.run_in_vm(["run"], workload=False) == 7
    calls = (guest / "stty-calls").read_text().splitlines()
    assert [c.split()[2:] for c in calls] == [["rows", "30", "cols", "100"], ["rows", "50", "cols", "132"]]
    assert all(c.startswith("-F ") for c in calls)  # the console, not the loop's /dev/null
    assert left_behind(tmp_path) == []
    assert signal.getsignal(signal.SIGWINCH) is previous


def test_the_size_file_is_whole_and_only_sizes(tmp_path):
    files = GuestFiles.in_dir(tmp_path, 1)
    write_size(files.size, None)
    assert not files.size.exists()
    write_size(files.size, os.terminal_size((80, 24)))
    assert files.size.read_text() == "rows 24 cols 80\n"
    assert resize.SIZE_LINE.fullmatch(files.size.read_text().strip())
    files.remove()
    assert list(tmp_path.iterdir()) == []
