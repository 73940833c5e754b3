"""`ktui record`'s reader on a synthetic BPF ring buffer: CPU per event, no kernel.

    .venv/bin/python -m benchmarks.record_cpu                  # on the host
    scripts/vm.sh -- '.venv/bin/python -m benchmarks.record_cpu'   # under TCG
    .venv/bin/python -m benchmarks.record_cpu --profile        # where it goes
    .venv/bin/python -m benchmarks.record_cpu --rate 125000    # the collector's loop too

With `--rate`, a producer fills the ring at that many events per second of
wall time and the real Collector drains it on its own timer into the
Recorder: its asyncio wake-ups, its pacing (drain_pacing) and its stats
reads (of an empty snapshot) are counted too; the producer's own CPU is
not. Events that would not fit in the ring are counted as lost, as the
kernel would. Run it from another tree's checkout with PYTHONPATH pointing
there to compare (`python benchmarks/record_cpu.py`, not `-m`).

A producer lays records out exactly as the kernel does (8-byte header with
the length, data pages mapped twice in a row, simulated by writing both
copies), `--per-drain` records between drains, as a flood does between the
collector's 10 ms drains. The consumer is the real path of a recording:
RingBufReader.drain -> the generic engine's decoders (tag -> index, by
size) -> Recorder.on_batch into a file. Only the consumer is timed (process CPU
time around it). A real run adds the collector's loop and the kernel's
side; benchmarks/vm_suite.py measures those (streaming part, cpu_rounds_s).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import threading
import time

import numpy as np

from benchmarks.fake_ring import FakeRing
from ktui.kernel.generic.engine import GenericEngine
from ktui.kernel.buffers.ringbuf import RECORD_HEADER
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline.recording import Recorder
from ktui.record.layout import HEADER_SIZE

SPEC = "vfs_read:c:a3"  # the bench's flood probe: 48-byte header + one u64


def fake_engine(probe, reader) -> GenericEngine:
    """The engine's read side only: one probe in slot 0, generation 1."""
    engine = GenericEngine.__new__(GenericEngine)
    engine._lock = threading.RLock()
    engine._history = {1 << 16: (probe, 1)}  # slot 0, gen 1 (abi.COOKIE_GEN_SHIFT = 16)
    engine._decoders = None
    engine.unreadable = 0
    engine.reader = reader
    return engine


class NoSink:
    """--sink none: the reader alone (what writing the file adds is the difference)."""

    def on_batch(self, batch) -> None:
        pass

    def close(self) -> None:
        pass


def flood_parts(ring_bytes: int, rows: int):
    """The probe, a fake ring and engine for it, `rows` records as the
    engine decodes them (tagged, one task) and a fresh output path: what
    both measurements fill their ring from."""
    from ktui.kernel.generic import abi

    probe = parse_spec(SPEC)
    record_size = HEADER_SIZE + 8
    ring = FakeRing(ring_bytes, record_size)
    engine = fake_engine(probe, ring.reader)
    tag = 1 << abi.COOKIE_GEN_SHIFT
    engine._history = {tag: (probe, 1)}
    template = np.zeros(rows, dtype=engine._decoder(record_size).dtype)
    template["probe"] = tag
    template["pid"] = template["tid"] = 4242
    template["comm"] = b"workload"
    out = tempfile.mktemp(prefix="ktui-record-cpu-", dir=os.environ.get("TMPDIR", "/tmp"))
    return probe, record_size, ring, engine, template, out


def run(events: int, per_drain: int, ring_bytes: int, profile: bool, sink: str = "file") -> dict:
    probe, record_size, ring, engine, template, out = flood_parts(ring_bytes, per_drain)
    recorder = Recorder(out, ProbeSet("bench", probes=(probe,)), overwrite=True) if sink == "file" else NoSink()
    cpu = 0.0
    written = 0
    prof = cProfile.Profile() if profile else None
    try:
        seq = 0
        while written < events:
            n = min(per_drain, events - written)
            batch = template[:n].copy()
            batch["ts"] = np.arange(seq, seq + n)
            ring.produce(batch)
            seq += n
            t0 = time.process_time()
            if prof:
                prof.enable()
            got = engine.drain()
            if len(got):
                recorder.on_batch(got)
            if prof:
                prof.disable()
            cpu += time.process_time() - t0
            written += len(got)
        t0 = time.process_time()
        recorder.close()
        cpu += time.process_time() - t0
        size = os.path.getsize(out) if sink == "file" else 0
    finally:
        if os.path.exists(out):
            os.unlink(out)
    if prof:
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(18)
    return {"events": written, "per_drain": per_drain, "cpu_s": cpu,
            "us_per_event": cpu / written * 1e6, "file_bytes": size}


