"""The compact probe language: `[LABEL=]TARGET:KIND[:FETCH[,FETCH...]]`.

    vfs_read:c:a3
    reads=vfs_read:c:a3
    vfs_read:r:retval:s64,a3:u32
    do_sys_openat2:c:fname=+0(a2):ustring
    0xffffffff81234560:c:rdi,rsi
    /usr/lib/x86_64-linux-gnu/libc.so.6:malloc:c:a1
    /usr/bin/bash:readline:r:retval:string
    syscalls/sys_enter_openat:t:filename:ustring,flags
    opens=sched/sched_process_exec:t:filename

LABEL (a word, as in perf probe's `EVENT=FUNC`) names the probe in the
dashboard and in events; TARGET is a kernel symbol (`foo.isra.0`),
`symbol+offset`, a 0x address, a tracepoint `CATEGORY/NAME` or a user
function `PATH:SYMBOL[+OFF]` / `PATH:0xADDR` (a uprobe); KIND is `c`
(kprobe), `r` (kretprobe) or `t` (a tracepoint, and only a tracepoint);
a FETCH is `[label=]EXPR[:type]` where EXPR is a1..a6, a register, retval,
comm/pid/tid/cpu, a parameter by name or a kernel-style dereference
`+OFFSET(EXPR)`. A tracepoint's values are its fields by name (`filename`,
`args.pid`), bound to its tracefs format by `lang.bind`. The text becomes the frozen `model.Probe`;
`str(probe)` prints the canonical form, which parses back equal.

A hand-written scanner (no regex over the whole text) keeps a 1-based
column for every error. Syntax is checked while scanning; the semantic
rules live in one place (`checks.check_probe`) shared by `parse_spec` (columns in
the user's text) and `validate_probe` (columns in the canonical text).
"""

from __future__ import annotations

import dataclasses
import re

from ktui.lang import filters, limits, spans, wildcards
from ktui.lang.aggregate import check_aggregate, parse_clauses, split_clauses
from ktui.lang.checks import check_fetch, check_probe, check_tracepoint_options, fetch_col
from ktui.lang.grammar import (
    Scanner,
    SpecSpan,
    check_text,
    expect_end,
    parse_raw,
    scan_fetch,
    scan_target,
)
from ktui.lang.limits import MAX_DEREF, check_within
from ktui.lang.model import ERRNO_MODES, Deref, Fetch, GateSpan, Kind, Probe, SpecError, Target
from ktui.lang.user_probes import check_user_aggregate, check_user_options


def parse_spec(text: str) -> Probe:
    """`[LABEL=]TARGET:KIND[:FETCH,...]` -> a validated Probe (no filter)."""
    probe, span = parse_raw(check_text(text, "spec"))
    check_probe(probe, span)
    return probe


def parse_spec_clauses(text: str, *, span_end: bool = False) -> Probe:
    """A spec followed by aggregation clauses (`vfs_read:r count(comm)
    sum(retval)`, lang.aggregate) and a gate (`within(FUNC)`, `within(START
    .. END)`): columns count in `text`. `span_end`: the text is a span's
    end, its since(...) blanked out (its hits have a latency: sum(latency))."""
    text = check_text(text, "spec")
    since = spans.since_clause(text)
    if since is not None:
        return _with_start(parse_spec_clauses(since[0], span_end=True), since[1], since[2], since[3])
    text, within = _within_clause(text)
    if within is not None:
        return dataclasses.replace(parse_spec_clauses(text, span_end=span_end), within=within)
    spec, clauses, clauses_at = split_clauses(text)
    probe = parse_spec(spec)
    if not clauses.strip():
        return probe
    try:
        agg = parse_clauses(clauses, probe.kind, timed=span_end or probe.kind is Kind.RETURN)
        if probe.target.is_user:
            check_user_aggregate(agg)
        wildcards.check_aggregate(probe, agg)
    except SpecError as err:
        col = clauses_at + 1 if err.col is None else err.col + clauses_at
        raise SpecError(err.message, col=col) from None
    return dataclasses.replace(probe, agg=agg)


