"""Fewer, larger drains under a flood, never so few that a buffer fills;
a trickle and an idle feed are drained as before."""

from __future__ import annotations

import asyncio

from hypothesis import example, given
from hypothesis import strategies as st

from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline import collector as collector_module
from ktui.pipeline.collector import Collector
from ktui.pipeline.drain_pacing import DrainPacer
from tests.fakefeed import FakeFeed

RING = 131_072  # records of 56 bytes in the default 8 MiB ring


def flood(pacer: DrainPacer, rate: float, drains: int,
          capacity: int | None = RING) -> list[tuple[float, float]]:
    """Drive the pacer with a steady `rate`: each drain brings the whole
    events that arrived over the wait before it (the first one over `busy`).
    Each step's (wait, seen): the wait the pacer chose, and the rate the
    drain before it really delivered. Whole events make `seen` up to one
    event a period below `rate` (0.4% at 250 events in a 10 ms busy
    interval, the least a flood brings), and the pacer can only know `seen`."""
    now, wait, out = 0.0, pacer.busy, []
    for _ in range(drains):
        now += wait
        drained = int(rate * wait)
        seen = drained / wait
        wait = pacer.next(drained, now, capacity)
        out.append((wait, seen))
    return out


def waits(pacer: DrainPacer, rate: float, drains: int, capacity: int | None = RING,
          digits: int | None = 4) -> list[float]:
    """The waits of `flood`, rounded to `digits`."""
    return [round(wait, digits) if digits is not None else wait
            for wait, _ in flood(pacer, rate, drains, capacity)]


def test_a_trickle_is_drained_every_busy_interval_as_before():
    assert waits(DrainPacer(0.01, 0.05), 1_000, 5) == [0.01] * 5
    assert waits(DrainPacer(0.01, 0.05), 20_000, 5) == [0.01] * 5


def test_nothing_arriving_backs_off_to_idle_as_before():
    pacer = DrainPacer(0.01, 0.05)
    assert [pacer.next(0, t, RING) for t in (0.0, 0.02, 0.06, 0.1)] == [0.02, 0.04, 0.05, 0.05]
    assert pacer.next(3, 0.15, RING) == 0.01


def test_a_flood_waits_until_the_ring_is_about_a_quarter_full():
    # 125k events/s (the one-CPU guest's flood): a quarter of 131,072 records
    # is 0.262 s of it, bounded by `longest`
    assert waits(DrainPacer(0.01, 0.05), 125_000, 4) == [0.25] * 4
    # 1M events/s: 32 ms, 8k records a drain
    assert waits(DrainPacer(0.01, 0.05), 1_000_000, 4) == [0.0328] * 4


def test_a_rate_that_jumps_shortens_the_next_wait_at_once():
    pacer = DrainPacer(0.01, 0.05)
    assert waits(pacer, 125_000, 2) == [0.25, 0.25]
    # twice the rate during the last 0.25 s wait: 62,500 records came (under
    # half the ring), and the next wait is half as long
    now = 0.01 + 0.25 + 0.25
    assert round(pacer.next(62_500, now, RING), 4) == 0.1311
    # and back to a trickle: the busy interval again
    assert pacer.next(10, now + 0.1311, RING) == 0.01


def test_a_drain_that_found_the_ring_over_half_full_drains_again_soon():
    """Four times the rate, or a consumer slower than the flood (stream's
    NDJSON): the ring was near full, and the rate seen over a long period
    says less than what comes now. No long wait then, whatever the rate."""
    pacer = DrainPacer(0.01, 0.05)
    waits(pacer, 125_000, 2)
    assert pacer.next(125_000, 0.51, RING) == 0.01
    # a sink that took 3 s to write the last batch: the ring filled meanwhile
    assert pacer.next(RING, 3.51, RING) == 0.01


def test_without_a_known_capacity_a_flood_is_drained_every_busy_interval():
    assert waits(DrainPacer(0.01, 0.05), 1_000_000, 3, capacity=None) == [0.01] * 3


@given(rate=st.floats(25_000.0, 1e8), capacity=st.integers(1, 1 << 24), steps=st.integers(1, 6))
@example(rate=25_025.0, capacity=1001, steps=1)
def test_at_a_steady_flood_the_ring_never_gets_past_the_fill_target(rate, capacity, steps):
    """What arrives during a wait stays within a quarter of the ring, unless
    even the busy interval brings more (then nothing waits longer than before)."""
    # The bound is on the rate the drains delivered, the one the pacer saw:
    # rate=25025 brings 250.25 events in the first 10 ms, 250 whole ones,
    # and 25,025/s over the wait sized for 25,000/s is 0.1% past the target.
    # (The ring's 4x margin for a rising rate covers that; fill is a quarter.)
    pacer = DrainPacer(0.01, 0.05)
    for wait, seen in flood(pacer, rate, steps, capacity):
        assert pacer.busy <= wait <= pacer.longest
        assert wait == pacer.busy or seen * wait <= pacer.fill * capacity * 1.001


@given(rate=st.floats(0.0, 24_999.0), capacity=st.integers(1, 1 << 24), steps=st.integers(1, 6))
def test_below_a_flood_no_wait_is_longer_than_before(rate, capacity, steps):
    pacer = DrainPacer(0.01, 0.05)
    assert all(pacer.busy <= wait <= pacer.idle for wait in waits(pacer, rate, steps, capacity, digits=None))


class FloodFeed(FakeFeed):
    """`rate` events a second of a fake clock; its ring holds RING records."""

    def __init__(self, rate: float, clock: list[float]) -> None:
        super().__init__(ProbeSet(name="t", probes=(parse_spec("vfs_read:c:a3"),)), events_per_drain=0)
        self.rate, self.clock, self.last, self.drained = rate, clock, 0.0, []

    def drain(self):
        self.events_per_drain = int(self.rate * (self.clock[0] - self.last))
        self.last = self.clock[0]
        self.drained.append(self.events_per_drain)
        return super().drain()

    def drain_capacity(self) -> int:
        return RING


def collector_waits(rate: float, drains: int, monkeypatch) -> tuple[list[float], list[int]]:
    clock = [0.0]
    feed = FloodFeed(rate, clock)
    collector = Collector(feed, interval=0.01, idle_interval=0.05, stats_interval=float("inf"))
    got: list[float] = []

    class Clock:
        @staticmethod
        def monotonic() -> float:
            return clock[0]

    async def fake_wait(awaitable, timeout):
        awaitable.close()
        got.append(round(timeout, 4))
        clock[0] += timeout
        if len(got) >= drains:
            collector.stop()
        raise asyncio.TimeoutError

    monkeypatch.setattr(collector_module, "time", Clock)
    monkeypatch.setattr(asyncio, "wait_for", fake_wait)

    class Sink:
        def on_batch(self, batch):
            pass

        def on_stats(self, stats):
            pass

    asyncio.run(collector.run(Sink()))
    return got, feed.drained


def test_the_collector_drains_a_flood_in_big_batches_and_a_trickle_as_before(monkeypatch):
    flood, sizes = collector_waits(125_000, 4, monkeypatch)
    assert flood[1:] == [0.25] * 3  # the first drain finds the ring empty (idle step)
    assert max(sizes) <= RING // 4  # 31,250 records a drain, none lost
    trickle, _ = collector_waits(1_000, 4, monkeypatch)
    assert trickle[1:] == [0.01] * 3
