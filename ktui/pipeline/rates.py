"""Numbers derived from the in-kernel counters: rates, percentiles, histograms.

Pure functions over `feed.StatsSnapshot` and `feed.ProbeStats` (the bpftop
habit: rates computed from deltas in small functions tested on their own).
No Textual or Rich here.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable, Sequence

from ktui.record.feed import ProbeStats, StatsSnapshot
from ktui.record.histogram import slot_bounds

HISTORY_LEN = 60  # one rate sample a second: the sparkline shows the last minute


def counter_delta(prev: int, cur: int) -> int:
    """How much a cumulative counter grew. Counters only grow, so a smaller
    value means it was reset (probe re-attached, map cleared): everything it
    holds now is new."""
    return cur - prev if cur >= prev else cur


def rate(
    prev: StatsSnapshot | None, cur: StatsSnapshot, probe_id: int, field: str = "hits"
) -> float | None:
    """Per-second rate of one counter of one probe between two snapshots, or
    None when it cannot be known yet (first snapshot, probe new, no time)."""
    if prev is None:
        return None
    dt = cur.time - prev.time
    before, now = prev.probes.get(probe_id), cur.probes.get(probe_id)
    if dt <= 0 or before is None or now is None:
        return None
    return counter_delta(getattr(before, field), getattr(now, field)) / dt


def rates(prev: StatsSnapshot | None, cur: StatsSnapshot, field: str = "hits") -> dict[int, float]:
    """`rate()` for every probe of `cur` whose rate is known."""
    out = {}
    for probe_id in cur.probes:
        r = rate(prev, cur, probe_id, field)
        if r is not None:
            out[probe_id] = r
    return out


@dataclass(frozen=True)
class ProbeCost:
    """One probe's own cost between two timed snapshots (runstats): the
    BPF program body only, not the kprobe trap, trampoline or return hook."""

    ns_per_hit: float | None  # time per run of the probe; None: it did not run
    cpu_percent: float  # its run time per wall-clock time: 100 = one whole CPU


def probe_cost(prev: StatsSnapshot | None, cur: StatsSnapshot, probe_id: int) -> ProbeCost | None:
    """The probe's cost from the growth of run_ns and run_count, or None
    when it cannot be known: a snapshot that was not timed (the statistics
    were off, so its run fields are 0, not a count), the probe missing
    from one, or no time between them. Only two timed snapshots: one taken
    while off would make all the time since the programs were loaded look
    like one interval's."""
    if prev is None or not (prev.timed and cur.timed):
        return None
    dt = cur.time - prev.time
    before, now = prev.probes.get(probe_id), cur.probes.get(probe_id)
    if dt <= 0 or before is None or now is None:
        return None
    ns = counter_delta(before.run_ns, now.run_ns)
    runs = counter_delta(before.run_count, now.run_count)
    return ProbeCost(ns / runs if runs else None, 100.0 * ns / (dt * 1e9))


def costs(prev: StatsSnapshot | None, cur: StatsSnapshot) -> dict[int, ProbeCost]:
    """`probe_cost()` for every probe of `cur` whose cost is known."""
    out = {}
    for probe_id in cur.probes:
        c = probe_cost(prev, cur, probe_id)
        if c is not None:
            out[probe_id] = c
    return out


def lost_growing(prev: StatsSnapshot | None, cur: StatsSnapshot, probe_id: int) -> bool:
    """True when the probe lost events since the previous snapshot."""
    r = rate(prev, cur, probe_id, "lost")
    return r is not None and r > 0


def drop_percent(lost: int, emitted: int) -> float:
    """Share of events the kernel could not deliver, in percent."""
    total = lost + emitted
    return 100.0 * lost / total if total else 0.0


def totals(snapshot: StatsSnapshot) -> ProbeStats:
    """hits, lost and emitted summed over every probe (probe_id -1)."""
    hits = lost = emitted = 0
    for s in snapshot.probes.values():
        hits += s.hits
        lost += s.lost
        emitted += s.emitted
    return ProbeStats(-1, hits=hits, lost=lost, emitted=emitted)


# ---------------------------------------------------------------- log2 histograms
# What a slot holds is record.histogram's to say (slot_bounds): nothing
# here knows the convention.


def percentile(hist: Sequence[int], q: float) -> float | None:
    """The q-th percentile (0 < q <= 100) in ns, or None for an empty histogram.

    Interpolates linearly over [low, high + 1) of the slot holding the rank,
    like Prometheus' histogram_quantile: exact at slot edges, within a
    factor of two inside."""
    if not 0 < q <= 100:
        raise ValueError(f"percentile {q} is not in (0, 100]")
    total = sum(hist)
    if total == 0:
        return None
    rank = total * q / 100.0
    seen = 0
    for k, count in enumerate(hist):
        if count and seen + count >= rank:
            low, high = slot_bounds(k)
            return low + (high + 1 - low) * (rank - seen) / count
        seen += count
    raise AssertionError("unreachable: the ranks sum to total")


def error_count(stats: ProbeStats) -> int:
    """Returns that carried an errno (negative retval): those counted by
    errno, and those whose errno fell outside the probe's errno table."""
    return sum(count for _, count in stats.errnos) + stats.errnos_other


def hist_lines(hist: Sequence[int], *, bar_width: int = 40, unit: str = "nsecs") -> list[str]:
    """bcc funclatency's `print_log2_hist` text, one line per slot from the
    first to the last non-empty one:

        nsecs               : count     distribution
          256 -> 511        : 3        |****                                    |
    """
    used = [k for k, count in enumerate(hist) if count]
    if not used:
        return []
    first, last = used[0], used[-1]
    top = max(hist[first : last + 1])
    high_width = len(str(slot_bounds(last)[1]))
    low_width = max(len(str(slot_bounds(last)[0])), len(unit) - 4 - high_width)
    count_width = max(len("count"), len(str(top)))
    lines = [f"{unit:>{low_width + 4 + high_width}} : {'count':<{count_width}} distribution"]
    for k in range(first, last + 1):
        low, high = slot_bounds(k)
        stars = "*" * round(bar_width * hist[k] / top)
        lines.append(
            f"{low:>{low_width}} -> {high:<{high_width}} : {hist[k]:<{count_width}} |{stars:<{bar_width}}|"
        )
    return lines


# ---------------------------------------------------------------- history


class RateHistory:
    """The last `maxlen` rate samples of every probe, for the sparkline.

    One bounded deque per probe; nothing here grows without bound."""

    def __init__(self, maxlen: int = HISTORY_LEN) -> None:
        self.maxlen = maxlen
        self._series: dict[int, deque[float]] = {}

    def push(self, probe_id: int, value: float) -> None:
        series = self._series.get(probe_id)
        if series is None:
            series = self._series[probe_id] = deque(maxlen=self.maxlen)
        series.append(value)

    def push_all(self, values: dict[int, float]) -> None:
        for probe_id, value in values.items():
            self.push(probe_id, value)

    def series(self, probe_id: int) -> list[float]:
        return list(self._series.get(probe_id, ()))

    def retain(self, probe_ids: Iterable[int]) -> None:
        """Forget the probes that are gone."""
        keep = set(probe_ids)
        for probe_id in [p for p in self._series if p not in keep]:
            del self._series[probe_id]

    def __contains__(self, probe_id: int) -> bool:
        return probe_id in self._series
