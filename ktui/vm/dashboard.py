"""`ktui vm` for the dashboard (`run`, `replay`): the full screen inside a
throwaway VM with a stock Debian kernel.

vm/boot.py boots the kernel under software emulation with the host's root
filesystem shared read-only, so the ktui that runs this (its interpreter,
its venv, bcc, the headers) runs inside too, from the same directory; the
dashboard gets the guest console as its terminal, at the host terminal's
size, which follows the host terminal's when it is resized (resize.py).
A small background workload gives it something to show. The current
directory is writable too, so a probe set saved in the dashboard is there
after the VM is gone.

The full screen draws on stderr, so ktui's stderr cannot go to a file here:
once ktui has ended, the guest captures what is left on its tmux pane (an
error before the screen started, a message after it ended) into the run's
stderr file with ktui's exit status beside it; guestrun.report prints both
on the host after the VM is down (they flashed and were cleared before).
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from ktui.vm.boot import Machine, host_env, stop_process_group
from ktui.vm.guest import ktui_argv, setup_lines
from ktui.vm.guestrun import GuestFiles
from ktui.vm.resize import guest_lines, host_terminal_size, size_follows_host
from ktui.vm.terminal import kept_terminal

TMUX_SOCKET = "/run/ktui-vm.tmux"  # the guest's tmpfs, not the default under /tmp


def guest_script(argv: list[str], workload: bool, cwd: Path, files: GuestFiles) -> str:
    ktui = shlex.join(ktui_argv(argv, files))
    status = f"echo $? > {shlex.quote(str(files.status))}"
    # -J joins the lines the terminal's width wrapped; -S -: from the pane's start
    capture = f"tmux -S {TMUX_SOCKET} capture-pane -p -J -S - > {shlex.quote(str(files.stderr))}"
    return "\n".join([
        "#!/bin/bash",
        *setup_lines(cwd, workload),
        # the guest's serial console does not learn the host terminal's size
        guest_lines(files.size, TMUX_SOCKET, host_terminal_size()),
        # The dashboard runs in tmux inside the guest, on a private socket.
        # Written straight to the guest console, its output stalled mid-frame
        # after some seconds (keys unanswered, the VM still up); through tmux,
        # which redraws only what changed, it keeps going. SHELL: the guest's
        # shell is this very script, which tmux would run again otherwise.
        "if command -v tmux >/dev/null; then",
        f"    SHELL=/bin/bash tmux -u -S {TMUX_SOCKET} new-session -s ktui "
        f"{shlex.quote(f'{ktui}; {status}; {capture}')}",
        "else",
        f"    {ktui}; {status}",
        "fi",
        "poweroff -f >/dev/null 2>&1",
        "",
    ])


def run_dashboard(machine: Machine, files: GuestFiles) -> int:
    """vng's status; the guest console is this terminal (its size, its TERM).

    vng, virtme-run and QEMU get a session of their own (QEMU is a child of
    virtme-run, which a SIGTERM to vng alone left running with the
    terminal): on an exception (Ctrl-C before QEMU took the terminal, a
    stop signal) the whole group is stopped before it is raised on, and the
    terminal's settings are put back either way. Outside our session the
    terminal is still theirs to read and write (no job control applies to a
    terminal that is not one's controlling terminal)."""
    with kept_terminal(0), size_follows_host(files.size):
        proc = subprocess.Popen([*machine.vng_args(), "--shell", str(files.script)], cwd=machine.cwd,
                                env=host_env(), start_new_session=True)
        try:
            return proc.wait()
        except BaseException:
            stop_process_group(proc)
            raise
