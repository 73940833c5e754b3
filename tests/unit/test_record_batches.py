"""The record path in whole batches, without a kernel: a ring laid out as the
kernel lays it out (benchmarks/fake_ring.FakeRing), the reader's flood path
and its careful path (BUSY, DISCARD), the generic engine's tag rewrite, the
Recorder writing batches from their own memory, and the recording replayed
to exactly the events that went in, with the lost count as it was."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from benchmarks.fake_ring import FakeRing
from ktui.kernel.generic import abi
from ktui.kernel.generic.engine import GenericEngine
from ktui.kernel.buffers.ringbuf import BUSY_BIT, DISCARD_BIT
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline.recording import Recorder
from ktui.pipeline.recording_reader import RecordingReader
from ktui.pipeline.replay import ReplayFeed
from ktui.record.feed import ProbeStats, StatsSnapshot
from ktui.record.layout import HEADER_SIZE

RECORD = HEADER_SIZE + 8  # one u64 fetch
SPECS = ("vfs_read:c:a3", "vfs_write:c:a3")


def tag(slot: int, gen: int = 1) -> int:
    return slot | gen << abi.COOKIE_GEN_SHIFT


def engine_for(reader, probes, tags, ids) -> GenericEngine:
    """The engine's read side: its history of probes by tag, and the reader."""
    engine = GenericEngine.__new__(GenericEngine)
    engine._lock = threading.RLock()
    engine._history = {t: (p, i) for t, p, i in zip(tags, probes, ids)}
    engine._decoders = None
    engine.unreadable = 0
    engine.reader = reader
    return engine


def records(engine, n: int, start: int, tags) -> np.ndarray:
    """n records cycling through `tags`; ts = index, a3 = 10 * index."""
    dtype = engine._decoder(RECORD).dtype
    recs = np.zeros(n, dtype=dtype)
    idx = np.arange(start, start + n)
    recs["ts"] = idx
    recs["probe"] = np.asarray(tags, dtype=np.uint32)[idx % len(tags)]
    recs["pid"] = recs["tid"] = 77
    recs["comm"] = b"work"
    recs["payload"] = (idx * 10).astype("<u8").view("V8")
    return recs


def test_flood_drain_copies_every_record_across_the_wrap():
    ring = FakeRing(4096, RECORD)  # 64 slots of 64 bytes
    sent = [bytes(np.arange(i * 8, i * 8 + RECORD // 8, dtype="<u8").view(f"V{RECORD}")[0]) for i in range(150)]
    got = []
    for lo in range(0, 150, 50):  # three batches: the second and third wrap
        batch = np.frombuffer(b"".join(sent[lo:lo + 50]), dtype=f"V{RECORD}")
        ring.produce(batch)
        out = ring.reader.drain()
        assert ring.reader.pending_bytes() == 0
        got += out.as_bytes()
    assert got == sent
    assert ring.reader.mixed_drains == 0  # one size, all committed: the flood's path


def test_a_busy_record_ends_the_drain_and_a_discarded_one_is_skipped():
    ring = FakeRing(4096, RECORD)
    batch = np.frombuffer(b"".join(np.uint64(i).tobytes() * (RECORD // 8) for i in range(10)), dtype=f"V{RECORD}")
    at = ring.produce(batch)
    ring.set_len(int(at[3]), RECORD | DISCARD_BIT)
    ring.set_len(int(at[6]), RECORD | BUSY_BIT)

    def drained():
        return [int(np.frombuffer(r, "<u8")[0]) for r in ring.reader.drain().as_bytes()]

    assert drained() == [0, 1, 2, 4, 5]  # 3 discarded, 6 still being written
    assert ring.reader.pending_bytes() == 4 * ring.stride
    ring.set_len(int(at[6]), RECORD)  # committed now
    assert drained() == [6, 7, 8, 9]
    assert ring.reader.pending_bytes() == 0


def test_engine_maps_tags_in_place_for_one_probe_and_for_several():
    probes = [parse_spec(s) for s in SPECS]
    for tags in ([tag(0)], [tag(0), tag(5, 2)]):
        ring = FakeRing(1 << 16, RECORD)
        engine = engine_for(ring.reader, probes[:len(tags)], tags, [10, 11][:len(tags)])
        recs = records(engine, 300, 0, tags + [tag(9)])  # tag(9): no such probe
        ring.produce(recs)
        batch = engine.drain()
        cycle = len(tags) + 1
        # records of the unknown tag are left out, and counted
        assert len(batch) == 300 - 300 // cycle and engine.unreadable == 300 // cycle
        events = batch.events()
        assert len(events) == len(batch)
        want = [(10 + i % cycle, i, 10 * i) for i in range(300) if i % cycle < len(tags)]
        assert [(e.probe_id, e.ts_ns, e.values[0]) for e in events] == want


def test_a_recording_of_drained_batches_replays_every_event_and_the_lost_count(tmp_path):
    probes = [parse_spec(s) for s in SPECS]
    tags = [tag(0), tag(1)]
    ring = FakeRing(1 << 17, RECORD)  # room for the largest batch, 1023 records
    engine = engine_for(ring.reader, probes, tags, [10, 11])
    path = str(tmp_path / "flood.ktrec")
    rec = Recorder(path, ProbeSet("t", probes=tuple(probes)))
    sent = 0
    for size in (700, 1, 0, 1023, 333):
        ring.produce(records(engine, size, sent, tags))
        sent += size
        batch = engine.drain()
        if len(batch):
            rec.on_batch(batch)
    half = sent // 2
    stats = StatsSnapshot(1.0, {
        10: ProbeStats(10, hits=sent - half + 17, emitted=sent - half, lost=17),
        11: ProbeStats(11, hits=half + 3, emitted=half, lost=3),
    })
    rec.on_stats(stats)
    rec.close()
    assert rec.events == sent

    reader = RecordingReader(path)
    chunks = list(reader.chunks())
    assert reader.complete and not reader.truncated
    assert sum(len(c.value) for c in chunks if c.kind == "events") == sent

    feed = ReplayFeed(path, speed=0)
    got = []
    while not feed.finished:
        got += [(e.probe_id, e.ts_ns, e.pid, e.comm, e.values) for e in feed.drain().events()]
    assert got == [(10 + i % 2, i, 77, "work", (10 * i,)) for i in range(sent)]
    final = feed.stats().probes
    assert (final[10].lost, final[11].lost) == (17, 3)
    assert final[10].hits == final[10].emitted + final[10].lost
    feed.close()


def test_the_ring_and_the_engine_say_how_many_records_the_ring_holds():
    """What the collector paces a flood's drains by (drain_pacing)."""
    ring = FakeRing(1 << 16, RECORD)
    assert ring.reader.capacity() == (1 << 16) // (8 + RECORD)
    engine = engine_for(ring.reader, [parse_spec(SPECS[0])], [tag(0)], [1])
    assert engine.capacity() == (1 << 16) // (8 + RECORD)
    ring.produce(np.zeros(10, dtype=f"V{RECORD + 64}"))  # larger records came: fewer fit
    ring.reader.drain()
    assert engine.capacity() == (1 << 16) // (8 + RECORD + 64)
    ring.produce_raw([b"\0" * RECORD, b"\0" * (RECORD + 64)] * 5)  # half of each: their mean
    ring.reader.drain()
    assert engine.capacity() == (1 << 16) // (8 + RECORD + 32)
    engine.reader = None
    assert engine.capacity() is None
