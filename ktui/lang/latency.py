"""`latency`: a hit's latency in nanoseconds (unsigned 64-bit), as a
filter operand and a `sum(...)` value.

Only a probe whose hits have one (`Probe.timed`: a return probe, since
its call; a span's end, since its start) has it:

    vfs_read:r if latency > 1000000                 only the calls slower than 1 ms
    vfs_read:r count(comm) sum(latency)             time per process (its mean: sum / hits)
    blk_mq_end_request:c:rq,dev=rq->part->bd_dev since(blk_mq_start_request:c:rq) count(dev) sum(latency)

It is the value the latency histogram counts, known before the filter and
the aggregations run (the generic program's return half and span end),
so `hist(latency)` would be that histogram again: refused, with a hint;
`hist(latency, dev)` is one histogram per key (a disk's, as biolatency -D).
Nor is it a count key (each hit's latency differs: the keys would be
unbounded) or an event's fetch (every event of a timed probe carries it,
`latency_ns`). Only the generic program reads it: a probe that uses it is
never compiled.
"""

from __future__ import annotations

from ktui.lang import filters
from ktui.lang.model import Builtin, Field, Probe

LATENCY = Builtin("latency")

NOT_TIMED = ("latency exists only where a hit has one: a return probe (:r), since its call, "
             "or a span's end, since its start (since(...))")
NOT_FETCHED = ("latency is not fetched: every event of a return probe or a span carries it already "
               "(latency_ns); use it in a filter (if latency > N) or in sum(latency)")
NOT_HIST = ("hist: latency: a return probe's or a span's latency histogram is kept already "
            "(the counters view, p50 and p99); hist(latency, KEY) keeps one per key")
NOT_KEY = ("count: latency is no key: every hit's latency differs, so its keys would be unbounded; "
           "count by another key and sum(latency)")


def is_latency(expr: object) -> bool:
    return isinstance(expr, Builtin) and expr.name == "latency"


def uses_latency(probe: Probe) -> bool:
    """Whether `probe` sums or filters on its hits' latency."""
    if probe.agg is not None and any(is_latency(f.expr) for f in probe.agg.fetches()):
        return True
    if probe.filter is None:
        return False
    return any(isinstance(side, Field) and _names_latency(probe, side.name)
               for compare in filters.comparisons(probe.filter) for side in (compare.left, compare.right))


def sums_latency(probe: Probe) -> bool:
    """Whether `probe`'s `sum(...)` is its latency: a duration, in ns."""
    return probe.agg is not None and probe.agg.sum is not None and is_latency(probe.agg.sum.expr)


def _names_latency(probe: Probe, name: str) -> bool:
    """A filter name that is the builtin (a fetch of that name would come
    first, but none can be named latency: it is reserved)."""
    return name == "latency" and not any(f.name == name for f in probe.fetches)
