"""The dashboard in the VM follows the host terminal's size.

The guest console is an emulated serial line: it learns no size from the
host, and the guest's stty was set once at boot, so resizing the host
terminal left the dashboard at its old size. Now the host writes its
terminal's size to the run's size file at the start and on every SIGWINCH,
and a small loop in the guest polls that file (the run folder is shared,
9p without caching: each read sees the host's latest), sets the console's
size with stty and sends SIGWINCH to the tmux client, which resizes the
dashboard's pane, and Textual redraws at the new size.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path

POLL_S = 0.5  # how often the guest looks at the size file
SIZE_LINE = re.compile(r"rows (\d+) cols (\d+)")


def host_terminal_size() -> os.terminal_size | None:
    """The size of the terminal the dashboard runs in, or None (no terminal)."""
    for fd in (0, 1, 2):
        try:
            size = os.get_terminal_size(fd)
        except OSError:
            continue
        return size if size.lines > 0 and size.columns > 0 else None  # a pty nobody sized
    return None


def size_line(size: os.terminal_size) -> str:
    """What the size file holds: stty's own words."""
    return f"rows {size.lines} cols {size.columns}"


def write_size(path: Path, size: os.terminal_size | None) -> None:
    """Written whole and renamed, so the guest never reads half of it."""
    if size is None:
        return
    temp = path.with_suffix(".size.tmp")
    temp.write_text(size_line(size) + "\n")
    os.replace(temp, path)


@contextlib.contextmanager
def size_follows_host(path: Path) -> Iterator[None]:
    """Inside the block the host terminal's size is kept in PATH (written
    now and on each SIGWINCH); the previous SIGWINCH handler is put back."""
    def resized(_signum, _frame) -> None:
        try:
            write_size(path, host_terminal_size())
        except OSError:
            pass  # the run folder is gone: the run is ending

    write_size(path, host_terminal_size())
    previous = signal.signal(signal.SIGWINCH, resized)
    try:
        yield
    finally:
        signal.signal(signal.SIGWINCH, previous)


def guest_lines(path: Path, tmux_socket: str, initial: os.terminal_size | None) -> str:
    """Shell lines for the guest: the console at the INITIAL size, then in
    the background each new size in PATH applied to the console (the
    script's own terminal) and told to tmux, until the script ends."""
    q = shlex.quote(str(path))
    first = size_line(initial) if initial is not None else ""
    return "\n".join([
        # a background job's stdin is /dev/null: name the console first
        "console=$(tty 2>/dev/null) || console=/dev/console",
        # COLUMNS and LINES would override what the console says
        f'stty -F "$console" {first} 2>/dev/null; unset COLUMNS LINES' if first else "",
        f"( last={shlex.quote(first)}",
        f"  while sleep {POLL_S} && kill -0 $$ 2>/dev/null; do",
        f"    read -r size < {q} 2>/dev/null || continue",
        '    [[ $size =~ ^rows\\ [0-9]+\\ cols\\ [0-9]+$ ]] && [ "$size" != "$last" ] || continue',
        "    last=$size",
        '    stty -F "$console" $size 2>/dev/null',
        f"    for c in $(tmux -S {tmux_socket} list-clients -F '#{{client_pid}}' 2>/dev/null); do",
        "      kill -WINCH $c 2>/dev/null",
        "    done",
        "  done ) &",
    ])