class FloodFeed:
    """A Feed over a FakeRing that a producer fills at `rate` events per
    second of wall time, in whole batches when the collector drains."""

    def __init__(self, probe, ring: FakeRing, engine, template: np.ndarray, rate: float,
                 events: int) -> None:
        from ktui.lang.model import ProbeSet

        self.probeset = ProbeSet("bench", probes=(probe,))
        self.ring, self.engine, self.template = ring, engine, template
        self.rate, self.events = rate, events
        self.produced = self.lost = self.drains = 0
        self.producer_cpu = 0.0
        self.t0 = time.monotonic()
        self.on_done = None

    def _produce(self) -> None:
        due = min(self.events, int((time.monotonic() - self.t0) * self.rate))
        t0 = time.process_time()
        while self.produced < due:
            free = (self.ring.data_size - (self.ring.prod - int(self.ring.reader._cons_pos[0]))) \
                // self.ring.stride
            n = min(due - self.produced, len(self.template), free)
            if n <= 0:  # the ring is full: the kernel would count these lost
                self.lost += due - self.produced
                self.produced = due
                break
            batch = self.template[:n].copy()
            batch["ts"] = np.arange(self.produced, self.produced + n)
            self.ring.produce(batch)
            self.produced += n
        self.producer_cpu += time.process_time() - t0

    def drain(self):
        self._produce()
        self.drains += 1
        batch = self.engine.drain()
        if self.produced >= self.events and not len(batch) and self.on_done:
            self.on_done()
        return batch

    def drain_capacity(self) -> int:
        return self.ring.reader.capacity()

    def stats(self):
        from ktui.record.feed import StatsSnapshot

        return StatsSnapshot(time.monotonic(), {})

    def detach_all(self) -> None:
        pass


def run_collector(events: int, rate: float, ring_bytes: int, profile: bool) -> dict:
    """The Collector's own loop over a FloodFeed, into a recording."""
    import asyncio

    from ktui.pipeline.collector import Collector

    probe, record_size, ring, engine, template, out = flood_parts(
        ring_bytes, ring_bytes // (RECORD_HEADER + HEADER_SIZE + 8))
    recorder = Recorder(out, ProbeSet("bench", probes=(probe,)), overwrite=True)
    feed = FloodFeed(probe, ring, engine, template, rate, events)
    collector = Collector(feed)
    feed.on_done = collector.stop
    prof = cProfile.Profile() if profile else None
    try:
        t0, w0 = time.process_time(), time.monotonic()
        feed.t0 = w0
        if prof:
            prof.enable()
        asyncio.run(collector.run(recorder))
        recorder.close()
        if prof:
            prof.disable()
        cpu = time.process_time() - t0 - feed.producer_cpu
        wall = time.monotonic() - w0
        size = os.path.getsize(out)
    finally:
        if os.path.exists(out):
            os.unlink(out)
    if prof:
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(18)
    return {"events": recorder.events, "lost": feed.lost, "drains": feed.drains, "cpu_s": cpu,
            "wall_s": wall, "us_per_event": cpu / max(recorder.events, 1) * 1e6, "file_bytes": size}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--per-drain", type=int, default=3500,
                    help="records between drains (a 1M flood at ~350k/s, drained every 10 ms)")
    ap.add_argument("--ring-bytes", type=int, default=8 << 20)
    ap.add_argument("--sink", choices=("file", "none"), default="file",
                    help="file: the Recorder (default); none: the reader alone")
    ap.add_argument("--profile", action="store_true", help="cProfile the consumer (stderr)")
    ap.add_argument("--rate", type=float, default=None,
                    help="events/s: run the Collector's loop over a ring filled at this rate")
    args = ap.parse_args(argv)
    if args.rate:
        res = run_collector(args.events, args.rate, args.ring_bytes, args.profile)
        print(f"record via the collector, {args.rate:.0f} events/s: {res['events']} events "
              f"(lost {res['lost']}) in {res['drains']} drains over {res['wall_s']:.1f} s: "
              f"{res['cpu_s']:.3f} s CPU, {res['us_per_event']:.3f} us/event, {res['file_bytes']} bytes")
        return 0
    res = run(args.events, args.per_drain, args.ring_bytes, args.profile, args.sink)
    print(f"record reader, sink {args.sink}: {res['events']} events, {res['per_drain']} per drain: "
          f"{res['cpu_s']:.3f} s CPU, {res['us_per_event']:.3f} us/event, {res['file_bytes']} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
