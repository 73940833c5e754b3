"""The async collector: drains a Feed on a short timer, hands out batches.

The kernel's buffers are emptied every `interval` (10 ms by default; up to
50 ms while nothing arrives, see IdleBackoff; under a flood the headless
Collector waits longer, as long as no buffer can fill: drain_pacing) without
blocking the event loop: a drain is a few memory reads and one numpy copy
per buffer, never a Python call per event. Consumers get whole batches.

`Collector.run(sink)` drives a headless sink (stream, record) and ends with
`finish`: detach every probe, drain to the end, read the final counters, in
that order, so every event the kernel emitted reaches the sink and the last
stats count exactly that (a drain before the detach would miss what the
probes wrote in between, while the counters still counted it).
`BufferedFeed` wraps a Feed for the dashboard: it drains at the collector's
pace into a bounded backlog, and the UI takes the backlog at its own refresh
rate. The backlog keeps at most `max_events`; older batches are dropped
whole and counted in `skipped`, so memory stays bounded whatever the rate.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Protocol

from ktui.pipeline.drain_pacing import DrainPacer, IdleBackoff
from ktui.record.decode import EmptyBatch, MultiBatch
from ktui.record.feed import EventBatch, Feed, StatsSnapshot


class Sink(Protocol):
    def on_batch(self, batch: EventBatch) -> None: ...

    def on_stats(self, stats: StatsSnapshot) -> None: ...


class Collector:
    def __init__(self, feed: Feed, *, interval: float = 0.01, stats_interval: float = 1.0,
                 idle_interval: float = 0.05) -> None:
        self.feed = feed
        self.interval = interval
        self.pacer = DrainPacer(interval, idle_interval)
        self.stats_interval = stats_interval
        self.events = 0
        self.stopping = False
        self.finished = False
        self._stopping = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._detacher: threading.Thread | None = None

    def stop(self) -> None:
        """Safe from a signal handler, which may run in the middle of a batch
        that takes a sink seconds to write: the probes are detached at once,
        in a thread, so the kernel stops emitting (and the traced programs
        stop paying for it) now rather than after that batch. `finish` then
        writes what was emitted before."""
        if not self.stopping:
            self.stopping = True
            self._detacher = threading.Thread(target=self._detach_quietly, name="ktui-detach",
                                              daemon=True)
            self._detacher.start()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)

    def _detach_quietly(self) -> None:
        try:
            self.feed.detach_all()
        except Exception:  # noqa: BLE001 - finish() detaches again and raises it there
            pass

    def drain_once(self, sink: Sink) -> int:
        batch = self.feed.drain()
        n = len(batch)
        if n:
            self.events += n
            sink.on_batch(batch)
        return n

    def _capacity(self) -> int | None:
        """Records the feed's smallest buffer holds (None: it cannot say)."""
        capacity = getattr(self.feed, "drain_capacity", None)
        return capacity() if capacity is not None else None

    def finish(self, sink: Sink) -> None:
        """The way out: detach every probe (after which no program runs),
        drain the buffers until they are empty, then read the final stats.
        Quick even after a flood: once detached nothing new arrives, so what
        is left is at most the buffers' worth. Runs once."""
        if self.finished:
            return
        self.finished = True
        if self._detacher is not None:
            self._detacher.join()
        self.feed.detach_all()  # (again: a no-op once done) an error shows here
        while self.drain_once(sink):
            pass
        sink.on_stats(self.feed.stats())

    async def run(self, sink: Sink) -> None:
        """Drain until stop(), then `finish`."""
        self._loop = asyncio.get_running_loop()
        if self.stopping:
            self._stopping.set()
        next_stats = time.monotonic() + self.stats_interval
        # A set whose probes only count (no fetches) never writes an event:
        # then there is nothing to drain, and the loop sleeps until the next
        # stats read or the stop, like funccount-bpfcc.
        emits = self.feed.probeset.emits_events
        try:
            while not self.stopping:
                started = time.monotonic()
                drained = self.drain_once(sink) if emits else 0
                now = time.monotonic()
                if now >= next_stats:
                    sink.on_stats(self.feed.stats())
                    next_stats = now + self.stats_interval
                wait = self.pacer.next(drained, started, self._capacity() if drained else None) \
                    if emits else next_stats - now
                try:
                    await asyncio.wait_for(self._stopping.wait(), None if wait == float("inf") else wait)
                except asyncio.TimeoutError:
                    pass
        finally:
            self.finish(sink)


class BufferedFeed:
    """A Feed whose drain() returns what a background collector gathered."""

    def __init__(self, feed: Feed, *, max_events: int = 200_000, interval: float = 0.01,
                 idle_interval: float = 0.05) -> None:
        self.inner = feed
        self.max_events = max_events
        self.interval = interval
        self.backoff = IdleBackoff(interval, idle_interval)
        self.skipped = 0  # events dropped from the backlog before anyone took them
        self._backlog: list[EventBatch] = []
        self._backlog_len = 0
        self._task: asyncio.Task | None = None
        self._failure: Exception | None = None  # raised by the background drain

    # Feed attributes and calls that pass straight through.
    @property
    def probeset(self):
        return self.inner.probeset

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def start(self) -> None:
        """Start draining in the running event loop (call from the app)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            while True:
                await asyncio.sleep(self.backoff.next(self._collect()))
        except Exception as exc:  # noqa: BLE001 - handed to the app, not dropped
            # Nobody awaits this task: an exception left in it would only be
            # logged when it is garbage collected. The next drain() raises it
            # where the app polls, so the app fails the way it reports failures.
            self._failure = exc

    def _collect(self) -> int:
        batch = self.inner.drain()
        if not len(batch):
            return 0
        self._backlog.append(batch)
        self._backlog_len += len(batch)
        while self._backlog_len > self.max_events and len(self._backlog) > 1:
            old = self._backlog.pop(0)
            self._backlog_len -= len(old)
            self.skipped += len(old)
        return len(batch)

    def drain(self) -> EventBatch:
        if self._task is None:  # first call comes from the app, inside its loop
            try:
                self.start()
            except RuntimeError:
                pass  # no running loop (a synchronous caller): drain inline only
        if self._failure is not None:
            raise self._failure
        self._collect()
        parts, self._backlog, self._backlog_len = self._backlog, [], 0
        if not parts:
            return EmptyBatch()
        return parts[0] if len(parts) == 1 else MultiBatch(parts)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self.inner.close()
