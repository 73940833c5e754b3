"""Spans: the time from one event to another, joined by a key.

A span is written on its end, `END since(START)` (`since: START` in a
probe set), as bcc's biolatency or runqlat pair two probes:

    blk_mq_end_request:c:a1 since(blk_mq_start_request:c:a1)
    syscalls/sys_exit_read:t:ret since(syscalls/sys_enter_read:t)

The key is START's fetches, matched in order against the end's first
ones: a block request by its `struct request *` (a1 at both ends), or
with no fetch in START, the thread. Every end that finds its start
counts the time between as a return probe counts its latency, under the
task that made the START (the end often runs in an interrupt or a
kworker): its comm, pid and cgroup are carried from the start.

What a span can be, for now: each end a call or a return of a kernel or
user function, a tracepoint or a USDT probe, one function or event each
(not a pattern, nor gated); the key up to SPAN_KEYS_MAX integers. A return
end is the return half of its own return probe (its call paired first, by
the thread): its key may be the return value, or the arguments as they
were at its call.
"""

from __future__ import annotations

import re

from ktui.lang.aggregate import closing
from ktui.lang.model import STRING_TYPES, Builtin, Probe, SpecError

SPAN_KEYS_MAX = 4  # fetches in a span's key (the kernel's ktui_span_key)
SPAN_EXAMPLE = "blk_mq_end_request:c:a1 since(blk_mq_start_request:c:a1)"


def since_clause(text: str) -> tuple[str, str, int, int] | None:
    """`SPEC ... since(START) ...` -> (the text with the clause blanked out,
    START, the 0-based columns in `text` of START and of the clause); None
    without one. Blanked,
    not cut: what follows keeps its columns for errors. START may hold
    parentheses of its own (`+8(a1)`): the clause ends at its match."""
    at = _clause_start(text)
    if at is None:
        return None
    open_at = at + len("since(")
    end = closing(text, open_at)
    if end is None:
        raise SpecError("since(...): no closing parenthesis", col=at + 1)
    if _clause_start(text, end + 1) is not None:
        raise SpecError("since(...) given twice", col=_clause_start(text, end + 1) + 1)
    start = text[open_at:end]
    lead = len(start) - len(start.lstrip())
    if not start.strip():
        raise SpecError(f"since(...) names the span's start, a probe: {SPAN_EXAMPLE}", col=open_at + 1)
    blanked = text[:at] + " " * (end + 1 - at) + text[end + 1:]
    return blanked.rstrip(), start.strip(), open_at + lead, at


def _clause_start(text: str, start: int = 0) -> int | None:
    """Where ` since(` begins (after a blank: never inside a spec's own word)."""
    i = text.find("since(", start)
    while i != -1:
        if i > 0 and text[i - 1] in " \t":
            return i
        i = text.find("since(", i + 1)
    return None


def check_span(end: Probe, start: Probe) -> None:
    """The rules a span's two probes keep (SpecError, its message saying
    which end; no column: the caller places it)."""
    for what, probe in (("since: the start", start), ("a span's end", end)):
        if probe.target.is_wildcard:
            raise SpecError(f"{what} is a pattern: a span joins one function or event to another")
        if probe.within is not None:
            raise SpecError(f"{what} has within(...): a span is not gated")
    if start.filter is not None or start.agg is not None:
        raise SpecError("since: the start is a probe alone (TARGET:KIND[:KEY,...]): filters and "
                        "aggregations go on the span's end")
    if start.since is not None:
        raise SpecError("since: the start is a span of its own: a span has one start")
    keys = start.fetches
    if len(keys) > SPAN_KEYS_MAX:
        raise SpecError(f"since: a span's key is at most {SPAN_KEYS_MAX} values, got {len(keys)}")
    for fetch in keys:
        _check_key(fetch, "since: the start's")
    if len(end.fetches) < len(keys):
        raise SpecError(f"the span's key is {len(keys)} value(s) of its start ({', '.join(map(str, keys))}): "
                        f"its end's first {len(keys)} fetch(es) are the same key, read at the end")
    for fetch in end.fetches[:len(keys)]:
        _check_key(fetch, "the end's")


def _check_key(fetch, whose: str) -> None:
    expr = fetch.expr
    if isinstance(expr, Builtin):
        # the thread is the key when the start fetches nothing; a builtin
        # is what the end's task says, which is not the start's in general
        raise SpecError(f"{whose} key {fetch}: a key is a value the probe reads (a pointer, a field, "
                        f"an argument), not {expr.name}; a span with no key is joined by the thread")
    if fetch.type in STRING_TYPES:
        raise SpecError(f"{whose} key {fetch}: a key is an integer, not a string")


def key_text(start: Probe) -> str:
    """What joins a span's ends, in words: `a1` or `the thread`."""
    return ", ".join(str(f) for f in start.fetches) if start.fetches else "the thread"


# ---------------------------------------------------------------- gates between two events

GATE_EXAMPLE = "vfs_read:c within(syscalls/sys_enter_read:t .. syscalls/sys_exit_read:t)"
# `..` between a gate's START and END: not a path's `/../` or `/..`
_GATE_SPLIT = re.compile(r"(?<!/)\.\.(?!/)")


def gate_ends(text: str) -> tuple[tuple[str, int], tuple[str, int]] | None:
    """`START .. END` (a gate's text inside `within(...)`) -> ((START, its
    0-based column in `text`), (END, its column)); None when `text` holds
    no `..` (then it is a function's name). SpecError (column in `text`,
    1-based) with more than one, or an end left empty."""
    found = list(_GATE_SPLIT.finditer(text))
    if not found:
        return None
    if len(found) > 1:
        raise SpecError(f"within: one `..` between the gate's start and its end: {GATE_EXAMPLE}",
                        col=found[1].start() + 1)
    cut = found[0]
    parts = ((text[:cut.start()], 0), (text[cut.end():], cut.end()))
    out = []
    for (part, at), what in zip(parts, ("start", "end")):
        if not part.strip():
            raise SpecError(f"within(START .. END): the gate's {what} is missing: {GATE_EXAMPLE}",
                            col=cut.start() + 1)
        out.append((part.strip(), at + len(part) - len(part.lstrip())))
    return out[0], out[1]


def check_gate_ends(start: Probe, end: Probe) -> None:
    """The rules a gate's START and END keep (SpecError, no column: the
    caller places it): one function or event each, a probe alone (the
    gate is kept by the thread: nothing to fetch), two different events."""
    for what, probe in (("within: the start", start), ("within: the end", end)):
        if probe.target.is_wildcard:
            raise SpecError(f"{what} is a pattern: a gate opens and closes on one function or event each")
        if probe.label is not None:
            raise SpecError(f"{what} has a label: a gate's ends are no probes of the table")
        if probe.fetches or probe.filter is not None or probe.agg is not None:
            raise SpecError(f"{what} is a probe alone (TARGET:KIND): a gate is kept by the thread, "
                            "its ends fetch nothing and filter nothing")
        if probe.since is not None or probe.within is not None:
            raise SpecError(f"{what} is a probe alone (TARGET:KIND), not a span or a gate of its own")
    if start.spec_text == end.spec_text:
        raise SpecError(f"within: the start and the end are one event ({start.spec_text}): "
                        "a gate opens at one and closes at another")
