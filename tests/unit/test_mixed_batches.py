"""Records of several sizes from drain to screen and file, without a kernel.

Each probe's records are exactly as long as its own fields. The generic
engine's read side drains a ring laid out as the kernel's
(benchmarks/fake_ring.py) where three probes' records of 64, 72 and 120
bytes interleave; the batch keeps ring order for any slice (the event pane
decodes the last rows block by block), counts what it cannot decode (a tag
no probe has, a record of another size than its probe's) instead of
decoding it with the wrong layout, and a recording of it replays the same
events in the same order. Old recordings still replay: format 1
(tests/fixtures/format1.ktrec) and format 2 as written before records of
several sizes (tests/fixtures/format2.ktrec, tests/fixtures/make_format2.py).
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.fake_ring import FakeRing
from ktui.kernel.generic import abi
from ktui.kernel.generic.engine import GenericEngine
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline.recording import FORMAT_VERSION, Recorder
from ktui.pipeline.recording_reader import RecordingReader
from ktui.pipeline.replay import ReplayFeed
from ktui.record.decode import InterleavedBatch, MultiBatch, RecordBatch
from ktui.record.layout import HEADER_SIZE, probe_record_size
from ktui.record.raw import RawRecords

FIXTURES = Path(__file__).parent.parent / "fixtures"
SPECS = ("vfs_read:c:a3", "vfs_write:c:a3,a2", "do_sys_openat2:c:fname=+0(a2):ustring")
PROBES = [parse_spec(s) for s in SPECS]
IDS = [10, 11, 12]


def tag(slot: int, gen: int = 1) -> int:
    return slot | gen << abi.COOKIE_GEN_SHIFT


TAGS = [tag(0), tag(1), tag(4, 3)]


def make_engine(reader, probes=PROBES, tags=TAGS, ids=IDS) -> GenericEngine:
    """The engine's read side only: its history of probes by tag, and the reader."""
    engine = GenericEngine.__new__(GenericEngine)
    engine._lock = threading.RLock()
    engine._history = {t: (p, i) for t, p, i in zip(tags, probes, ids)}
    engine._decoders = None
    engine.unreadable = 0
    engine.reader = reader
    return engine


def record(engine, which: int, serial: int, size: int | None = None, probe_tag: int | None = None) -> bytes:
    """The record the kernel writes for probe `which`'s hit number `serial`:
    ts = serial, a3 = 10 * serial (a2 = 7; fname = f<serial>)."""
    size = size or probe_record_size(PROBES[which])
    recs = np.zeros(1, dtype=engine._decoder(size).dtype)
    recs["ts"] = serial
    recs["probe"] = TAGS[which] if probe_tag is None else probe_tag
    recs["pid"] = recs["tid"] = 77
    recs["comm"] = b"work"
    payload = bytearray(size - HEADER_SIZE)
    if which == 2:
        payload[:64] = f"f{serial}".encode().ljust(64, b"\0")
    else:
        payload[:8] = (10 * serial).to_bytes(8, "little")
        if which == 1:
            payload[8:16] = (7).to_bytes(8, "little")
    recs["payload"] = bytes(payload)
    return recs.tobytes()


def expected(which: int, serial: int) -> tuple:
    values = [(10 * serial,), (10 * serial, 7), (f"f{serial}",)][which]
    return IDS[which], serial, values


def as_tuples(events) -> list[tuple]:
    return [(e.probe_id, e.ts_ns, e.values) for e in events]


def fill(ring, engine, pattern, start=0) -> list[tuple]:
    """Records of the probes in `pattern` order; what they decode to."""
    ring.produce_raw([record(engine, w, start + k) for k, w in enumerate(pattern)])
    return [expected(w, start + k) for k, w in enumerate(pattern)]


def test_three_sizes_interleaved_decode_in_ring_order():
    ring = FakeRing(1 << 16)
    engine = make_engine(ring.reader)
    want = fill(ring, engine, [0, 1, 0, 2, 2, 1, 0, 0, 1, 2] * 20)
    batch = engine.drain()
    assert isinstance(batch, InterleavedBatch) and len(batch) == 200
    assert [len(p) for p in batch.parts] == [80, 60, 60]  # one part per size: 64, 72, 120
    assert as_tuples(batch.events()) == want
    assert batch.probe_counts() == {10: 80, 11: 60, 12: 60}
    assert engine.unreadable == 0 and ring.reader.pending_bytes() == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=120), st.data())
def test_any_slice_is_those_events_in_ring_order(pattern, data):
    ring = FakeRing(1 << 16)
    engine = make_engine(ring.reader)
    want = fill(ring, engine, pattern)
    batch = engine.drain()
    start = data.draw(st.integers(0, len(pattern)))
    stop = data.draw(st.integers(start, len(pattern)))
    assert as_tuples(batch.events(start, stop)) == want[start:stop]
    assert as_tuples(batch.events(-10)) == want[-10:]  # the event pane's last rows
    blocks = [e for lo in range(0, len(pattern), 7) for e in batch.events(lo, lo + 7)]
    assert as_tuples(blocks) == want


