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

The end reads values of its start as `start.EXPR` (model.StartValue): in
its fetches (`start.count`, shown under that name), its filter (`if
start.count > 4096`) and its aggregations (`sum(start.count)`). EXPR is
any integer the START can read, read there as the start's kind reads it
(a tracepoint's field, a parameter by BTF, a1..a6, +8(a1):u32), stored
with the start (up to SPAN_VALUES_MAX of them) and taken by the end with
it:

    syscalls/sys_exit_read:t:ret since(syscalls/sys_enter_read:t) count(comm) sum(start.count)
"""

from __future__ import annotations

import re

import dataclasses

from ktui.lang import filters
from ktui.lang.aggregate import closing
from ktui.lang.model import STRING_TYPES, Builtin, Fetch, Kind, Probe, SpecError, StartValue

SPAN_KEYS_MAX = 4  # fetches in a span's key (the kernel's ktui_span_key)
SPAN_VALUES_MAX = 4  # values a start carries to its end (the kernel's ktui_span_start.v)
SPAN_EXAMPLE = "blk_mq_end_request:c:a1 since(blk_mq_start_request:c:a1)"
START_PREFIX = "start."
NO_SINCE = ("start.X is a value read at a span's start: this probe has no since(...) "
            "(e.g. syscalls/sys_exit_read:t since(syscalls/sys_enter_read:t) sum(start.count))")


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
        if isinstance(fetch.expr, StartValue):
            raise SpecError(f"the end's key {fetch}: the key is read at the end (its first "
                            f"{len(keys)} fetch(es)); a start value comes after it")
        _check_key(fetch, "the end's")
    check_start_values(end, start)


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


# ---------------------------------------------------------------- values of the start at the end


def value_key(use: Fetch) -> tuple[str, str]:
    """What makes two reads of `start.X` one value the start carries: X as
    written, and its type (`start.count:u32` is another value than
    `start.count`: the start reads each its own way)."""
    assert isinstance(use.expr, StartValue)
    return str(use.expr.inner), use.type or ""


def start_value_of(name: str) -> StartValue | None:
    """A filter's name `start.X` as the value it reads (None: not one, or
    X is no value)."""
    if not name.startswith(START_PREFIX):
        return None
    from ktui.lang.grammar import Scanner, scan_fetch  # grammar imports aggregate, as this module does

    sc = Scanner(name, "name")
    try:
        fetch, _span = scan_fetch(sc)
    except SpecError:
        return None
    return fetch.expr if isinstance(fetch.expr, StartValue) and sc.at_end() and fetch.type is None else None


def _filter_names(end: Probe) -> list[str]:
    if end.filter is None:
        return []
    out: list[str] = []
    for compare in filters.comparisons(end.filter):
        for side in (compare.left, compare.right):
            name = getattr(side, "name", None)
            if isinstance(name, str) and name.startswith(START_PREFIX) and name not in out:
                out.append(name)
    return out


def uses(end: Probe) -> list[Fetch]:
    """Every read of the start at `end`, as the end's own fetch of it (a
    StartValue): its fetches, its aggregations, its filter's `start.X`
    names (where no fetch of the end has that name)."""
    out = [f for f in end.fetches if isinstance(f.expr, StartValue)]
    if end.agg is not None:
        out += [f for f in end.agg.fetches() if isinstance(f.expr, StartValue)]
    fetched = {f.name for f in end.fetches}
    for name in _filter_names(end):
        if name in fetched:
            continue
        bound = (end.bindings or {}).get(name)
        expr = bound if isinstance(bound, StartValue) else start_value_of(name)
        if expr is not None:
            out.append(Fetch(expr))
    return out


def _distinct(end: Probe) -> list[Fetch]:
    found: dict[tuple[str, str], Fetch] = {}
    for use in uses(end):
        found.setdefault(value_key(use), use)
    return list(found.values())


def value_index(end: Probe) -> dict[tuple[str, str], int]:
    """Each value the start carries (value_key) -> its place in what the
    kernel stores with the start: the order `start_values` gives them."""
    return {value_key(use): i for i, use in enumerate(_distinct(end))}


def start_values(end: Probe) -> tuple[Fetch, ...]:
    """The fetches the START makes for its end (after its key), in
    value_index's order: each `start.X` read as the start's kind reads X,
    bound where the end was (StartValue.carried)."""
    assert end.since is not None
    return tuple(use.expr.carried if use.expr.carried is not None else as_start_fetch(use, end.since)
                 for use in _distinct(end))


def as_start_fetch(use: Fetch, start: Probe) -> Fetch:
    """`start.X[:type]` as the start's own fetch of X (a tracepoint's `flags`
    is its field, a USDT probe's a1 its argument). SpecError, no column."""
    from ktui.lang.grammar import Scanner, scan_fetch

    text = str(Fetch(use.expr.inner, use.type))
    sc = Scanner(text, "fetch", tracepoint=start.kind is Kind.TRACEPOINT, usdt=start.kind is Kind.USDT)
    try:
        fetch, _span = scan_fetch(sc)
    except SpecError as err:
        raise SpecError(f"{use.expr}: {err.message}") from None
    return fetch


