"""Waiting in host tests: a condition asked until true, with a deadline
(never one look: CI machines are loaded)."""

from __future__ import annotations

import time


def until(cond, what: str, timeout: float = 30.0) -> None:
    """Until cond() is true, or fail saying `what` never came. An OSError
    from cond (a server not listening yet, a connection reset) is a no."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if cond():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"timed out: {what}")