def _with_start(end: Probe, text: str, at: int, clause_at: int) -> Probe:
    """A span: `end` with its start, the probe `text` (which began at
    column `at` + 1 of the whole spec), both checked (lang.spans: what the
    two ends do not keep together is refused at the clause)."""
    try:
        start = parse_spec(text)
    except SpecError as err:
        raise SpecError(f"since: {err.message}", col=_shift(err.col, at)) from None
    try:
        spans.check_span(end, start)
    except SpecError as err:
        raise SpecError(err.message, col=clause_at + 1) from None
    return dataclasses.replace(end, since=start)


_WITHIN = re.compile(r"[ \t]+within\(([^()]*)\)")


def _within_clause(text: str) -> tuple[str, str | GateSpan | None]:
    """`SPEC ... within(FUNC) ...` -> (the text with the clause blanked out,
    FUNC); with `within(START .. END)`, a GateSpan of the two probes;
    (text, None) without one. Blanked, not cut: what follows keeps its
    columns for the errors the rest of the text may have. SpecError at
    FUNC's column when it is no function's name, at START's or END's own
    column when it is no probe, at the clause when the two are no gate."""
    m = _WITHIN.search(text)
    if m is None:
        return text, None
    try:
        ends = spans.gate_ends(m.group(1))
    except SpecError as err:
        raise SpecError(err.message, col=_shift(err.col, m.start(1))) from None
    if ends is not None:
        gate: str | GateSpan = _gate_span(ends, m.start(1), m.start(1) - len("within(") + 1)
    else:
        gate = m.group(1).strip()
        try:
            check_within(gate)
        except SpecError as err:
            raise SpecError(err.message, col=m.start(1) + 1) from None
    if _WITHIN.search(text, m.end()):
        raise SpecError("within(...) given twice", col=m.end() + 1)
    return (text[:m.start()] + " " * (m.end() - m.start()) + text[m.end():]).rstrip(), gate


def _gate_span(ends: tuple[tuple[str, int], tuple[str, int]], at: int, clause_col: int) -> GateSpan:
    """The gate `within(START .. END)`: each end parsed as the probe it is
    (its errors at its own columns; `ends` count from `at`), then the two
    checked together (their errors at the clause, `clause_col`)."""
    probes = []
    for text, offset in ends:
        try:
            probes.append(parse_spec(text))
        except SpecError as err:
            raise SpecError(f"within: {err.message}", col=_shift(err.col, at + offset)) from None
    try:
        spans.check_gate_ends(*probes)
    except SpecError as err:
        raise SpecError(err.message, col=clause_col) from None
    return GateSpan(*probes)


def parse_probe_text(text: str) -> Probe:
    """`[LABEL=]TARGET:KIND[:FETCH,...] [if FILTER]`, as `-e` takes it: the
    validated probe with its filter. A SpecError's column counts in `text`
    itself, the filter's part included (a filter error says `filter:`)."""
    head, sep, tail = text.partition(" if ")
    probe = parse_spec_clauses(head)
    problem = spans.start_value_problem(probe)
    if problem:
        raise SpecError(problem, col=_start_value_col(head))
    if not sep:
        return probe
    filter_at = len(head) + len(sep)
    try:
        probe = dataclasses.replace(probe, filter=filters.parse_filter(tail))
    except SpecError as err:
        raise SpecError(f"filter: {err.message}", col=_shift(err.col, filter_at)) from None
    try:
        validate_probe(probe, filter_text=tail)
    except SpecError as err:
        if not err.message.startswith("filter:"):
            raise
        raise SpecError(err.message, col=_shift(err.col, filter_at)) from None
    return probe


def _start_value_col(text: str) -> int | None:
    """The column of the first `start.` that begins a value in `text`."""
    at = text.find(spans.START_PREFIX)
    while at != -1:
        if at == 0 or text[at - 1] in " \t,:(=":
            return at + 1
        at = text.find(spans.START_PREFIX, at + 1)
    return None


def _shift(col: int | None, by: int) -> int | None:
    return None if col is None else col + by


def parse_fetch(text: str, kind: Kind | None = None) -> Fetch:
    """One `[label=]EXPR[:type]`, checked as far as it can be without its
    probe (retval and name clashes are checked by `validate_probe`). With
    `kind`, as that kind of probe reads it (a tracepoint's names are fields)."""
    sc = Scanner(check_text(text, "fetch"), "fetch", tracepoint=kind is Kind.TRACEPOINT,
                 usdt=kind is Kind.USDT)
    sc.skip_ws()
    fetch, span = scan_fetch(sc)
    expect_end(sc, "fetch")
    check_fetch(fetch, span, kind=None)  # the kind rules: the probe's (validate_probe, check_aggregate)
    return fetch


