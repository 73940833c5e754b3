"""Which event buffer `--buffer auto` means: one rule for a live session and
for `ktui compile`, so the program compile prints is the one ktui would
load here.

The BPF ring buffer where the kernel has one (the `ringbuf` feature,
probed: kernel/machine/features.py), perf buffers where it has none. Where the
probe could not tell (no privilege: `ktui compile` needs none), ktui
picks the ring buffer: every kernel ktui is tested on has it, and a
kernel without it refuses the program with a clear error rather than
silently.
"""

from __future__ import annotations

from ktui.kernel.codegen import PERF, RINGBUF
from ktui.lang.model import KtuiError

AUTO = "auto"
CHOICES = (AUTO, RINGBUF, PERF)


def resolve_buffer(choice: str, has_ringbuf: bool | None) -> str:
    """`auto`, `ringbuf` or `perf` -> RINGBUF or PERF for a kernel that has
    the ring buffer (`has_ringbuf`: True, False, None = not known)."""
    if choice == AUTO:
        return PERF if has_ringbuf is False else RINGBUF
    if choice not in (RINGBUF, PERF):
        raise KtuiError(f"unknown buffer kind {choice!r}: use auto, ringbuf or perf")
    return choice
