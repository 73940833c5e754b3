"""The host terminal while the dashboard's VM has it.

QEMU puts the terminal in raw mode for the guest console and the guest's
tmux switches it to the alternate screen, mouse reporting and a hidden
cursor. Killed (SIGTERM to `ktui vm`), QEMU never undid that: the shell
came back blind. `kept_terminal` saves the terminal's settings before the
VM starts and puts them back after it is down, and after a stop also undoes
the screen modes the guest may have left on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import termios
from collections.abc import Iterator

# leave the alternate screen, show the cursor, no mouse reporting, no
# bracketed paste, plain attributes: what tmux turns on, undone
SCREEN_RESET = b"\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[0m\r\n"


def _attrs(fd: int) -> list | None:
    try:
        return termios.tcgetattr(fd) if os.isatty(fd) else None
    except termios.error:
        return None


def restore(fd: int, attrs: list | None, *, reset_screen: bool) -> None:
    if attrs is None:
        return
    # a background process writing terminal settings gets SIGTTOU: ignore it
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        termios.tcsetattr(fd, termios.TCSAFLUSH, attrs)
        if reset_screen:
            os.write(fd, SCREEN_RESET)
    except (termios.error, OSError):
        pass  # the terminal is gone (a closed window): nothing to restore
    finally:
        signal.signal(signal.SIGTTOU, old)


@contextlib.contextmanager
def kept_terminal(fd: int = 0) -> Iterator[None]:
    """FD's terminal settings as they were, after the block (on an
    exception with the screen modes reset too). Not a terminal: nothing."""
    attrs = _attrs(fd)
    try:
        yield
    except BaseException:
        restore(fd, attrs, reset_screen=True)
        raise
    restore(fd, attrs, reset_screen=False)
