"""`ktui vm`: the dashboard inside a throwaway VM with a stock Debian kernel.

For machines like our build hosts, whose kernel has no kprobes or is locked
down. scripts/vm.sh boots the kernel under software emulation with the host's
root filesystem shared read-only, so this very checkout (venv, bcc, headers)
runs inside; the dashboard gets the guest console as its terminal, at the
host terminal's size. A small background workload gives it something to show.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Reads, writes, opens and a little networking, forever, at a gentle pace.
WORKLOAD = r"""
( while :; do
    head -c 65536 /dev/zero > /tmp/ktui-demo; cat /tmp/ktui-demo > /dev/null
    ls /proc > /dev/null; cat /proc/loadavg > /dev/null; sleep 0.2
  done ) > /dev/null 2>&1 &
"""


def guest_script(args: list[str], workload: bool) -> str:
    if not any(a == "--refresh" or a.startswith("--refresh=") for a in args):
        # The guest console is an emulated serial line: at 15 screen updates a
        # second a 160x45 dashboard never caught up; once a second it is fluid.
        args = ["--refresh", "1", *args]
    ktui = shlex.join([str(REPO / ".venv" / "bin" / "ktui"), "run", *args])
    try:  # the guest's serial console does not learn the host terminal's size
        size = os.get_terminal_size()
        stty = f"stty rows {size.lines} cols {size.columns} 2>/dev/null; unset COLUMNS LINES"
    except OSError:
        stty = ""
    return "\n".join([
        "#!/bin/bash",
        stty,
        "mount -t debugfs none /sys/kernel/debug 2>/dev/null",
        f"cd {shlex.quote(str(REPO))}",
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
    outdir = REPO / ".vmout"
    outdir.mkdir(exist_ok=True)
    script = outdir / f"ktui-vm-{os.getpid()}.sh"
    script.write_text(guest_script(args, workload))
    script.chmod(0o755)
    cmd = [str(REPO / "scripts" / "vm.sh")]
    if kernel:
        cmd += ["--kernel", kernel]
    cmd += ["--shell", "--", str(script)]
    print("ktui vm: booting a stock kernel under emulation (about 30 s, then a compile)...",
          flush=True)
    try:
        return subprocess.call(cmd)
    finally:
        script.unlink(missing_ok=True)
