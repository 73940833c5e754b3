"""Kernel stacks counted in the kernel (`stack: kernel`), made readable:
symbolized frames, normalized tops, and folded lines for flame graphs.

Normalizing: a stack taken at a kprobe starts at the probed function; one
taken through a trampoline (fentry) or an int3 handler may start with
frames of the probing machinery above it. Frames above the first frame in
the probed function are dropped, so the same call path reads the same
whatever attached the probe. Where the probed function is not in the stack
(an address probe), the stack is left as taken.

Folded lines are `root;caller;...;leaf COUNT`, what flamegraph.pl and
speedscope read; frames are function names (no offsets), so calls from
different lines of one function merge as flame graphs expect."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from ktui.lang.model import Probe

Symbolize = Callable[[int], str]


def function_of(frame: str) -> str:
    """`vfs_read+0x5` -> `vfs_read`; an unknown address stays as it is."""
    return frame if frame.startswith("0x") else frame.split("+", 1)[0]


def normalized(frames: Sequence[str], target: str | None) -> tuple[str, ...]:
    """Frames (innermost first) from the probed function down."""
    if target:
        for i, frame in enumerate(frames):
            if function_of(frame) == target:
                return tuple(frames[i:])
    return tuple(frames)


def symbolized(probe: Probe, addresses: Sequence[int], symbolize: Symbolize | None) -> tuple[str, ...]:
    """A stack's frames as `func+0xoff`, innermost first, normalized."""
    frames = [symbolize(a) if symbolize is not None else f"0x{a:x}" for a in addresses]
    return normalized(frames, probe.target.symbol)


def merged(probe: Probe, stacks: Iterable[tuple[Sequence[int], int]],
           symbolize: Symbolize | None, *, offsets: bool = True) -> list[tuple[tuple[str, ...], int]]:
    """Stacks symbolized and normalized, equal ones added up, most first."""
    counts: dict[tuple[str, ...], int] = {}
    for addresses, count in stacks:
        frames = symbolized(probe, addresses, symbolize)
        if not offsets:
            frames = tuple(function_of(f) for f in frames)
        counts[frames] = counts.get(frames, 0) + count
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def folded_lines(probe: Probe, stacks: Iterable[tuple[Sequence[int], int]],
                 symbolize: Symbolize | None) -> list[str]:
    """`root;...;leaf COUNT`, one per distinct stack (function names)."""
    out = []
    for frames, count in merged(probe, stacks, symbolize, offsets=False):
        if frames:
            out.append(";".join(reversed(frames)) + f" {count}")
    return out
