"""Session: the Feed's reading side: events drained, counters, run-time costs.

drain() and stats() take the session's units and engine as they are,
without its lock (the tuple of units is replaced whole, never changed in
place), so reading never waits for a probe being added or removed.
"""

from __future__ import annotations

import time

from ktui.kernel.quiet import log_line
from ktui.record.feed import EventBatch, FeedError, ProbeStats, StatsSnapshot


class ReadingMixin:
    """Session's reading methods (state: Session.__init__)."""

    def symbolize(self, addr: int) -> str:
        return self.symbols.symbolize(addr)

    def drain(self) -> EventBatch:
        from ktui.record.decode import EmptyBatch, merged_by_time

        parts = []
        for unit in self._units:  # a unit freed meanwhile returns None
            raw = unit.drain_raw()
            if raw is not None and len(raw):
                parts.append(unit.decoder.batch(raw))
        engine = self._engine
        if engine is not None:
            batch = engine.drain()
            if len(batch):
                parts.append(batch)
        if not parts:
            return EmptyBatch()
        # several buffers: one batch in time order, each buffer's own order kept
        return parts[0] if len(parts) == 1 else merged_by_time(parts)

    def writes_events(self) -> bool:
        """Whether a probe running now writes events, so that a drain has
        work: a probe with fetches does, but with SessionOptions.events off
        only a compiled unit's (the compiled engine has no such switch)."""
        # (copies taken in one step: a probe added or removed meanwhile
        # changes the set or dict, never what is being looked at)
        if any(unit.program.probes[local].emits_events for unit in self._units for local in tuple(unit.live)):
            return True
        engine = self._engine
        return engine is not None and engine.events and any(
            slot.probe.emits_events for slot in tuple(engine.slots.values()))

    def drain_capacity(self) -> int | None:
        """Records the smallest event buffer holds, so a collector can drain
        a flood less often without letting any buffer fill (drain_pacing);
        None when no buffer can say."""
        sizes = [unit.capacity() for unit in self._units]
        if self._engine is not None:
            sizes.append(self._engine.capacity())
        sizes = [s for s in sizes if s]
        return min(sizes) if sizes else None

    def stats(self, detail: bool = True) -> StatsSnapshot:
        now = time.monotonic()
        timed = self._timing.on
        out: dict[int, ProbeStats] = {}
        for unit in self._units:
            out.update(unit.read_stats(self.loader, timed))
        engine = self._engine
        if engine is not None:
            out.update(engine.stats(timed, detail=detail))
            self._gate_health(out)
            self._span_health(out)
        self._add_missed_returns(out)
        # off meanwhile: what was read may have stopped growing partway
        return StatsSnapshot(now, out, timed=timed and self._timing.on)

    @property
    def timing(self) -> bool:
        return self._timing.on

    def set_timing(self, on: bool) -> None:
        """BPF run-time statistics on or off (runstats): FeedError if the
        kernel refuses them."""
        with self._lock:
            if self._closed and on:
                raise FeedError("the session is closed")
            try:
                self._timing.set(on)
            except OSError as exc:
                need = ("this kernel has none" if self.features.has("run_stats") is False
                        else "they need CAP_SYS_ADMIN and a kernel that has them")
                raise FeedError(f"the kernel refused BPF run-time statistics ({exc.strerror or exc}; "
                                f"{need})") from None
            if self._log_fd >= 0:
                log_line(self._log_fd, f"ktui: BPF run-time statistics {'on' if on else 'off'}")
