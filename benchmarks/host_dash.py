"""The host half of `make bench`: the dashboard under a synthetic flood, no kernel.

    python -m benchmarks.host_dash flood --rate 100000 --seconds 20
    python -m benchmarks.host_dash idle --seconds 20
    python -m benchmarks.host_dash ingest --recording bench-out/stream-record.ktrec

One measurement per process, so each reports its own peak RSS (ru_maxrss).
`flood`: KtuiApp (headless, Textual's run_test driver, 140x40) polls a
BufferedFeed collector over a FakeFeed that produces `rate` events per
second of wall clock; every second `?` is pressed (help opens) and then
`escape`, and the time until the screen has switched is the key latency.
`idle`: the same key presses with no events at all (`flood --rate 0`).
`ingest`: a real recording replayed as fast as possible, through the
Collector alone and through Collector + dashboard polls.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time

from textual import events

from ktui.app import KtuiApp
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline.collector import BufferedFeed, Collector
from ktui.screens.help import HelpScreen
from tests.fakefeed import FakeFeed

SIZE = (140, 40)


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def peak_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class PacedFeed(FakeFeed):
    """A FakeFeed whose drains produce `rate` events per second of wall clock."""

    def __init__(self, probeset: ProbeSet, rate: float) -> None:
        super().__init__(probeset, events_per_drain=0, clock=time.monotonic)
        self.rate = rate
        self.produced = 0
        self._last = time.monotonic()
        self._carry = 0.0

    def drain(self):
        now = time.monotonic()
        due = self.rate * (now - self._last) + self._carry
        self._last = now
        self.events_per_drain = int(due)
        self._carry = due - int(due)
        batch = super().drain()
        self.produced += len(batch)
        return batch


def probeset() -> ProbeSet:
    return ProbeSet(name="bench", probes=(parse_spec("vfs_read:c:a3"),
                                          parse_spec("vfs_read:r:ret=retval:s64")))


async def flood(rate: float, seconds: float) -> dict:
    paced = PacedFeed(probeset(), rate)
    feed = BufferedFeed(paced)
    app = KtuiApp(feed, refresh_hz=15)
    latencies, idle_latencies, samples = [], [], []
    by_key: dict[str, list[float]] = {"question_mark": [], "escape": []}
    cpu0 = time.process_time()
    async with app.run_test(size=SIZE) as pilot:
        feed.start()
        t_start = time.monotonic()
        next_sample = t_start
        while time.monotonic() - t_start < seconds:
            await asyncio.sleep(0.5)
            # Direct: the key event goes to the driver, as a terminal's would;
            # latency = until the app has switched screens.
            for key, char, want in (("question_mark", "?", HelpScreen), ("escape", None, None)):
                t0 = time.monotonic()
                event = events.Key(key, char)
                event.set_sender(app)
                app._driver.send_message(event)
                while not (isinstance(app.screen, want) if want else not isinstance(app.screen, HelpScreen)):
                    await asyncio.sleep(0.0005)
                    if time.monotonic() - t0 > 10:
                        break
                latencies.append(time.monotonic() - t0)
                by_key[key].append(latencies[-1])
            # Pilot: until the app is idle again (key handled, screen refreshed).
            t0 = time.monotonic()
            await pilot.press("question_mark")
            await pilot.press("escape")
            idle_latencies.append((time.monotonic() - t0) / 2)
            if time.monotonic() >= next_sample:
                samples.append((round(time.monotonic() - t_start, 1), rss_kb()))
                next_sample += 1.0
        elapsed = time.monotonic() - t_start
        cpu = time.process_time() - cpu0
        await pilot.press("q")
    feed.close()
    latencies.sort()
    idle_latencies.sort()
    return {
        "mode": "flood" if rate else "idle", "rate": rate, "seconds": round(elapsed, 1),
        "produced": paced.produced, "achieved_rate": paced.produced / elapsed,
        "skipped": feed.skipped, "cpu_share": cpu / elapsed,
        "key_ms_median": 1000 * latencies[len(latencies) // 2],
        "key_ms_p95": 1000 * latencies[int(len(latencies) * 0.95)],
        "key_ms_max": 1000 * latencies[-1], "keys": len(latencies),
        # `?` (help opens) and `escape` (it closes) apart: which one is slow
        **{f"key_ms_{name}_{q}": 1000 * sorted(by_key[key])[int(len(by_key[key]) * f)]
           for key, name in (("question_mark", "open"), ("escape", "close"))
           for q, f in (("median", 0.5), ("p95", 0.95))},
        "key_idle_ms_median": 1000 * idle_latencies[len(idle_latencies) // 2],
        "key_idle_ms_p95": 1000 * idle_latencies[int(len(idle_latencies) * 0.95)],
        "peak_rss_kb": peak_kb(), "rss_samples": samples,
    }


class NullSink:
    def __init__(self) -> None:
        self.events = 0

    def on_batch(self, batch) -> None:
        self.events += len(batch)

    def on_stats(self, stats) -> None:
        pass


def ingest_collector(recording: str) -> dict:
    from ktui.pipeline.replay import ReplayFeed

    feed = ReplayFeed(recording, speed=0)
    collector = Collector(feed)
    sink = NullSink()
    t0 = time.monotonic()
    while not feed.finished:
        collector.drain_once(sink)
    collector.drain_once(sink)
    dt = time.monotonic() - t0
    return {"events": sink.events, "seconds": dt, "rate": sink.events / dt if dt else None}


async def ingest_dashboard(recording: str) -> dict:
    from ktui.pipeline.replay import ReplayFeed

    feed = ReplayFeed(recording, speed=0)
    total = 0
    real_drain = feed.drain

    def counting_drain():  # installed before the app exists: its first poll counts too
        nonlocal total
        batch = real_drain()
        total += len(batch)
        return batch

    feed.drain = counting_drain
    app = KtuiApp(feed, refresh_hz=0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        t0 = time.monotonic()
        polls = 0
        while not feed.finished:
            app.poll(read_stats=(polls % 15 == 0))
            polls += 1
            await pilot.pause()  # let the screen update, as the timer would
        app.poll(read_stats=True)
        dt = time.monotonic() - t0
        await pilot.press("q")
    return {"events": total, "seconds": dt, "polls": polls, "rate": total / dt if dt else None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["flood", "idle", "ingest"])
    ap.add_argument("--rate", type=float, default=100_000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--recording")
    args = ap.parse_args()
    if args.mode in ("flood", "idle"):
        out = asyncio.run(flood(args.rate if args.mode == "flood" else 0, args.seconds))
    else:
        out = {"mode": "ingest", "collector": ingest_collector(args.recording)}
        out["dashboard"] = asyncio.run(ingest_dashboard(args.recording))
        out["peak_rss_kb"] = peak_kb()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
