"""Drain + decode CPU per event with records of 1, 2 or 4 sizes, no kernel.

    .venv/bin/python -m benchmarks.mixed_drain                 # this tree
    PYTHONPATH=/tmp/before .venv/bin/python benchmarks/mixed_drain.py   # another tree's ktui
    .venv/bin/python -m benchmarks.mixed_drain --uniform       # every record as long as the largest
    scripts/vm.sh -- '.venv/bin/python -m benchmarks.mixed_drain'      # under TCG

The generic engine's read side (GenericEngine.drain: the ring reader, then
tags to probes and the batch) on a synthetic BPF ring laid out as the
kernel's (8-byte headers, data pages twice in a row), `--per-drain` records
between drains as a flood brings them between the collector's drains. Only
the consumer is timed (process CPU around engine.drain(); with --events-too
also the whole batch's Event objects, what `ktui stream` builds).

Cases: one probe (56-byte records); two probes alternating A,B,A,B (56 and
64 bytes); four probes (56, 64, 88, 112 bytes) in a random order. Each
probe's records exactly as long as its own fields; `--uniform`: all as long
as the largest (what the generic program wrote before exact sizes, which
the reader before them read in its one-size path). Self-contained (its own
ring writer), so it runs against an older tree's ktui through PYTHONPATH:
an older reader takes records of several sizes by walking the headers in
Python.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time

import numpy as np

from ktui.kernel.generic.engine import GenericEngine
from ktui.kernel.buffers.ringbuf import RingBufReader, shared_u64
from ktui.lang.spec import parse_spec
from ktui.record.layout import HEADER_SIZE, probe_layout

SPECS = ("vfs_read:c:a3", "vfs_write:c:a3,a2", "vfs_readv:c:a1,a2,a3,a4,a5",
         "do_sys_openat2:c:fname=+0(a2):ustring")
CASES = {"1 size": (0,), "2 sizes": (0, 1), "4 sizes": (0, 1, 2, 3)}
TAG0 = 1 << 16  # slot 0, generation 1 (abi.COOKIE_GEN_SHIFT)


def own_size(probe) -> int:
    return HEADER_SIZE + max(8, (probe_layout(probe).payload_size + 7) // 8 * 8)


class Ring:
    """The ring's memory and a reader of it (this tree's API or an older one's)."""

    def __init__(self, data_size: int, record_size: int) -> None:
        self.data_size = data_size
        self.data = bytearray(2 * data_size)
        self.positions = bytearray(16)
        self.prod = 0
        if hasattr(RingBufReader, "over"):
            self.reader = RingBufReader.over(self.data, self.positions, data_size, record_size)
        else:  # before records of several sizes
            reader = RingBufReader.__new__(RingBufReader)
            reader.data_size = data_size
            reader.set_record_size(record_size)
            reader._data = memoryview(self.data)
            reader._cons_pos = shared_u64(self.positions, 0)
            reader._prod_pos = shared_u64(self.positions, 8)
            self.reader = reader
        self._prod_pos = shared_u64(self.positions, 8)

    def write(self, raw: bytes) -> None:
        off = self.prod % self.data_size
        for base in (off, off + self.data_size):  # both copies of the pages
            end = min(base + len(raw), 2 * self.data_size)
            self.data[base:end] = raw[: end - base]
        first_end = off + len(raw) - self.data_size
        if first_end > 0:
            self.data[0:first_end] = raw[len(raw) - first_end:]
        self.prod += len(raw)
        self._prod_pos[0] = self.prod


def drain_bytes(probes, sizes, pattern: np.ndarray) -> bytes:
    """One drain's records as the kernel writes them: header (u32 length,
    u32 page offset), then the record (ts, probe tag, pid, comm...)."""
    lens = np.asarray(sizes)[pattern]
    strides = 8 + lens
    at = np.zeros(len(pattern), dtype=np.int64)
    np.cumsum(strides[:-1], out=at[1:])
    out = np.zeros(int(strides.sum()), dtype=np.uint8)
    words = out.view("<u4")
    words[at // 4] = lens
    rec = (at + 8) // 4
    words[rec] = np.arange(len(pattern), dtype=np.uint32)  # ts (low word)
    words[rec + 4] = TAG0 + pattern  # probe: slot k, generation 1
    words[rec + 6] = words[rec + 7] = 4242  # pid, tid
    return out.tobytes()


def engine_for(probes, reader) -> GenericEngine:
    engine = GenericEngine.__new__(GenericEngine)
    engine._lock = threading.RLock()
    engine._history = {TAG0 + k: (p, k + 1) for k, p in enumerate(probes)}
    engine._decoders = None if hasattr(RingBufReader, "over") else {}
    engine.unreadable = 0
    engine.reader = reader
    return engine


def run_case(which, events: int, per_drain: int, ring_bytes: int, uniform: bool, events_too: bool,
             seed: int = 1) -> dict:
    probes = [parse_spec(SPECS[k]) for k in which]
    own = [own_size(p) for p in probes]
    sizes = [max(own)] * len(own) if uniform else own
    ring = Ring(ring_bytes, max(sizes))
    engine = engine_for(probes, ring.reader)
    rng = np.random.default_rng(seed)
    if len(which) == 2:
        pattern = np.arange(per_drain) % 2  # A,B,A,B
    else:
        pattern = rng.integers(0, len(which), per_drain)
    raw = drain_bytes(probes, sizes, pattern)
    cpu = 0.0
    done = 0
    while done < events:
        ring.write(raw)
        t0 = time.process_time()
        batch = engine.drain()
        if events_too:
            batch.events()
        cpu += time.process_time() - t0
        if len(batch) != per_drain:
            raise SystemExit(f"drained {len(batch)} of {per_drain} records")
        done += per_drain
    return {"events": done, "cpu_s": cpu, "us_per_event": cpu / done * 1e6,
            "bytes_per_event": len(raw) / per_drain}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=350_000, help="per case and round")
    ap.add_argument("--per-drain", type=int, default=3500)
    ap.add_argument("--ring-bytes", type=int, default=8 << 20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--uniform", action="store_true", help="every record as long as the largest")
    ap.add_argument("--events-too", action="store_true", help="also build every Event (stream's cost)")
    args = ap.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",")]
    per = {c: [] for c in cases}
    bytes_per = {}
    for r in range(args.rounds):  # cases interleaved: a busy host's drift hits them all
        for case in cases:
            res = run_case(CASES[case], args.events, args.per_drain, args.ring_bytes, args.uniform,
                           args.events_too)
            per[case].append(res["us_per_event"])
            bytes_per[case] = res["bytes_per_event"]
    import ktui
    what = "uniform (largest)" if args.uniform else "exact"
    print(f"ktui from {ktui.__file__.rsplit('/ktui/', 1)[0]}, sizes {what}, {args.per_drain} per drain, "
          f"{args.events} events x {args.rounds} rounds{', Events built' if args.events_too else ''}")
    for case in cases:
        xs = per[case]
        print(f"  {case:8} median {statistics.median(xs):.3f} us/event  (min {min(xs):.3f}, max {max(xs):.3f}; "
              f"{bytes_per[case]:.0f} ring bytes/event)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
