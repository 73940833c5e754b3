"""SIGTERM and SIGHUP as an exception while `ktui vm` waits for its VM.

Python dies of either without running `finally`, so a `ktui vm` killed
(or whose terminal closed) left its guest script in the run folder and the
guest's log was lost. Raised as `Stopped`, they unwind like a Ctrl-C: the
VM is taken down and the run's files removed.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Stopped(BaseException):
    """A stop signal arrived; .status is what a shell reports for it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.status = 128 + signum


def _raise(signum, _frame) -> None:
    raise Stopped(signum)


@contextlib.contextmanager
def stop_signals_raise() -> Iterator[None]:
    """Inside the block SIGTERM and SIGHUP raise Stopped; the handlers
    before it are put back after."""
    previous = {sig: signal.signal(sig, _raise) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
