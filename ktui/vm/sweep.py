"""Stale run files: what a `ktui vm` or `python -m ktui.vm` killed outright
(SIGKILL, a power cut) could not remove itself.

Every run names its files by the host pid that started it (guestrun.GuestFiles,
boot.RunFiles), and several runs may share a folder (the state folder's
vm/ for every checkout, a checkout's .vmout/ for its worktrees' tools), so
a run sweeps only the files of runs whose process is gone. A stale
`ktui vm` run's guest log is kept beside the host's log first, as its own
run would have.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

# ktui vm: ktui-vm-PID.sh, .status, .out, ... (and .size.tmp, mid-rename)
GUEST_FILE = re.compile(r"ktui-vm-(\d+)\.[a-z.]+")
# python -m ktui.vm: guest-PID.log, rc-PID, console-PID.log
RUN_FILE = re.compile(r"(?:guest|rc|console|cmd)-(\d+)(?:\.log|\.sh)?")


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    return True


def sweep_stale(rundir: Path, pattern: re.Pattern[str],
                before_removing: Callable[[int], None] | None = None) -> list[Path]:
    """Remove the files in RUNDIR named by PATTERN (its group 1: a pid)
    whose process is gone; BEFORE_REMOVING(pid) runs once per dead run
    first. The files removed."""
    try:
        entries = list(rundir.iterdir())
    except OSError:
        return []
    dead: dict[int, list[Path]] = {}
    for path in entries:
        match = pattern.fullmatch(path.name)
        if match is None or not path.is_file():
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and not pid_alive(pid):
            dead.setdefault(pid, []).append(path)
    removed = []
    for pid, paths in sorted(dead.items()):
        if before_removing is not None:
            before_removing(pid)
        for path in paths:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
