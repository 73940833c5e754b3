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


def drains_in(seconds: float, events_per_drain: int) -> int:
    feed = CountingFeed(events_per_drain)
    collector = Collector(feed, interval=0.01, idle_interval=0.05)

    async def run():
        asyncio.get_running_loop().call_later(seconds, collector.stop)
        await collector.run(NullSink())

    asyncio.run(run())
    return feed.drains


def test_an_idle_feed_is_drained_far_less_often_than_a_busy_one():
    idle, busy = drains_in(0.5, 0), drains_in(0.5, 5)
    # idle: ~0.5 s / 0.05 s; busy: up to 0.5 s / 0.01 s (fewer on a slow machine)
    assert idle <= 15
    assert busy > 2 * idle


def test_a_counting_only_set_is_never_drained_until_the_end():
    feed = CountingFeed(5)
    feed.probeset = ProbeSet(name="t", probes=(parse_spec("vfs_read:c"),))  # no fetches
    collector = Collector(feed, interval=0.01, stats_interval=float("inf"))

    async def run():
        asyncio.get_running_loop().call_later(0.3, collector.stop)
        await collector.run(NullSink())

    asyncio.run(run())
    assert feed.drains == 1  # the final drain only
