"""`ktui record`'s reader on a synthetic BPF ring buffer: CPU per event, no kernel.

    .venv/bin/python -m benchmarks.record_cpu                  # on the host
    scripts/vm.sh -- '.venv/bin/python -m benchmarks.record_cpu'   # under TCG
    .venv/bin/python -m benchmarks.record_cpu --profile        # where it goes

A producer lays records out exactly as the kernel does (8-byte header with
the length, data pages mapped twice in a row, simulated by writing both
copies), `--per-drain` records between drains, as a flood does between the
collector's 10 ms drains. The consumer is the real path of a recording:
RingBufReader.drain_groups -> the generic engine's _batch (tag -> index)
-> Recorder.on_batch into a file. Only the consumer is timed (process CPU
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

from ktui.kernel.generic.engine import GenericEngine
from ktui.kernel.ringbuf import RECORD_HEADER, RingBufReader, shared_u64
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline.recording import Recorder
from ktui.record.layout import HEADER_SIZE

SPEC = "vfs_read:c:a3"  # the bench's flood probe: 48-byte header + one u64


class FakeRing:
    """A ring buffer's memory without the kernel: the reader's fields point
    at a bytearray twice the data size, and `produce` writes both copies,
    as the kernel's double mapping shows them."""

    def __init__(self, data_size: int, record_size: int) -> None:
        self.data_size = data_size
        self.record_size = record_size
        self.stride = RECORD_HEADER + record_size
        self.data = bytearray(2 * data_size)
        self.positions = bytearray(16)
        self.prod = 0
        reader = RingBufReader.__new__(RingBufReader)
        reader.data_size = data_size
        reader.set_record_size(record_size)
        reader._data = memoryview(self.data)
        reader._cons_pos = shared_u64(self.positions, 0)
        reader._prod_pos = shared_u64(self.positions, 8)
        self.reader = reader
        self._prod_pos = shared_u64(self.positions, 8)

    def produce(self, records: np.ndarray) -> None:
        slots = np.zeros(len(records), dtype=[("len", "<u4"), ("pgoff", "<u4"),
                                               ("record", f"V{self.record_size}")])
        slots["len"] = self.record_size
        slots["record"] = records.view(f"V{self.record_size}")
        raw = slots.tobytes()
        off = self.prod % self.data_size
        for base in (off, off + self.data_size):  # both copies of the pages
            end = min(base + len(raw), 2 * self.data_size)
            self.data[base:end] = raw[: end - base]
        spill = off + len(raw) - 2 * self.data_size  # (never with a drained ring)
        assert spill <= 0
        first_end = off + len(raw) - self.data_size  # wrapped part, first copy
        if first_end > 0:
            self.data[0:first_end] = raw[len(raw) - first_end:]
        self.prod += len(raw)
        self._prod_pos[0] = self.prod


def fake_engine(probe, reader) -> GenericEngine:
    """The engine's read side only: one probe in slot 0, generation 1."""
    engine = GenericEngine.__new__(GenericEngine)
    engine._lock = threading.RLock()
    engine._history = {1 << 16: (probe, 1)}  # slot 0, gen 1 (abi.COOKIE_GEN_SHIFT = 16)
    engine._decoders = {}
    engine.reader = reader
    return engine


class NoSink:
    """--sink none: the reader alone (what writing the file adds is the difference)."""

    def on_batch(self, batch) -> None:
        pass

    def close(self) -> None:
        pass


def run(events: int, per_drain: int, ring_bytes: int, profile: bool, sink: str = "file") -> dict:
    probe = parse_spec(SPEC)
    record_size = HEADER_SIZE + 8
    ring = FakeRing(ring_bytes, record_size)
    engine = fake_engine(probe, ring.reader)
    from ktui.kernel.generic import abi

    tag = 1 << abi.COOKIE_GEN_SHIFT
    engine._history = {tag: (probe, 1)}
    dtype = engine._decoder(record_size).dtype
    template = np.zeros(per_drain, dtype=dtype)
    template["probe"] = tag
    template["pid"] = template["tid"] = 4242
    template["comm"] = b"workload"
    out = tempfile.mktemp(prefix="ktui-record-cpu-", dir=os.environ.get("TMPDIR", "/tmp"))
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--per-drain", type=int, default=3500,
                    help="records between drains (a 1M flood at ~350k/s, drained every 10 ms)")
    ap.add_argument("--ring-bytes", type=int, default=8 << 20)
    ap.add_argument("--sink", choices=("file", "none"), default="file",
                    help="file: the Recorder (default); none: the reader alone")
    ap.add_argument("--profile", action="store_true", help="cProfile the consumer (stderr)")
    args = ap.parse_args(argv)
    res = run(args.events, args.per_drain, args.ring_bytes, args.profile, args.sink)
    print(f"record reader, sink {args.sink}: {res['events']} events, {res['per_drain']} per drain: "
          f"{res['cpu_s']:.3f} s CPU, {res['us_per_event']:.3f} us/event, {res['file_bytes']} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
