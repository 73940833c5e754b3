"""The guest's side of a `ktui vm` run, common to the dashboard and the
headless commands: the shell lines it starts with (where, which Python, a
cache, a workload) and the ktui command line it runs.

The ktui in the guest is the interpreter that runs this very ktui, wherever
it is installed; its log goes to the run's file in the shared run folder
(guestrun.py keeps it beside the host's log), since the guest's home is a
throwaway overlay.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from ktui.kernel.quiet import default_log_path
from ktui.lang.save_place import SHARED_ENV
from ktui.vm.boot import guest_prelude
from ktui.vm.guestrun import GuestFiles

# Reads, writes, opens and a little networking, forever, at a gentle pace.
WORKLOAD = r"""
( while :; do
    head -c 65536 /dev/zero > /tmp/ktui-demo; cat /tmp/ktui-demo > /dev/null
    ls /proc > /dev/null; cat /proc/loadavg > /dev/null; sleep 0.2
  done ) > /dev/null 2>&1 &
"""

# The commands that take --log, and the dashboards (the guest console is
# their terminal); every other command is headless (headless.py).
TAKES_LOG = frozenset({"run", "replay", "stream", "record"})
DASHBOARDS = frozenset({"run", "replay"})


def run_dir() -> Path:
    """Where `ktui vm` keeps what the guest needs to see (and may write)."""
    return default_log_path().parent / "vm"


def shared_dirs(cwd: Path) -> tuple[Path, ...]:
    """The user's folders the guest may write and the host keeps: the
    current directory (not /: the whole host writable). Told to ktui in the
    guest (KTUI_VM_SHARED), which refuses to save anywhere else: the rest
    is a throwaway overlay."""
    return () if cwd == Path("/") else (cwd,)


def _has_option(args: list[str], name: str) -> bool:
    return any(a == name or a.startswith(f"{name}=") for a in args)


def ktui_argv(argv: list[str], files: GuestFiles) -> list[str]:
    """`python -m ktui COMMAND ...` as the guest runs it: ARGV (its command
    first), with the run's log file unless --log is given, and a dashboard
    refreshed once a second unless --refresh is."""
    command, rest = argv[0], argv[1:]
    extra: list[str] = []
    if command in TAKES_LOG and not _has_option(rest, "--log"):
        extra += ["--log", str(files.log)]
    if command in DASHBOARDS and not _has_option(rest, "--refresh"):
        # The guest console is an emulated serial line: at 15 screen updates a
        # second a 160x45 dashboard never caught up; once a second it is fluid.
        extra += ["--refresh", "1"]
    return [sys.executable, "-m", "ktui", command, *extra, *rest]


def setup_lines(cwd: Path, workload: bool) -> list[str]:
    """Where, which Python, debugfs, the cache, the workload."""
    # The guest's home is read-only: its caches (BTF, probed features,
    # compiled programs) live in the run directory, and a second `ktui vm`
    # starts warm.
    cache = shlex.quote(str(run_dir() / "cache"))
    shared = shlex.quote(os.pathsep.join(str(d) for d in shared_dirs(cwd)))
    return [guest_prelude(cwd), f"export XDG_CACHE_HOME={cache}", f"export {SHARED_ENV}={shared}",
            WORKLOAD if workload else ""]