def parse_target(text: str) -> Target:
    """`symbol`, `symbol+offset`, `0xADDRESS`, `CATEGORY/NAME`, `PATH:SYMBOL[+OFF]` or `PATH:0xADDR`."""
    sc = Scanner(check_text(text, "target"), "target")
    sc.skip_ws()
    target = scan_target(sc, SpecSpan())
    expect_end(sc, "target")
    return target


# ---------------------------------------------------------------- validate


def validate_probe(probe: Probe, *, filter_text: str | None = None) -> None:
    """Raise SpecError unless `probe` is well formed and consistent.

    Checks what the spec grammar cannot: retval only in return probes, no
    offset on a return probe, unique fetch names, at most 8 fetches, types
    that fit what they are applied to, filter names that resolve in this
    probe with matching integer/string operands, a label, sample and
    rate_limit within `limits` (the bounds the loader applies). A hand-built probe must also be in canonical form (its
    text parses back equal). Columns point into `probe.spec_text`, or for
    filter errors (message prefixed `filter:`) into `filter_text` when given
    and it parses to this filter, else into `str(probe.filter)`.
    """
    if not isinstance(probe, Probe):
        raise SpecError(f"expected a Probe, got {type(probe).__name__}")
    if not isinstance(probe.fetches, tuple):
        raise SpecError(f"fetches must be a tuple, got {type(probe.fetches).__name__}")
    for fetch in probe.fetches:
        # Bound hand-built nesting before printing it (printing recurses).
        expr, depth = getattr(fetch, "expr", None), 0
        while isinstance(expr, Deref):
            expr, depth = expr.inner, depth + 1
            if depth > MAX_DEREF:
                raise SpecError(f"dereferences nest deeper than {MAX_DEREF} levels")
    if probe.label is not None:
        # Shown in the probe table and written to files: refused as in a probe set.
        if not isinstance(probe.label, str):
            raise SpecError(f"label must be text, got {type(probe.label).__name__}")
        try:
            limits.check_probe_label(probe.label)
        except SpecError as err:  # no column: the label is not in the spec text
            raise SpecError(f"label: {err.message}") from None
    if probe.errno not in ERRNO_MODES:
        raise SpecError(f"errno: expected on, off or \"\" (by BTF), got {probe.errno!r:.40}")
    if probe.errno and probe.kind is not Kind.RETURN:
        raise SpecError("errno: only a return probe (:r) has errnos (its return value)")
    if probe.kind is Kind.TRACEPOINT:
        check_tracepoint_options(probe)
    if isinstance(probe.target, Target) and probe.target.is_user:
        check_user_options(probe)
    if isinstance(probe.target, Target) and probe.target.alternatives and (
            probe.target.symbol not in probe.target.alternatives):
        # equality ignores which alternative is in use: say it here
        raise SpecError(f"target: {probe.target.symbol!r} is not one of its alternatives", col=1)
    try:
        text = probe.spec_text
    except (AttributeError, TypeError, ValueError) as err:
        raise SpecError(f"malformed probe: {err}") from err
    reparsed, span = parse_raw(check_text(text, "spec"))
    if reparsed.target != probe.target:
        raise SpecError(f"target is not in canonical form: {probe.target!r}", col=1)
    if reparsed.kind != probe.kind:
        raise SpecError(f"kind is not in canonical form: {probe.kind!r}")
    for index, (mine, theirs) in enumerate(zip(probe.fetches, reparsed.fetches)):
        if mine != theirs:
            raise SpecError(f"fetch is not in canonical form: {mine!r}", col=fetch_col(span, index))
    if len(probe.fetches) != len(reparsed.fetches):
        raise SpecError("fetches are not in canonical form", col=None)
    problem = spans.start_value_problem(probe)
    if problem:
        raise SpecError(problem)
    check_probe(probe, span, filter_text)
    if probe.agg is not None:
        check_aggregate(probe.agg, probe.kind, probe.timed)
        wildcards.check_aggregate(probe, probe.agg)
