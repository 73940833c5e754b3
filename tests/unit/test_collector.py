"""The collector's pacing: drain often while events flow, back off when idle."""

from __future__ import annotations

import asyncio

from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline.collector import Collector, IdleBackoff
from tests.fakefeed import FakeFeed


def test_backoff_doubles_while_idle_and_snaps_back_on_events():
    b = IdleBackoff(busy=0.01, idle=0.05)
    assert [b.next(0) for _ in range(4)] == [0.02, 0.04, 0.05, 0.05]
    assert b.next(3) == 0.01
    assert b.next(0) == 0.02


class CountingFeed(FakeFeed):
    def __init__(self, events_per_drain: int) -> None:
        super().__init__(ProbeSet(name="t", probes=(parse_spec("vfs_read:c:a3"),)),
                         events_per_drain=events_per_drain)
        self.drains = 0

    def drain(self):
        self.drains += 1
        return super().drain()


class NullSink:
    def on_batch(self, batch) -> None:
        pass

    def on_stats(self, stats) -> None:
        pass


def waits_between_drains(feed: CountingFeed, drains: int, monkeypatch) -> list[float]:
    """The waits the collector asks for between its first `drains` drains.

    Each wait is recorded and ends at once (a fake clock), so the answer is
    the same on an idle machine and a loaded one: no drain count depends on
    how much wall time the loop got."""
    collector = Collector(feed, interval=0.01, idle_interval=0.05, stats_interval=float("inf"))
    waits: list[float] = []

    async def no_wait(awaitable, timeout):
        awaitable.close()  # the stop event's wait() coroutine, never started
        waits.append(timeout)
        if feed.drains >= drains:
            collector.stop()
        raise asyncio.TimeoutError

    monkeypatch.setattr(asyncio, "wait_for", no_wait)
    asyncio.run(collector.run(NullSink()))
    return waits


def test_an_idle_feed_is_drained_far_less_often_than_a_busy_one(monkeypatch):
    # idle: the wait doubles from 10 ms up to 50 ms; busy: 10 ms every time
    assert waits_between_drains(CountingFeed(0), 6, monkeypatch) == [0.02, 0.04, 0.05, 0.05, 0.05, 0.05]
    assert waits_between_drains(CountingFeed(5), 6, monkeypatch) == [0.01] * 6


def test_events_after_a_quiet_spell_bring_the_short_wait_back(monkeypatch):
    class Bursty(CountingFeed):
        pattern = (0, 0, 0, 5, 0)

        def drain(self):
            self.events_per_drain = self.pattern[self.drains] if self.drains < len(self.pattern) else 0
            return super().drain()

    assert waits_between_drains(Bursty(0), 5, monkeypatch) == [0.02, 0.04, 0.05, 0.01, 0.02]


def test_a_counting_only_set_is_never_drained_until_the_end():
    feed = CountingFeed(5)
    feed.probeset = ProbeSet(name="t", probes=(parse_spec("vfs_read:c"),))  # no fetches
    collector = Collector(feed, interval=0.01, stats_interval=float("inf"))

    async def run():
        asyncio.get_running_loop().call_later(0.3, collector.stop)
        await collector.run(NullSink())

    asyncio.run(run())
    assert feed.drains == 1  # the final drain only
