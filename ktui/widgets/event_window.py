"""The bounded window of recent events behind the event pane, and its filter.

Plain Python (no Textual), so the bookkeeping can be tested without a screen.
Rows are formatted lazily: only rows that are drawn, or tested against a
filter, ever become text.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable

from ktui.lang.model import Probe
from ktui.pipeline.drilldown import DrillDown
from ktui.pipeline.format import Symbolize, event_columns
from ktui.record.feed import Event

DEFAULT_WINDOW = 2000


@dataclass(eq=False, slots=True)
class EventRow:
    seq: int  # position in the stream since start: stable while the row lives
    event: Event
    probe: Probe | None  # the probe as it was when the event arrived
    columns: tuple[str, ...] | None = None  # format.event_columns, on demand
    search: str | None = None  # the whole line, lower case, on demand


class EventWindow:
    """The last `size` events, and the view of them the filter lets through.

    With no filter the view is the window itself. With a filter, the view
    keeps the last `size` matching rows, so a rare event stays visible even
    while the unfiltered window turns over many times a second.

    The filter is the text typed after `/`, a drill-down from the stats
    pane (pipeline.drilldown: a test on the decoded event, tried first, as
    it is cheaper than formatting the line), or both.
    """

    def __init__(self, size: int = DEFAULT_WINDOW, symbolize: Symbolize | None = None) -> None:
        self.size = size
        self.symbolize = symbolize
        self.rows: deque[EventRow] = deque(maxlen=size)
        self.view: deque[EventRow] = self.rows
        self.filter = ""
        self.drill: DrillDown | None = None
        self._next_seq = 0

    def __len__(self) -> int:
        return len(self.view)

    def columns(self, row: EventRow) -> tuple[str, ...]:
        if row.columns is None:
            row.columns = event_columns(row.event, row.probe, self.symbolize)
        return row.columns

    @property
    def filtered(self) -> bool:
        return bool(self.filter) or self.drill is not None

    def matches(self, row: EventRow) -> bool:
        if self.drill is not None and not self.drill.matches(row.event):
            return False
        if not self.filter:
            return True
        if row.search is None:
            row.search = " ".join(self.columns(row)).lower()
        return self.filter in row.search

    def append(self, events: Iterable[Event], probes: dict[int, Probe]) -> tuple[int, int]:
        """Add events (oldest first). Returns (added to the view, dropped from
        the front of the view), which the widget needs to keep its cursor and
        scroll position on the same rows."""
        before = len(self.view)
        filtered = self.view is not self.rows
        added = 0
        for event in events:
            row = EventRow(self._next_seq, event, probes.get(event.probe_id))
            self._next_seq += 1
            self.rows.append(row)
            if not filtered:
                added += 1
            elif self.matches(row):
                self.view.append(row)
                added += 1
        return added, max(0, before + added - self.size)

    def set_filter(self, text: str) -> None:
        """Filter on any text of the line (probe name, comm, values), ignoring case."""
        self.filter = text.strip().lower()
        self._refilter()

    def set_drill(self, drill: DrillDown | None) -> None:
        """Show only the events a drill-down covers (None: all of them)."""
        self.drill = drill
        self._refilter()

    def _refilter(self) -> None:
        if not self.filtered:
            self.view = self.rows
        else:
            self.view = deque((r for r in self.rows if self.matches(r)), maxlen=self.size)

    def clear(self) -> None:
        self.rows.clear()
        if self.view is not self.rows:
            self.view.clear()
