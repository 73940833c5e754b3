"""Stacks counted in the kernel (`stack: kernel`, `user`, `both`), made
readable: symbolized frames, normalized tops, and folded lines for flame
graphs.

A stack arrives innermost frame first: kernel frames as addresses (named
here through kallsyms), then, for `user`/`both`, user frames already named
when they were read (kernel/symbols/usyms.py: `function+0xoff`, `binary+0xaddr`,
or a raw address, `0x...[gone]` when the process had exited).

User frames come from a frame-pointer walk, and Debian's userland is
built without frame pointers: most user stacks stop after a frame or two,
or go astray. A user stack that does not reach the start of its thread
(`_start`, `__libc_start_main`, `start_thread`, `clone`...) is called
partial: the stacks view says so, and folded lines start with the frame
`[partial user stack]`, so a flame graph shows it rather than passing it
off as the whole path.

Normalizing: a stack taken at a kprobe starts at the probed function; one
taken through a trampoline (fentry) or an int3 handler may start with
frames of the probing machinery above it. Frames above the first frame in
the probed function are dropped, so the same call path reads the same
whatever attached the probe. Where the probed function is not in the stack
(an address probe), the stack is left as taken.

Folded lines are `root;caller;...;leaf COUNT`, what flamegraph.pl and
speedscope read; frames are function names (no offsets), so calls from
different lines of one function merge as flame graphs expect. As bcc's
stackcount -f: user frames (root first), for `both` a `-` frame, then the
kernel frames."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence, Union

from ktui.lang.model import Probe

Symbolize = Callable[[int], str]
Frame = Union[int, str]  # a kernel address, or a user frame already named

# Where a thread's user stack begins: a stack reaching one of these is whole.
THREAD_STARTS = frozenset({"_start", "__libc_start_main", "__libc_start_call_main", "start_thread",
                           "clone", "clone3", "__clone", "__clone3", "thread_start"})
PARTIAL = "[partial user stack]"
NO_USER = "[no user stack]"  # a kernel thread's hit: it has no user side
DELIMITER = "-"  # between user and kernel frames in a folded line, as bcc's stackcount


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


def split_frames(frames: Sequence[Frame]) -> tuple[list[int], list[str]]:
    """(kernel addresses, user frames) of a stack, each innermost first."""
    kernel = [f for f in frames if isinstance(f, int)]
    return kernel, [f for f in frames if isinstance(f, str)]


def symbolized(probe: Probe, addresses: Sequence[Frame], symbolize: Symbolize | None) -> tuple[str, ...]:
    """A stack's frames as `func+0xoff`, innermost first, the kernel part
    normalized, then the user part as named."""
    kernel, user = split_frames(addresses)
    frames = [symbolize(a) if symbolize is not None else f"0x{a:x}" for a in kernel]
    return normalized(frames, probe.target.symbol) + tuple(user)


def is_partial(user_frames: Sequence[str]) -> bool:
    """A user stack (innermost first) that never reaches a thread's start."""
    return not any(function_of(f) in THREAD_STARTS for f in user_frames)


def wants_user(probe: Probe) -> bool:
    return probe.agg is not None and probe.agg.stack in ("user", "both")


def merged(probe: Probe, stacks: Iterable[tuple[Sequence[Frame], int]],
           symbolize: Symbolize | None, *, offsets: bool = True) -> list[tuple[tuple[str, ...], int]]:
    """Stacks symbolized and normalized, equal ones added up, most first."""
    counts: dict[tuple[str, ...], int] = {}
    for addresses, count in stacks:
        frames = symbolized(probe, addresses, symbolize)
        if not offsets:
            frames = tuple(function_of(f) for f in frames)
        counts[frames] = counts.get(frames, 0) + count
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def split_merged(probe: Probe, stacks: Iterable[tuple[Sequence[Frame], int]],
                 symbolize: Symbolize | None) -> list[tuple[tuple[str, ...], tuple[str, ...], int]]:
    """(kernel frames, user frames, count), each innermost first and with
    offsets, equal stacks added up, most first: the stacks view and the
    NDJSON stats of `stack: user`/`both`, which keep the two sides apart."""
    counts: dict[tuple[tuple[str, ...], tuple[str, ...]], int] = {}
    for addresses, count in stacks:
        kernel_addrs, user = split_frames(addresses)
        key = (symbolized(probe, kernel_addrs, symbolize), tuple(user))
        counts[key] = counts.get(key, 0) + count
    return [(k, u, n) for (k, u), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def folded_lines(probe: Probe, stacks: Iterable[tuple[Sequence[Frame], int]],
                 symbolize: Symbolize | None) -> list[str]:
    """`root;...;leaf COUNT`, one per distinct stack (function names):
    user frames root first, `-` for `stack: both`, then kernel frames."""
    stacks = list(stacks)
    if not wants_user(probe):
        out = []
        for frames, count in merged(probe, stacks, symbolize, offsets=False):
            if frames:
                out.append(";".join(reversed(frames)) + f" {count}")
        return out
    counts: dict[str, int] = {}
    for addresses, count in stacks:
        kernel_addrs, user = split_frames(addresses)
        kernel = [function_of(f) for f in symbolized(probe, kernel_addrs, symbolize)]
        if user:
            parts = ([PARTIAL] if is_partial(user) else []) + [function_of(f) for f in reversed(user)]
        else:
            parts = [NO_USER]
        if probe.agg.stack == "both":
            parts += [DELIMITER] + list(reversed(kernel))
        line = ";".join(parts)
        counts[line] = counts.get(line, 0) + count
    return [f"{line} {n}" for line, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