def carrier(end: Probe) -> Probe | None:
    """The START as it reads the values its end takes (only those: its key
    is read by the start itself), for binding them to its BTF or fields;
    None when the end reads none."""
    values = start_values(end) if end.since is not None else ()
    if not values:
        return None
    return dataclasses.replace(end.since, fetches=values, label=None, filter=None, agg=None)


def start_with_values(end: Probe) -> Probe:
    """A span's START as it runs: its key, then the values its end reads of
    it (start_values' order: value_index), which it stores for the end."""
    assert end.since is not None
    return dataclasses.replace(end.since, fetches=end.since.fetches + start_values(end))


def check_start_values(end: Probe, start: Probe) -> None:
    """What `start.X` keeps (SpecError, no column: the caller places it):
    at most SPAN_VALUES_MAX values, integers the start can read (not a
    builtin: the span's task is the start's already), each one way."""
    from ktui.lang.checks import check_probe  # checks imports grammar, which imports this module's users
    from ktui.lang.grammar import SpecSpan

    values = _distinct(dataclasses.replace(end, since=start))
    if len(values) > SPAN_VALUES_MAX:
        raise SpecError(f"a span's start carries at most {SPAN_VALUES_MAX} values to its end, got "
                        f"{len(values)} ({', '.join(str(v.expr) for v in values)})")
    by_inner: dict[str, Fetch] = {}
    for use in values:
        other = by_inner.setdefault(str(use.expr.inner), use)
        if other is not use:
            raise SpecError(f"{use.expr} is read as two types ({other.type or 'its own'} and "
                            f"{use.type or 'its own'}): read it one way")
        inner = use.expr.inner
        if isinstance(inner, Builtin):
            raise SpecError(f"{use.expr}: a span's pid, tid, comm and cgroup are its start's already "
                            f"(write {inner.name}); start.X reads a value of the start (start.a3, start.count)")
        if use.type in STRING_TYPES:
            raise SpecError(f"{use}: a span's start carries integers to its end, not text")
        fetch = as_start_fetch(use, start)
        try:
            check_probe(dataclasses.replace(start, fetches=(fetch,), label=None), SpecSpan())
        except SpecError as err:
            raise SpecError(f"{use.expr}: {err.message}") from None


def with_bound_values(end: Probe, bound: tuple[Fetch, ...]) -> Probe:
    """`end` with its start values bound: `bound` is the carrier's fetches
    (start_values' order) bound to the start's BTF or fields, each set as
    its StartValue's `carried` (its type is the value's) in the end's
    fetches, aggregations and filter names (Probe.bindings). SpecError
    where a value is text once its type is known."""
    index = value_index(end)
    for use in _distinct(end):
        fetch = bound[index[value_key(use)]]
        if fetch.effective_type in STRING_TYPES:
            what = f" ({fetch.ctype})" if fetch.ctype else ""
            raise SpecError(f"{use.expr} is text{what}: a span's start carries integers to its end")

    def carried(fetch: Fetch | None) -> Fetch | None:
        if fetch is None or not isinstance(fetch.expr, StartValue):
            return fetch
        value = bound[index[value_key(fetch)]]
        return dataclasses.replace(fetch, expr=dataclasses.replace(fetch.expr, carried=value))

    fetches = tuple(carried(f) for f in end.fetches)
    agg = end.agg
    if agg is not None:
        agg = dataclasses.replace(agg, hist=carried(agg.hist), sum=carried(agg.sum),
                                  keys=tuple(carried(k) for k in agg.keys),
                                  hist_keys=tuple(carried(k) for k in agg.hist_keys))
    bindings = dict(end.bindings or {})
    for name in _filter_names(end):
        expr = start_value_of(name)
        if expr is not None and (str(expr.inner), "") in index:
            bindings[name] = dataclasses.replace(expr, carried=bound[index[(str(expr.inner), "")]])
    return dataclasses.replace(end, fetches=fetches, agg=agg,
                               bindings=bindings if bindings or end.bindings is not None else None)


def resolve_start_value(end: Probe, name: str):
    """names.resolve of a filter's `start.X` (no fetch of the end has that
    name): the value, typed as the start reads it once bound."""
    from ktui.lang.names import Resolved, UnknownName

    if end.since is None:
        raise SpecError(NO_SINCE)
    bound = (end.bindings or {}).get(name)
    expr = bound if isinstance(bound, StartValue) else start_value_of(name)
    if expr is None:
        raise UnknownName(f'unknown name "{name}": start.X names a value of the span\'s start '
                          "(start.a3, start.count)")
    return Resolved(name, expr, Fetch(expr).effective_type)


def start_value_problem(probe: Probe) -> str:
    """Why `probe` may not read `start.X` ("" when it may: it is a span's end)."""
    if probe.since is not None:
        return ""
    fetches = probe.fetches + (probe.agg.fetches() if probe.agg is not None else ())
    return NO_SINCE if any(isinstance(f.expr, StartValue) for f in fetches) else ""
