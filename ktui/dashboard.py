"""Run the dashboard on a live session or a recording.

The feed is opened here, outside the App, and closed in a `finally`, so
every probe is detached whatever happens inside the UI (the Memray
pattern). While the full screen is up, file descriptors 1 and 2 point at
ktui's log file: libbcc and clang write there, never over the screen.
Textual itself draws on a duplicate of the terminal's fd.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .collector import BufferedFeed
from .model import KtuiError, ProbeSet
from .quiet import open_log

EXIT_OK = 0
EXIT_RUNTIME = 4


@contextmanager
def screen_owns_terminal(log_path: Path | None) -> Iterator[None]:
    """Textual gets the terminal; stray writes to fd 1/2 go to the log."""
    log_fd = open_log(log_path)
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
            for fd in (saved_out, saved_err, log_fd):
                os.close(fd)
            sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__ = old  # type: ignore[misc]
            tty.close()


def _run_app(feed, refresh: float, log_path: Path | None, probeset_path: str | None) -> int:
    from .app import KtuiApp

    buffered = BufferedFeed(feed)
    app = KtuiApp(buffered, refresh_hz=refresh,
                  log_path=str(log_path) if log_path else None, probeset_path=probeset_path)

    def leave(signum, frame):  # terminal closed (SIGHUP) or SIGTERM: a clean quit
        app.exit()

    old = {s: signal.signal(s, leave) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        with screen_owns_terminal(log_path):
            app.run()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return EXIT_OK if app.return_code in (None, 0) else EXIT_RUNTIME


def run_live(ps: ProbeSet, options, refresh: float) -> int:
    from .session import Session

    session = Session(ps, options)
    try:
        print(f"ktui: compiling {len(ps.probes)} probe(s)...", file=sys.stderr, flush=True)
        session.open()
        return _run_app(session, refresh, options.log_path, ps.source)
    except KtuiError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    finally:
        session.close()


def run_replay(path: str, speed: float, refresh: float, log_path: Path | None) -> int:
    from .replay import ReplayFeed

    try:
        feed = ReplayFeed(path, speed=speed)
    except KtuiError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return 1
    try:
        return _run_app(feed, refresh, log_path, None)
    finally:
        feed.close()
