"""The way out of stream and record, on a feed that behaves like a busy
kernel: detach, then drain to the end, then the final stats, so every event
emitted is written and the summary's `emitted` is exactly what was written.
The same against a real kernel: tests/kernel/test_accounting.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections import Counter

import numpy as np
import pytest

from ktui.headless import run_record, run_stream
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline.collector import Collector
from ktui.pipeline.replay import ReplayFeed
from ktui.record.decode import Decoder, EmptyBatch, RecordBatch
from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus, StatsSnapshot
from ktui.record.layout import record_layout

SPECS = ("vfs_read:c:a3", "vfs_write:c:a3")


class BusyKernelFeed:
    """Until detach_all(), `per_call` events per probe land in the buffer
    (and in the counters) before each call the consumer makes (every other
    drain: a drain loop that forgot to detach first still ends, and fails),
    as the probes keep firing while Python works; drain() takes the buffer."""

    def __init__(self, per_call: int = 3) -> None:
        self.probeset = ProbeSet("busy", probes=tuple(parse_spec(s) for s in SPECS))
        self.per_call = per_call
        self.calls: list[str] = []
        self.attached = True
        self.closed = False
        self.emitted = Counter()
        self.buffered = Counter()
        self.drains = 0
        probes = list(self.probeset.probes)
        self.decoder = Decoder(record_layout(probes), probes, [0, 1])

    def _fire(self) -> None:
        if self.attached:
            for probe_id in (0, 1):
                self.emitted[probe_id] += self.per_call
                self.buffered[probe_id] += self.per_call

    def drain(self):
        self.drains += 1
        if self.drains % 2:
            self._fire()
        self.calls.append("drain")
        n = sum(self.buffered.values())
        if not n:
            return EmptyBatch()
        records = np.zeros(n, dtype=self.decoder.dtype)
        records["probe"] = [0] * self.buffered[0] + [1] * self.buffered[1]
        self.buffered.clear()
        return RecordBatch(self.decoder, records)

    def stats(self, detail: bool = True) -> StatsSnapshot:
        self._fire()
        self.calls.append("stats")
        return StatsSnapshot(0.0, {i: ProbeStats(i, hits=self.emitted[i], emitted=self.emitted[i])
                                   for i in (0, 1)})

    def detach_all(self) -> None:
        if self.attached:  # as Session's: once detached, a no-op
            self._fire()
            self.calls.append("detach_all")
            self.attached = False

    def statuses(self):
        return {i: ProbeStatus(i, p, ProbeState.ATTACHED) for i, p in enumerate(self.probeset.probes)}

    def close(self) -> None:
        self.attached = False
        self.closed = True


class CountingSink:
    def __init__(self) -> None:
        self.written = Counter()
        self.last: StatsSnapshot | None = None

    def on_batch(self, batch) -> None:
        self.written.update(batch.probe_counts())

    def on_stats(self, stats) -> None:
        self.last = stats


def until_draining(feed) -> None:
    """Until the collector has drained a few times (it runs), or a minute."""
    deadline = time.monotonic() + 60
    while feed.drains < 3 and time.monotonic() < deadline:
        time.sleep(0.01)


def test_finish_detaches_then_drains_to_the_end_then_reads_stats():
    feed, sink = BusyKernelFeed(), CountingSink()
    collector = Collector(feed, interval=0.001)

    async def run():
        asyncio.get_running_loop().call_later(0.05, collector.stop)
        await collector.run(sink)

    asyncio.run(run())
    end = feed.calls[feed.calls.index("detach_all"):]
    assert end == ["detach_all", "drain", "drain", "stats"]  # the second drain finds nothing
    assert {i: s.emitted for i, s in sink.last.probes.items()} == dict(sink.written)
    assert sum(sink.written.values()) > 0


def test_stop_detaches_at_once_even_while_a_sink_is_busy():
    """A stop signal lands while the sink writes a big batch: the probes go
    now (the kernel stops emitting), the batch and the rest are still written."""
    feed = BusyKernelFeed()
    collector = Collector(feed, interval=0.001)

    class SlowSink(CountingSink):
        def on_batch(self, batch) -> None:
            if not collector.stopping:
                collector.stop()  # as the signal handler does, mid-batch
                waited = 0.0
                while feed.attached and waited < 5:  # still inside on_batch
                    time.sleep(0.01)
                    waited += 0.01
                assert not feed.attached, "stop() did not detach while the sink was busy"
            super().on_batch(batch)

    sink = SlowSink()
    asyncio.run(collector.run(sink))
    assert {i: s.emitted for i, s in sink.last.probes.items()} == dict(sink.written)


def test_a_signal_before_the_collector_exists_detaches_at_once(capfd):
    """SIGINT while stream still imports its collector: the probes go now,
    and the collector, once there, stops at once and writes everything."""
    import signal

    from ktui.headless import StopSignals

    feed, sink = BusyKernelFeed(), CountingSink()
    with StopSignals(feed) as stop:
        signal.raise_signal(signal.SIGINT)  # the handler runs here, in this thread
        waited = 0.0
        while feed.attached and waited < 10:  # detached by a thread the handler started
            time.sleep(0.01)
            waited += 0.01
        assert not feed.attached
        collector = Collector(feed)
        stop.notify(collector)
        asyncio.run(collector.run(sink))
    assert collector.stopping and collector.finished
    assert {i: s.emitted for i, s in sink.last.probes.items()} == dict(sink.written)


def test_finish_runs_once():
    feed, sink = BusyKernelFeed(), CountingSink()
    collector = Collector(feed)
    collector.finish(sink)
    collector.finish(sink)
    assert feed.calls.count("detach_all") == 1


def test_stream_writes_every_emitted_event(capfd):
    """A batch bigger than the sink's chunk arrives as the stop does: it is
    written whole, and the summary counts exactly the lines written."""
    feed = BusyKernelFeed(per_call=3000)
    status = run_stream(feed.probeset, None, interval=0.05, duration=0.1, with_stats=False,
                        open_feed=lambda ps, options: feed)
    assert status == 0 and feed.closed
    lines = [json.loads(x) for x in capfd.readouterr().out.splitlines()]
    written = Counter(x["probe_id"] for x in lines if x["type"] == "event")
    summary = lines[-1]
    assert summary["type"] == "summary" and summary["events"] == sum(written.values())
    assert {p["probe_id"]: p["emitted"] for p in summary["probes"]} == dict(written)


def test_record_writes_every_emitted_event(tmp_path, capfd):
    feed = BusyKernelFeed(per_call=3000)
    out = tmp_path / "r.ktrec"
    status = run_record(feed.probeset, None, str(out), interval=0.05, duration=0.1,
                        open_feed=lambda ps, options: feed)
    assert status == 0 and feed.closed
    replay = ReplayFeed(str(out), speed=0)
    written = Counter()
    while not replay.finished:
        written.update(replay.drain().probe_counts())
    assert {i: s.emitted for i, s in replay.stats().probes.items()} == dict(written)
    assert sum(written.values()) > 0


@pytest.mark.parametrize("command", ["stream", "record"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_each_stop_signal_ends_stream_and_record_the_same_way(sig, command, tmp_path, capfd):
    """SIGINT, SIGTERM and SIGHUP (a closed terminal) take one way out, in
    ktui's own code (headless.StopSignals): detach, drain to the end, the
    summary, exit 0. The kernel's part (probes gone, every event written)
    is proven once, by SIGINT (tests/kernel/test_accounting.py), beside
    SIGKILL (tests/kernel/test_exit_paths.py)."""
    feed = BusyKernelFeed()

    def signal_once_running() -> None:
        until_draining(feed)
        os.kill(os.getpid(), sig)  # handled in the main thread, where the collector runs

    # Where ktui would not take the signal, this handler would (and the
    # duration, a bound for a slow machine, end the run): never the case.
    unhandled = []
    before = signal.signal(sig, lambda *_: unhandled.append(sig))
    threading.Thread(target=signal_once_running, daemon=True).start()
    out = tmp_path / "r.ktrec"
    try:
        if command == "stream":
            status = run_stream(feed.probeset, None, interval=0.05, duration=30, with_stats=False,
                                open_feed=lambda ps, options: feed)
        else:
            status = run_record(feed.probeset, None, str(out), interval=0.05, duration=30,
                                open_feed=lambda ps, options: feed)
    finally:
        signal.signal(sig, before)
    assert unhandled == []
    assert status == 0 and feed.closed and not feed.attached
    assert feed.calls.index("detach_all") < len(feed.calls) - 1  # drained and read after it
    if command == "stream":
        lines = [json.loads(x) for x in capfd.readouterr().out.splitlines()]
        written = Counter(x["probe_id"] for x in lines if x["type"] == "event")
        assert lines[-1]["type"] == "summary"
        assert {p["probe_id"]: p["emitted"] for p in lines[-1]["probes"]} == dict(written)
    else:
        replay = ReplayFeed(str(out), speed=0)
        written = Counter()
        while not replay.finished:
            written.update(replay.drain().probe_counts())
        assert not replay.truncated
        assert {i: s.emitted for i, s in replay.stats().probes.items()} == dict(written)


class FloodedKernelFeed(BusyKernelFeed):
    """A flood already in the buffer when the probes are detached: more
    events than a stream formats in seconds, handed over 20,000 at a time,
    as a ring buffer read in batches would."""

    FLOOD = 4_000_000  # per probe: longer to write than the test waits, on any machine
    BATCH = 20_000

    def detach_all(self) -> None:
        if self.attached:
            for probe_id in (0, 1):
                self.emitted[probe_id] += self.FLOOD
                self.buffered[probe_id] += self.FLOOD
        super().detach_all()

    def drain(self):
        self.drains += 1
        if self.drains % 2:
            self._fire()
        take = {i: min(self.buffered[i], self.BATCH // 2) for i in (0, 1)}
        if not sum(take.values()):
            return EmptyBatch()
        records = np.zeros(sum(take.values()), dtype=self.decoder.dtype)
        records["probe"] = [0] * take[0] + [1] * take[1]
        for i in (0, 1):
            self.buffered[i] -= take[i]
        return RecordBatch(self.decoder, records)


def test_a_second_interrupt_stops_writing_and_counts_what_is_left(capfd, monkeypatch):
    """After Ctrl-C, stream writes every event the probes emitted (the
    summary adds up); from a flood that takes long, so one line says a
    second Ctrl-C stops it: the events still in the buffer are then taken
    and counted, not written, and written + unwritten is still exactly
    what was emitted."""
    from ktui.headless import StopSignals

    feed = FloodedKernelFeed()
    # The hint's delay is not what this tests: 0.2 s, not 1 s, and the second
    # Ctrl-C as soon as the hint is out (it was a sleep of the delay + 0.5 s)
    monkeypatch.setattr(StopSignals, "HINT_AFTER", 0.2)
    hinted = threading.Event()
    hint = StopSignals._hint
    monkeypatch.setattr(StopSignals, "_hint", lambda self: (hint(self), hinted.set()))

    def interrupt_twice() -> None:
        until_draining(feed)
        os.kill(os.getpid(), signal.SIGINT)
        # once the hint is out (the flood takes far longer to write than this)
        hinted.wait(60)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_twice, daemon=True).start()
    status = run_stream(feed.probeset, None, interval=0.05, duration=60, with_stats=False,
                        open_feed=lambda ps, options: feed)
    assert status == 0 and feed.closed
    out, err = capfd.readouterr()
    lines = [json.loads(x) for x in out.splitlines()]
    summary = lines[-1]
    written = sum(1 for x in lines if x["type"] == "event")
    emitted = sum(p["emitted"] for p in summary["probes"])
    assert summary["events"] == written
    assert summary["unwritten"] > 0  # the second interrupt came while the flood was written
    assert written + summary["unwritten"] == emitted == sum(feed.emitted.values())
    assert err.count("Ctrl-C again") == 1
    assert f"{summary['unwritten']} more taken from the buffer and not written" in err


def test_one_interrupt_that_ends_at_once_says_nothing_more(capfd):
    feed = BusyKernelFeed()

    def interrupt() -> None:
        until_draining(feed)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    status = run_stream(feed.probeset, None, interval=0.05, duration=60, with_stats=False,
                        open_feed=lambda ps, options: feed)
    # past the hint's moment (its timer is never cancelled, the ended stream
    # silences it): wait for that timer to be done, not a fixed 1.5 s
    for timer in [t for t in threading.enumerate() if isinstance(t, threading.Timer)]:
        timer.join(30)
        assert not timer.is_alive()
    assert status == 0
    out, err = capfd.readouterr()
    assert "Ctrl-C again" not in err and "unwritten" not in out.splitlines()[-1]
