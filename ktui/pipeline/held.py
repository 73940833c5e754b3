"""Batches drained while the dashboard is covered, applied later in one go.

While the help or a dialog covers the dashboard, the app still drains the
feed on every tick (the kernel's buffers must not fill), but repaints the
dimmed dashboard behind it only once a second: each repaint of a covered
screen makes Textual draw the whole screen again as the modal's background
(docs/benchmarks-history.md, "Responsive under load"). What is drained in between
waits here, bounded: the newest `keep` events at least (the event pane
decodes no more than its window of a batch) and the count of the rest, so
the pane's meter still counts every event that arrived.
"""

from __future__ import annotations

from collections import Counter

from ktui.record.decode import EmptyBatch, MultiBatch
from ktui.record.feed import Event, EventBatch


class TrimmedBatch:
    """A batch whose first `dropped` events are gone: they count in its
    length, but only the rest can be decoded."""

    def __init__(self, inner: EventBatch, dropped: int, dropped_counts: dict[int, int]) -> None:
        self.inner = inner
        self.dropped = dropped
        self._dropped_counts = dropped_counts

    def __len__(self) -> int:
        return self.dropped + len(self.inner)

    def probe_counts(self) -> dict[int, int]:
        counts = Counter(self._dropped_counts)
        counts.update(self.inner.probe_counts())
        return dict(counts)

    def events(self, start: int = 0, stop: int | None = None) -> list[Event]:
        start, stop, _ = slice(start, stop).indices(len(self))
        lo, hi = max(start - self.dropped, 0), stop - self.dropped
        return self.inner.events(lo, hi) if lo < hi else []


class HeldBatches:
    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._parts: list[EventBatch] = []
        self._kept = 0
        self._dropped = 0
        self._dropped_counts: Counter[int] = Counter()

    def __bool__(self) -> bool:
        return bool(self._parts) or bool(self._dropped)

    def add(self, batch: EventBatch) -> None:
        if not len(batch):
            return
        self._parts.append(batch)
        self._kept += len(batch)
        # Drop whole batches from the front while the rest still hold `keep`.
        while len(self._parts) > 1 and self._kept - len(self._parts[0]) >= self.keep:
            old = self._parts.pop(0)
            self._kept -= len(old)
            self._dropped += len(old)
            self._dropped_counts.update(old.probe_counts())

    def take(self) -> EventBatch:
        """Everything held as one batch (oldest first); empties the hold."""
        parts, dropped, counts = self._parts, self._dropped, dict(self._dropped_counts)
        self._parts, self._kept, self._dropped = [], 0, 0
        self._dropped_counts = Counter()
        inner: EventBatch = EmptyBatch() if not parts else parts[0] if len(parts) == 1 else MultiBatch(parts)
        return TrimmedBatch(inner, dropped, counts) if dropped else inner
