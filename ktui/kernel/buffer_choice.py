"""Which event buffer `--buffer auto` means: one rule for a live session and
for `ktui compile`, so the program compile prints is the one ktui would
load here.

The BPF ring buffer came in Linux 5.8; older kernels get perf buffers.
When the running kernel's release cannot be read as a version, ktui
assumes a current kernel and picks the ring buffer (it is the default of
every kernel ktui is tested on, and a kernel without it fails to compile
the program with a clear error rather than silently).
"""

from __future__ import annotations

import os

from ktui.kernel.codegen import PERF, RINGBUF
from ktui.lang.model import KtuiError

AUTO = "auto"
CHOICES = (AUTO, RINGBUF, PERF)
RINGBUF_SINCE = (5, 8)


def kernel_has_ringbuf(release: str | None = None) -> bool | None:
    """Whether the kernel `release` (default: the running one) has the BPF
    ring buffer; None when the release is not a version."""
    release = release if release is not None else os.uname().release
    try:
        major, minor = (int(x) for x in release.split("-")[0].split(".")[:2])
    except ValueError:
        return None
    return (major, minor) >= RINGBUF_SINCE


def resolve_buffer(choice: str, release: str | None = None) -> str:
    """`auto`, `ringbuf` or `perf` -> RINGBUF or PERF for this kernel."""
    if choice == AUTO:
        return PERF if kernel_has_ringbuf(release) is False else RINGBUF
    if choice not in (RINGBUF, PERF):
        raise KtuiError(f"unknown buffer kind {choice!r}: use auto, ringbuf or perf")
    return choice