def test_a_record_no_probe_could_write_is_counted_not_decoded():
    ring = FakeRing(1 << 16)
    engine = make_engine(ring.reader)
    blobs = [record(engine, 0, 0), record(engine, 1, 1),
             record(engine, 0, 2, size=probe_record_size(PROBES[1])),  # probe 0's tag at probe 1's size: the wrong layout
             record(engine, 0, 3, probe_tag=tag(9)),  # a tag no probe has
             record(engine, 2, 4), record(engine, 0, 5)]
    ring.produce_raw(blobs)
    batch = engine.drain()
    assert as_tuples(batch.events()) == [expected(0, 0), expected(1, 1), expected(2, 4), expected(0, 5)]
    assert len(batch) == 4 and engine.unreadable == 2
    ring.produce_raw([b"\1" * 40, record(engine, 0, 6)])  # shorter than a header
    assert as_tuples(engine.drain().events()) == [expected(0, 6)]
    assert engine.unreadable == 3


def test_one_probe_flood_stays_one_plain_batch():
    ring = FakeRing(1 << 16)
    engine = make_engine(ring.reader, PROBES[:1], TAGS[:1], IDS[:1])
    want = fill(ring, engine, [0] * 300)
    batch = engine.drain()
    assert isinstance(batch, RecordBatch) and ring.reader.mixed_drains == 0
    assert as_tuples(batch.events()) == want


def test_multibatch_slices_are_its_parts_one_after_the_other():
    ring = FakeRing(1 << 16)
    engine = make_engine(ring.reader)
    first = fill(ring, engine, [2, 0, 1])
    a = engine.drain()
    second = fill(ring, engine, [1, 0], start=0)  # earlier timestamps: never sorted back
    b = engine.drain()
    both = MultiBatch([a, b])
    want = first + second
    assert as_tuples(both.events()) == want
    for lo in range(6):
        for hi in range(lo, 6):
            assert as_tuples(both.events(lo, hi)) == want[lo:hi]


def test_without_keeps_the_order_of_the_rest():
    ring = FakeRing(1 << 16)
    engine = make_engine(ring.reader)
    want = fill(ring, engine, [0, 1, 2, 1, 0, 2, 0])
    batch = engine.drain()
    rest = batch.without({11})
    assert as_tuples(rest.events()) == [w for w in want if w[0] != 11]
    assert as_tuples(batch.without({11, 12}).events()) == [w for w in want if w[0] == 10]
    assert len(batch.without({10, 11, 12})) == 0


def test_a_recording_of_interleaved_sizes_replays_them_in_order(tmp_path):
    ring = FakeRing(1 << 16)
    engine = make_engine(ring.reader)
    path = str(tmp_path / "mixed.ktrec")
    rec = Recorder(path, ProbeSet("t", probes=tuple(PROBES)))
    want = []
    rng = np.random.default_rng(7)
    serial = 0
    batches = []
    for n in (50, 1, 0, 333, 7):
        pattern = rng.integers(0, 3, n).tolist()
        want += fill(ring, engine, pattern, serial)
        serial += n
        batch = engine.drain()
        if len(batch):
            batches.append(batch)
    # one of them as the collector hands it over: several drains in one
    rec.on_batch(batches[0])
    rec.on_batch(MultiBatch(batches[1:]))
    rec.close()
    assert rec.events == serial

    reader = RecordingReader(path)
    chunks = list(reader.chunks())
    assert reader.head["version"] == FORMAT_VERSION and reader.complete
    kinds = [c.kind for c in chunks]
    assert kinds.count("unit") == 3  # one per size
    assert sum(isinstance(c.value, InterleavedBatch) for c in chunks if c.kind == "events") >= 3

    feed = ReplayFeed(path, speed=0)
    got = []
    while not feed.finished:
        got += as_tuples(feed.drain().events())
    assert got == want
    feed.close()


async def test_a_replay_hides_a_probe_of_interleaved_records(tmp_path):
    ring = FakeRing(1 << 16)
    engine = make_engine(ring.reader)
    path = str(tmp_path / "hide.ktrec")
    rec = Recorder(path, ProbeSet("t", probes=tuple(PROBES)))
    want = fill(ring, engine, [0, 1, 2] * 10)
    rec.on_batch(engine.drain())
    rec.close()
    feed = ReplayFeed(path, speed=0)
    await feed.set_enabled(11, False)
    got = []
    while not feed.finished:
        got += as_tuples(feed.drain().events())
    assert got == [w for w in want if w[0] != 11]
    feed.close()


def test_the_compiled_units_decoders_take_exact_and_unit_wide_sizes():
    """A compiled unit's probes are its local indices; today's codegen makes
    every record as long as the largest (120 here), the exact-size codegen
    each probe's own: both read, any other size counted."""
    from ktui.record.decode import SizedDecoders
    from ktui.record.layout import record_layout

    layout = record_layout(PROBES)
    sizes = [sorted({probe_record_size(p), layout.record_size}) for p in PROBES]
    decoders = SizedDecoders(PROBES, IDS, sizes=sizes)
    engine = make_engine(None)
    blobs = []
    own, wide = [probe_record_size(p) for p in PROBES], layout.record_size
    for k, (which, size) in enumerate([(0, own[0]), (1, wide), (2, wide), (1, own[1]), (0, wide), (0, own[1])]):
        blobs.append(record(engine, which, k, size=size, probe_tag=which))
    ring = FakeRing(1 << 14)
    ring.produce_raw(blobs)
    batch = decoders.batch(ring.reader.drain())
    assert as_tuples(batch.events()) == [expected(0, 0), expected(1, 1), expected(2, 2), expected(1, 3),
                                         expected(0, 4)]
    assert decoders.unreadable == 1  # probe 0 at probe 1's size: neither its own size nor the unit's


