"""The BTF package's errors, apart from the decoder: the probe language
catches them on every launch, and a launch whose probes name nothing needs
no decoder (issue 30, a lean first path)."""

from __future__ import annotations


class BtfError(Exception):
    """A blob that is not BTF, or is BTF we cannot read; one line."""


class AccessError(BtfError):
    """A name that does not resolve. `step` is the index of the failing
    step in the chain (-1: the parameter itself); `close` the names that
    come close (for "did you mean")."""

    def __init__(self, message: str, *, step: int = -1, close: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.step = step
        self.close = close
