"""Run the dashboard on a live session or a recording.

The feed is opened here, outside the App, and closed in a `finally`, so
every probe is detached whatever happens inside the UI (the Memray
pattern). While the full screen is up, file descriptors 1 and 2 point at
ktui's log file: libbcc and clang write there, never over the screen.
Textual itself draws on a duplicate of the terminal's fd.

When the UI fails (an exception in a handler, a timer or Textual itself),
the app exits, Textual restores the terminal, the traceback goes to the log
file, and once the screen is gone one line says what failed and where the
traceback is; the exit status is 4.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ktui.exits import EXIT_INVALID, EXIT_OK, EXIT_RUNTIME
from ktui.kernel.quiet import log_line, open_log_file
from ktui.lang.chars import escape_refused
from ktui.lang.model import KtuiError, ProbeSet

MAX_ERROR_CHARS = 200  # of the exception's text in the one-line report


@contextmanager
def screen_owns_terminal(log_fd: int) -> Iterator[None]:
    """Textual gets the terminal; stray writes to fd 1/2 go to the log."""
    sys.stdout.flush()
    sys.stderr.flush()
    tty_fd = os.dup(2)
    saved_out, saved_err = os.dup(1), os.dup(2)
    tty = os.fdopen(tty_fd, "w", buffering=1, encoding="utf-8", errors="replace")
    old = (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        # Textual's driver writes to sys.__stderr__ and sizes the screen from
        # sys.__stdout__ (shutil.get_terminal_size): both are the terminal.
        sys.__stderr__ = sys.stderr = tty  # type: ignore[misc]
        sys.__stdout__ = sys.stdout = tty  # type: ignore[misc]
        yield
    finally:
        try:
            sys.stdout.flush()
        finally:
            os.dup2(saved_out, 1)
            os.dup2(saved_err, 2)
            for fd in (saved_out, saved_err):
                os.close(fd)
            sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__ = old  # type: ignore[misc]
            tty.close()


def failure_line(error: BaseException | None, status: int | None, log_file: Path) -> str:
    """The one line printed once the screen is gone: what failed, and where
    its traceback is."""
    if error is None:
        what = f"it exited with status {status}"
    else:
        text = escape_refused(str(error))  # newlines too: one line
        if len(text) > MAX_ERROR_CHARS:
            text = text[: MAX_ERROR_CHARS - 3] + "..."
        what = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return f"ktui: the dashboard stopped on an internal error: {what} (traceback in {log_file})"


def _run_app(feed, refresh: float, log_path: Path | None, probeset_path: str | None) -> int:
    from ktui.app import KtuiApp
    from ktui.pipeline.collector import BufferedFeed  # (asyncio and numpy: kept off the launch path, as Textual is)

    log_fd, log_file = open_log_file(log_path)
    try:
        buffered = BufferedFeed(feed)
        app = KtuiApp(buffered, refresh_hz=refresh, log_path=str(log_file), probeset_path=probeset_path)

        def leave(signum, frame):  # terminal closed (SIGHUP) or SIGTERM: a clean quit
            app.exit()

        old = {s: signal.signal(s, leave) for s in (signal.SIGTERM, signal.SIGHUP)}
        escaped: Exception | None = None
        try:
            with screen_owns_terminal(log_fd):
                try:
                    app.run()
                except Exception as exc:  # Textual itself failed: reported like a handler's failure
                    escaped = exc
                    log_line(log_fd, "".join(traceback.format_exception(exc)))
        finally:
            for s, h in old.items():
                signal.signal(s, h)
    finally:
        os.close(log_fd)
    failure = escaped or app.failure
    if failure is None and app.return_code in (None, 0):
        return EXIT_OK
    # The screen is gone and fd 2 is the terminal again.
    print(failure_line(failure, app.return_code, log_file), file=sys.stderr, flush=True)
    return EXIT_RUNTIME


def run_live(ps: ProbeSet, options, refresh: float) -> int:
    from ktui.kernel.session import Session

    session = Session(ps, options)
    try:
        # With the generic engine open() is quick (the program loads behind
        # the screen); a compiled set takes a clang run first.
        print(f"ktui: attaching {len(ps.probes)} probe(s)...", file=sys.stderr, flush=True)
        session.open()
        return _run_app(session, refresh, options.log_path, ps.source)
    except KtuiError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    finally:
        session.close()


def run_feed(feed, refresh: float, log_path: Path | None, probeset_path: str | None = None) -> int:
    """The dashboard on an open Feed, which is closed however the UI ends.
    (Replays come through here; tests drive it with a FakeFeed.)"""
    try:
        return _run_app(feed, refresh, log_path, probeset_path)
    finally:
        feed.close()


def run_replay(path: str, speed: float, refresh: float, log_path: Path | None) -> int:
    from ktui.pipeline.replay import ReplayFeed

    try:
        feed = ReplayFeed(path, speed=speed)
    except KtuiError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_INVALID
    return run_feed(feed, refresh, log_path)
