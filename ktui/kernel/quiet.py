"""Keep libbcc and clang off the terminal.

libbcc and clang write warnings and verifier logs straight to file
descriptor 2. Over a full-screen UI that text would be painted across the
screen, and `ktui stream` promises clean output. Every bcc call therefore
runs inside `captured_stderr()`, which points fd 2 at ktui's log file for the
duration and hands back what was written, so errors can still be reported.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

_lock = threading.Lock()  # fd 2 is process-wide: one redirection at a time


def default_log_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "ktui" / "ktui.log"


def open_log(path: Path | None = None) -> int:
    """Open (append) the log file, private to the user; returns an fd."""
    return open_log_file(path)[0]


def open_log_file(path: Path | None = None) -> tuple[int, Path]:
    """`open_log`, and which file it opened (to tell the user where to look)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    candidates = [path] if path else [default_log_path(), Path(tempfile.gettempdir()) / f"ktui-{os.getuid()}.log"]
    error: OSError | None = None
    for candidate in candidates:
        try:
            candidate.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            return os.open(candidate, flags, 0o600), candidate
        except OSError as exc:  # e.g. a read-only home inside the test VM
            error = exc
    assert error is not None
    raise error


def keep_stderr_apart() -> None:
    """Point sys.stderr at a duplicate of fd 2 for the rest of the process.

    `captured_stderr` points fd 2 itself at a spool while libbcc compiles,
    and the generic program compiles in a background thread while the
    probes already count: for tens of seconds on a first start. What ktui
    prints meanwhile (progress, the summary after a Ctrl-C) must reach the
    user, not the spool and then the log. Idempotent."""
    global _kept
    try:
        if _kept or sys.stderr.fileno() != 2:
            return  # done, or not the process's stderr (a test runner's capture)
    except (AttributeError, OSError, ValueError):
        return
    sys.stderr.flush()
    fd = os.dup(2)
    os.set_inheritable(fd, False)
    sys.stderr = os.fdopen(fd, "w", buffering=1, encoding=sys.stderr.encoding or "utf-8",
                           errors="backslashreplace")
    _kept = True


_kept = False


class Captured:
    def __init__(self) -> None:
        self.text = ""

    def first_error(self) -> str:
        """The first line that looks like an error, for a one-line report."""
        for line in self.text.splitlines():
            if "error" in line.lower():
                return line.strip()
        lines = [ln.strip() for ln in self.text.splitlines() if ln.strip()]
        return lines[-1] if lines else ""


@contextmanager
def captured_stderr(log_fd: int) -> Iterator[Captured]:
    """Redirect fd 2 into a private temp file, then append it to the log."""
    result = Captured()
    with _lock:
        sys.stderr.flush()
        saved = os.dup(2)
        spool = tempfile.TemporaryFile()  # unlinked, private to us
        tmp = os.dup(spool.fileno())
        spool.close()
        try:
            os.dup2(tmp, 2)
            yield result
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.lseek(tmp, 0, os.SEEK_SET)
            chunks = []
            while True:
                chunk = os.read(tmp, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
            os.close(tmp)
            data = b"".join(chunks)
            if data:
                os.write(log_fd, data)
            result.text = data.decode("utf-8", "replace")


def log_line(log_fd: int, text: str) -> None:
    os.write(log_fd, (text.rstrip("\n") + "\n").encode("utf-8", "replace"))


__all__ = ["captured_stderr", "open_log", "open_log_file", "default_log_path", "log_line", "Captured", "Path"]
