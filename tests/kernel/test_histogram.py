"""The latency histogram against the exact latencies of the same returns.

Every return of a workload is both an event (carrying its exact
`latency_ns`) and counted in the kernel's histogram. Rebuilding the
histogram from the events with the bounds the dashboard and NDJSON read
(`record.histogram.slot_bounds`) must give the kernel's histogram exactly: a bucket
read one octave off shows here as every count one slot away."""

from __future__ import annotations

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.pipeline.rates import percentile
from ktui.record.histogram import HIST_SLOTS, slot_bounds, slot_of

from .conftest import drain_all
from .test_pipeline import probe_set

# Reads of very different sizes from /dev/zero spread the latencies over
# several slots; bad reads return at once.
SHAPE = [["read", 1, 60], ["read", 4096, 60], ["read", 65536, 30], ["read", 1 << 20, 10],
         ["badread", 20]]
RETURNS = 60 + 60 + 30 + 10 + 20


def slot_holding(ns: int) -> int:
    """The slot whose documented bounds hold `ns` (searched, not computed)."""
    found = [k for k in range(HIST_SLOTS) if slot_bounds(k)[0] <= ns <= slot_bounds(k)[1]]
    assert found == [slot_of(ns)], f"{ns} ns is in slots {found}"
    return found[0]


# both engines keep the histogram, and the exact sum beside it
@pytest.mark.parametrize("engine", ["generic", "compiled"])
def test_histogram_equals_the_exact_latencies_of_the_same_returns(workload, engine):
    w = workload([SHAPE])
    # a fetch, so every return is an event with its latency; no sample or
    # rate limit, and the default buffer holds them all (lost must be 0)
    text = "name: h\nprobes:\n  - spec: vfs_read:r:retval\n    label: ret\n"
    with Session(probe_set(text, w.pid), SessionOptions(engine=engine)) as s:
        w.run_phase()
        events = drain_all(s)
        stats = s.stats().probes[0]
    latencies = [e.latency_ns for e in events]
    assert stats.lost == 0
    assert stats.hits == stats.emitted == len(events) == RETURNS
    rebuilt = [0] * HIST_SLOTS
    for ns in latencies:
        rebuilt[slot_holding(ns)] += 1
    assert list(stats.hist) == rebuilt
    # the kernel's exact sum (a Prometheus histogram's _sum): to the nanosecond
    assert stats.latency_sum_ns == sum(latencies)
    assert len([c for c in rebuilt if c]) >= 3, "the workload should spread over several slots"
    # the median the dashboard shows lies in the slot of the true median
    median = sorted(latencies)[(len(latencies) - 1) // 2]
    low, high = slot_bounds(slot_holding(median))
    assert low <= percentile(stats.hist, 50) <= high + 1
