"""`ktui vm`: the dashboard inside a throwaway VM with a stock Debian kernel.

For machines like our build hosts, whose kernel has no kprobes or is locked
down. vm/boot.py boots the kernel under software emulation with the host's
root filesystem shared read-only, so the ktui that runs this (its
interpreter, its venv, bcc, the headers) runs inside too, from the same
directory; the dashboard gets the guest console as its terminal, at the host
terminal's size. A small background workload gives it something to show.

The guest script lives in a run folder under ktui's state directory (the
guest may write there, and later runs can leave their logs beside it); the
current directory is writable too, so a probe set saved in the dashboard is
there after the VM is gone.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from ktui.exits import EXIT_ENVIRONMENT
from ktui.kernel.quiet import default_log_path
from ktui.vm.boot import Machine, VmError, guest_prelude, run_shell

# Reads, writes, opens and a little networking, forever, at a gentle pace.
WORKLOAD = r"""
( while :; do
    head -c 65536 /dev/zero > /tmp/ktui-demo; cat /tmp/ktui-demo > /dev/null
    ls /proc > /dev/null; cat /proc/loadavg > /dev/null; sleep 0.2
  done ) > /dev/null 2>&1 &
"""


def run_dir() -> Path:
    """Where `ktui vm` keeps what the guest needs to see (and may write)."""
    return default_log_path().parent / "vm"


def guest_script(args: list[str], workload: bool, cwd: Path) -> str:
    if not any(a == "--refresh" or a.startswith("--refresh=") for a in args):
        # The guest console is an emulated serial line: at 15 screen updates a
        # second a 160x45 dashboard never caught up; once a second it is fluid.
        args = ["--refresh", "1", *args]
    # The interpreter that runs this very ktui, wherever it is installed.
    ktui = shlex.join([sys.executable, "-m", "ktui", "run", *args])
    try:  # the guest's serial console does not learn the host terminal's size
        size = os.get_terminal_size()
        stty = f"stty rows {size.lines} cols {size.columns} 2>/dev/null; unset COLUMNS LINES"
    except OSError:
        stty = ""
    # The guest's home is read-only: the generic program's cache lives in the
    # run directory, so a second `ktui vm` on the same kernel starts warm.
    cache = shlex.quote(str(run_dir() / "cache"))
    return "\n".join([
        "#!/bin/bash",
        stty,
        guest_prelude(cwd),
        f"export XDG_CACHE_HOME={cache}",
        WORKLOAD if workload else "",
        # The dashboard runs in tmux inside the guest, on a private socket.
        # Written straight to the guest console, its output stalled mid-frame
        # after some seconds (keys unanswered, the VM still up); through tmux,
        # which redraws only what changed, it keeps going. SHELL: the guest's
        # shell is this very script, which tmux would run again otherwise.
        "if command -v tmux >/dev/null; then",
        f"    SHELL=/bin/bash tmux -u -S /run/ktui-vm.tmux new-session -s ktui {shlex.quote(ktui)}",
        "else",
        f"    {ktui}",
        "fi",
        "poweroff -f >/dev/null 2>&1",
        "",
    ])


def run_in_vm(args: list[str], kernel: str | None = None, workload: bool = True) -> int:
    cwd = Path.cwd()
    rundir = run_dir()
    rundir.mkdir(parents=True, exist_ok=True, mode=0o700)
    writable = (rundir,) if cwd == Path("/") else (rundir, cwd)
    try:
        machine = Machine.from_env(kernel, cwd=cwd, rwdirs=writable)
    except VmError as exc:
        print(f"ktui vm: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    script = rundir / f"ktui-vm-{os.getpid()}.sh"
    script.write_text(guest_script(args, workload, cwd))
    script.chmod(0o755)
    print("ktui vm: booting a stock kernel under emulation (about 30 s, then a compile)...",
          flush=True)
    try:
        return run_shell(machine, script)
    except VmError as exc:
        print(f"ktui vm: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    finally:
        script.unlink(missing_ok=True)