def test_a_format_2_recording_replays_every_event_including_records_shorter_than_its_unit():
    feed = ReplayFeed(str(FIXTURES / "format2.ktrec"), speed=0)
    events = []
    while not feed.finished:
        events += feed.drain().events()
    assert not feed.truncated
    compiled = [(e.probe_id, e.values) for e in events if e.probe_id in (1, 2, 3)]
    assert compiled == [(1 + i % 3, [(i,), (-i,), (f"/tmp/f{i}",)][i % 3]) for i in range(9)]
    generic = [(e.probe_id, e.values) for e in events if e.probe_id in (4, 5)]
    # 56-byte records before the join, 56-byte ones drained after it (the
    # UNIT that did not replay before), then 64-byte ones
    assert generic == [(4, (100,)), (4, (101,)), (4, (102,)), (4, (103,)),
                       (4, (104,)), (5, (105, 7)), (4, (106,))]
    assert all(e.comm == "grower" for e in events if e.probe_id in (4, 5))
    feed.close()


def test_a_format_1_recording_still_replays():
    feed = ReplayFeed(str(FIXTURES / "format1.ktrec"), speed=0)
    n = 0
    while not feed.finished:
        n += len(feed.drain().events())
    assert n == 21
    feed.close()


def test_a_mixed_chunk_that_does_not_add_up_is_refused(tmp_path):
    from ktui.pipeline.recording import RecordingError

    ring = FakeRing(1 << 16)
    engine = make_engine(ring.reader)
    path = tmp_path / "bad.ktrec"
    rec = Recorder(str(path), ProbeSet("t", probes=tuple(PROBES)))
    fill(ring, engine, [0, 1])
    rec.on_batch(engine.drain())
    rec.close()
    data = bytearray(path.read_bytes())
    at = data.index(b"EVTM")
    # the first part's record count (after kind, length, parts, width, unit)
    count_at = at + 8 + 8 + 4
    data[count_at:count_at + 4] = (2).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(RecordingError, match="corrupt b'EVTM' chunk"):
        list(RecordingReader(str(path)).chunks())


def test_raw_records_of_one_size_need_no_order():
    with pytest.raises(ValueError):
        RawRecords([np.zeros(1, "V8"), np.zeros(1, "V16")])
    assert RawRecords([np.zeros(3, "V8")]).order is None


def test_buffers_of_one_drain_merge_by_time_each_in_its_own_order(tmp_path):
    """A session drains several buffers at once (compiled units beside the
    generic engine): one batch in time order, each buffer's events still in
    their ring order (a timestamp out of step inside a buffer stays where
    it is), any slice the same as the whole; and it records and replays."""
    from ktui.record.decode import SizedDecoders, merged_by_time

    ring = FakeRing(1 << 16)
    engine = make_engine(ring.reader)
    stamps = [10, 30, 31, 25, 50, 70]  # 25 out of step in the engine's ring: it stays after 31
    pattern = [0, 1, 2, 0, 1, 2]
    ring.produce_raw([record(engine, w, ts) for w, ts in zip(pattern, stamps)])
    generic = engine.drain()
    assert isinstance(generic, InterleavedBatch)
    unit = SizedDecoders(PROBES[:1], [20])  # a compiled unit of vfs_read:c:a3: local index 0
    other = FakeRing(1 << 14)
    other.produce_raw([record(engine, 0, ts, probe_tag=0) for ts in (5, 29, 60)])
    compiled = unit.batch(other.reader.drain())
    assert isinstance(compiled, RecordBatch)
    both = merged_by_time([compiled, generic])
    got = [(e.probe_id, e.ts_ns) for e in both.events()]
    assert got == [(20, 5), (10, 10), (20, 29), (11, 30), (12, 31), (10, 25), (11, 50), (20, 60), (12, 70)]
    for lo in range(len(got)):
        assert [(e.probe_id, e.ts_ns) for e in both.events(lo, lo + 2)] == got[lo:lo + 2]
    assert both.probe_counts() == {10: 2, 11: 2, 12: 2, 20: 3}
    path = str(tmp_path / "merged.ktrec")
    rec = Recorder(path, ProbeSet("t", probes=tuple(PROBES)))
    rec.on_batch(both)
    rec.close()
    feed = ReplayFeed(path, speed=0)
    replayed = []
    while not feed.finished:
        replayed += [(e.probe_id, e.ts_ns) for e in feed.drain().events()]
    assert replayed == got
    feed.close()
    assert merged_by_time([compiled]) is compiled and len(merged_by_time([])) == 0
