"""The probe table's sort: by any column, so the busiest or slowest probe is
on top (issue 15). Plain Python (no Textual), tested on its own.

Numbers sort largest first and text A to Z; `reverse` turns either round.
A probe without the number (no stats yet, p50 of a call probe) goes last
either way: a blank is never "the slowest". Ties keep the table's own
order (the order probes were added), so rows do not shuffle between ticks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ktui.pipeline.accounting import errno_unchecked, uncounted
from ktui.pipeline.rates import error_count, percentile
from ktui.record.feed import ProbeState

from ktui.lang.model import Kind
from ktui.widgets.probe_table import ProbeLine

Value = float | str | None

STATE_ORDER = {ProbeState.FAILED: 0, ProbeState.PENDING: 1, ProbeState.LOADING: 2,
               ProbeState.ATTACHED: 3, ProbeState.OFF: 4}


def _latency(q: float) -> Callable[[ProbeLine], Value]:
    def value(line: ProbeLine) -> Value:
        stats = line.stats
        if stats is None or not line.status.probe.timed:
            return None
        return percentile(stats.hist, q)
    return value


def _stat(field: str) -> Callable[[ProbeLine], Value]:
    return lambda line: None if line.stats is None else float(getattr(line.stats, field))


def _errors(line: ProbeLine) -> Value:
    if line.stats is None or line.status.probe.kind is not Kind.RETURN or errno_unchecked(line.stats):
        return None
    return float(error_count(line.stats))


# column key -> (value, text: sorts A to Z first); in the order S cycles them
SORT_KEYS: dict[str, tuple[Callable[[ProbeLine], Value], bool]] = {
    "name": (lambda line: line.status.probe.name.lower(), True),
    "on": (lambda line: float(STATE_ORDER[line.status.state]), True),
    "kind": (lambda line: line.status.probe.kind.value, True),
    "state": (lambda line: line.status.state.value + (line.status.reason or ""), True),
    "hits": (_stat("hits"), False),
    "rate": (lambda line: line.rate, False),
    "cost": (lambda line: None if line.cost is None else line.cost.ns_per_hit, False),
    "cpu": (lambda line: None if line.cost is None else line.cost.cpu_percent, False),
    "lost": (lambda line: None if line.stats is None else float(line.stats.lost + uncounted(line.stats)), False),
    "p50": (_latency(50), False),
    "p99": (_latency(99), False),
    "errors": (_errors, False),
}
# What S steps through: "on" is the same as state; cost and cpu only while timed.
CYCLE = ("name", "kind", "state", "hits", "rate", "cost", "cpu", "lost", "p50", "p99", "errors")
TIMED_ONLY = ("cost", "cpu")


@dataclass(frozen=True)
class Sort:
    key: str | None = None  # None: the order probes were added
    reverse: bool = False  # against the column's natural direction

    def label(self) -> str:
        """`by rate ↓` for the table's title; empty when unsorted."""
        if self.key is None:
            return ""
        return f"by {self.key} {self.arrow()}"

    def arrow(self) -> str:
        text = SORT_KEYS[self.key][1] if self.key else True
        ascending = text != self.reverse
        return "↑" if ascending else "↓"

    def next(self, timed: bool) -> Sort:
        """The next column in CYCLE (then back to unsorted), natural direction."""
        keys = [k for k in CYCLE if timed or k not in TIMED_ONLY]
        if self.key not in keys:
            return Sort(keys[0]) if self.key is None else Sort(None)
        at = keys.index(self.key)
        return Sort(keys[at + 1]) if at + 1 < len(keys) else Sort(None)

    def by(self, key: str) -> Sort:
        """A click on a column header: that column, or the other way round
        when it is already the sort."""
        if key not in SORT_KEYS:
            return self
        return Sort(key, not self.reverse) if key == self.key else Sort(key)

    def inverted(self) -> Sort:
        return Sort(self.key, not self.reverse) if self.key else self

    def apply(self, lines: list[ProbeLine]) -> list[ProbeLine]:
        if self.key is None:
            return list(lines)
        value, text = SORT_KEYS[self.key]
        ascending = text != self.reverse
        known = [(value(line), i, line) for i, line in enumerate(lines)]
        present = [item for item in known if item[0] is not None]
        missing = [item[2] for item in known if item[0] is None]
        # sort by value in the wanted direction, ties by table order
        present.sort(key=lambda item: item[1])
        present.sort(key=lambda item: item[0], reverse=not ascending)
        return [item[2] for item in present] + missing
