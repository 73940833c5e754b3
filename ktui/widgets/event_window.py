"""The bounded window of recent events behind the event pane, and its filter.

Plain Python (no Textual), so the bookkeeping can be tested without a screen.
Rows are formatted lazily: only rows that are drawn, or tested against a
filter, ever become text. And under a flood they are decoded lazily too:
at 100k events/s every poll brings more than the window holds, and the
whole window is replaced before the next one; decoding all of it (~9 ms
per 2000 records, every poll) was most of a poll's time for the ~40 rows on
screen (docs/benchmarks-history.md, "Responsive under load"). So a large slice of a
batch becomes rows that keep only their place in it; each block of BLOCK
rows is decoded, by the batch itself, when one of its rows is first needed.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable

from ktui.lang.model import Probe
from ktui.pipeline.drilldown import DrillDown
from ktui.pipeline.format import Symbolize, event_columns
from ktui.record.feed import Event, EventBatch

DEFAULT_WINDOW = 2000
BLOCK = 64  # rows decoded together (a screenful is about 40)
LAZY_FROM = 256  # smaller slices (low rates) are decoded at once, as they arrive
# A record the batch could not decode (a probe index it does not know: never
# written by ktui's programs) still takes its row, shown as unknown.
UNKNOWN = Event(probe_id=-1, ts_ns=0, cpu=0, pid=0, tid=0, comm="?", latency_ns=None, values=())


class _Block:
    """Rows [start, stop) of a batch, decoded together on first use; the
    batch is let go once decoded."""

    __slots__ = ("batch", "start", "stop", "probes", "decoded")

    def __init__(self, batch: EventBatch, start: int, stop: int, probes: dict[int, Probe]) -> None:
        self.batch: EventBatch | None = batch
        self.start, self.stop = start, stop
        self.probes = probes
        self.decoded: list[Event] | None = None

    def get(self, offset: int) -> tuple[Event, Probe | None]:
        if self.decoded is None:
            assert self.batch is not None
            self.decoded = self.batch.events(self.start, self.stop)
            self.batch = None
        event = self.decoded[offset] if offset < len(self.decoded) else UNKNOWN
        return event, self.probes.get(event.probe_id)


class EventRow:
    """One row of the window: an event (decoded now, or by its block when
    first needed) and the probe as it was when the event arrived."""

    __slots__ = ("seq", "_event", "_probe", "_block", "_offset", "columns", "search")

    def __init__(self, seq: int, event: Event | None = None, probe: Probe | None = None, *,
                 block: _Block | None = None, offset: int = 0) -> None:
        self.seq = seq  # position in the stream since start: stable while the row lives
        self._event, self._probe = event, probe
        self._block, self._offset = block, offset
        self.columns: tuple[str, ...] | None = None  # format.event_columns, on demand
        self.search: str | None = None  # the whole line, lower case, on demand

    def _decode(self) -> None:
        if self._event is None and self._block is not None:
            self._event, self._probe = self._block.get(self._offset)
            self._block = None

    @property
    def event(self) -> Event:
        self._decode()
        assert self._event is not None
        return self._event

    @property
    def probe(self) -> Probe | None:
        self._decode()
        return self._probe


def line_text(columns: tuple[str, ...]) -> str:
    """A row's columns as one line of text, without the cgroup's where the
    event carries none (a recording made before events did)."""
    return " ".join(c for i, c in enumerate(columns) if c or i != CGROUP_COLUMN)


CGROUP_COLUMN = 3  # in format.event_columns


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
            # the line as shown, and the cgroup's whole path where the line
            # shortens it (`/system.slice` finds a container's events too)
            line = line_text(self.columns(row))
            cgroup = row.event.cgroup
            row.search = (line if cgroup in line else f"{line} {cgroup}").lower()
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

    def append_batch(self, batch: EventBatch, start: int, stop: int, probes: dict[int, Probe]) -> tuple[int, int]:
        """Add events [start, stop) of a batch, as `append` does; a large
        slice with no filter on is decoded block by block, when shown."""
        if self.view is not self.rows or stop - start < LAZY_FROM:
            return self.append(batch.events(start, stop), probes)
        # Only the rows that stay in the window: the rest would be dropped at once.
        start = max(start, stop - self.size)
        before = len(self.view)
        for lo in range(start, stop, BLOCK):
            block = _Block(batch, lo, min(lo + BLOCK, stop), probes)
            for offset in range(block.stop - lo):
                self.rows.append(EventRow(self._next_seq, block=block, offset=offset))
                self._next_seq += 1
        added = stop - start
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
