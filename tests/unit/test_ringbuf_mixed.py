"""The ring buffer reader with records of several sizes, without a kernel.

Each probe's records are exactly as long as its own fields, so one BPF ring
holds records of several sizes in any order. The reader follows the chain
of 8-byte headers in numpy (follow_chain, pointer doubling) instead of a
Python loop per record. Checked here on a ring laid out as the kernel's
(benchmarks/fake_ring.py: data pages twice in a row, u32 length with BUSY
bit 31 and DISCARD bit 30, u32 page offset), against a plain walk of the
headers one by one (`reference`): wrap-around, BUSY in the middle, DISCARD,
stray words that look like a header, sizes never seen before, and random
sequences of all of these (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.fake_ring import FakeRing
from ktui.kernel.buffers.ringbuf import BUSY_BIT, DISCARD_BIT, SIZE_MASK, follow_chain
from ktui.record.raw import RawRecords


def blob(i: int, size: int) -> bytes:
    """A record of `size` bytes that says which it is (and is not a header:
    its words are large)."""
    word = (0xAB000000 | i).to_bytes(4, "little") * 2
    return (word * (size // 8 + 1))[:size]


def reference(ring: FakeRing, limit: int | None = None) -> tuple[list[bytes], int]:
    """The headers walked one by one, as the kernel's own consumer would:
    (records taken, new consumer position); at most `limit` records."""
    cons = int(ring.reader._cons_pos[0])
    prod = ring.prod
    out = []
    while cons < prod and (limit is None or len(out) < limit):
        off = cons % ring.data_size
        length = int.from_bytes(ring.data[off:off + 4], "little")
        if length & BUSY_BIT:
            break
        size = length & SIZE_MASK
        if not length & DISCARD_BIT:
            out.append(bytes(ring.data[off + 8:off + 8 + size]))
        cons += 8 + (size + 7) // 8 * 8
    return out, cons


def test_two_sizes_alternating_come_out_in_ring_order_in_one_group_each():
    ring = FakeRing(1 << 14)
    sent = [blob(i, 56 if i % 2 else 112) for i in range(100)]
    ring.produce_raw(sent)
    raw = ring.reader.drain()
    assert sorted(raw.sizes) == [56, 112] and len(raw) == 100
    first = raw.sizes.index(112)
    assert raw.order.tolist() == [first, 1 - first] * 50
    assert raw.as_bytes() == sent
    assert ring.reader.pending_bytes() == 0


def test_a_record_that_wraps_is_read_whole_from_the_second_copy():
    ring = FakeRing(4096)
    filler = [blob(i, 56) for i in range(60)]  # 60 x 64 bytes: 3840
    ring.produce_raw(filler)
    assert ring.reader.drain().as_bytes() == filler
    sent = [blob(100, 304), blob(101, 56), blob(102, 120)]  # the first crosses the end
    at = ring.produce_raw(sent)
    assert at[0] % 4096 + 8 + 304 > 4096
    assert ring.reader.drain().as_bytes() == sent
    assert ring.reader.pending_bytes() == 0


def test_busy_in_the_middle_stops_there_and_discarded_records_are_consumed():
    ring = FakeRing(1 << 14)
    sent = [blob(i, [56, 64, 120][i % 3]) for i in range(12)]
    at = ring.produce_raw(sent)
    ring.set_len(int(at[2]), 120 | DISCARD_BIT)
    ring.set_len(int(at[7]), 64 | BUSY_BIT)
    assert ring.reader.drain().as_bytes() == [sent[i] for i in (0, 1, 3, 4, 5, 6)]
    assert ring.reader.pending_bytes() == ring.prod - int(at[7])  # from the BUSY one on
    assert ring.reader.drain().as_bytes() == []  # still being written
    ring.set_len(int(at[7]), 64)  # committed
    assert ring.reader.drain().as_bytes() == sent[7:]
    assert ring.reader.pending_bytes() == 0


def test_a_busy_first_record_leaves_everything_in_place():
    ring = FakeRing(4096)
    at = ring.produce_raw([blob(0, 56), blob(1, 64)])
    ring.set_len(int(at[0]), 56 | BUSY_BIT)
    assert len(ring.reader.drain()) == 0 and ring.reader.pending_bytes() == ring.prod


def test_max_records_takes_that_many_kept_records_and_no_more():
    ring = FakeRing(1 << 14)
    sent = [blob(i, 56 if i % 3 else 80) for i in range(30)]
    at = ring.produce_raw(sent)
    ring.set_len(int(at[4]), 56 | DISCARD_BIT)
    first = ring.reader.drain(max_records=5)
    assert first.as_bytes() == [sent[i] for i in (0, 1, 2, 3, 5)]
    assert ring.reader.pending_bytes() == ring.prod - int(at[6])
    assert ring.reader.drain().as_bytes() == sent[6:]


def test_words_that_look_like_a_header_do_not_lead_astray():
    """Payload words equal to a size already seen make stray candidates: the
    chain from the first record still passes them by."""
    ring = FakeRing(1 << 14)
    ring.produce_raw([blob(0, 56), blob(1, 64)])
    ring.reader.drain()  # 56 and 64 are known sizes now
    sent = [(np.uint32(64).tobytes() + np.uint32(56).tobytes()) * (size // 8) for size in (56, 64, 56, 64)]
    ring.produce_raw(sent)
    walks = ring.reader.full_walks
    assert ring.reader.drain().as_bytes() == sent
    assert ring.reader.full_walks == walks  # resolved among the known sizes


def test_a_size_never_seen_is_found_and_learnt():
    ring = FakeRing(1 << 14)
    ring.produce_raw([blob(0, 56), blob(1, 64)])
    ring.reader.drain()
    assert ring.reader.full_walks == 1
    sent = [blob(2, 56), blob(3, 200), blob(4, 64)]
    ring.produce_raw(sent)
    assert ring.reader.drain().as_bytes() == sent
    assert ring.reader.full_walks == 2
    ring.produce_raw(sent)
    assert ring.reader.drain().as_bytes() == sent
    assert ring.reader.full_walks == 2  # 200 is known now


def test_the_one_size_flood_takes_the_two_pass_path():
    ring = FakeRing(1 << 16)
    sent = np.frombuffer(b"".join(blob(i, 56) for i in range(500)), dtype="V56")
    ring.produce(sent)
    raw = ring.reader.drain()
    assert raw.sizes == [56] and raw.order is None
    assert ring.reader.mixed_drains == 0
    assert raw.as_bytes() == [bytes(r) for r in sent]


def test_records_whose_length_is_not_a_multiple_of_8_are_padded_in_the_ring():
    ring = FakeRing(4096)
    sent = [b"a" * 13, b"b" * 64, b"c" * 1]
    ring.produce_raw(sent)
    assert ring.reader.drain().as_bytes() == sent


def test_an_empty_record_is_consumed_and_counted():
    ring = FakeRing(4096)
    ring.produce_raw([blob(0, 56), b"", blob(1, 56)])
    assert ring.reader.drain().as_bytes() == [blob(0, 56), blob(1, 56)]
    assert ring.reader.skipped_records == 1 and ring.reader.pending_bytes() == 0


# ------------------------------------------------------------ properties

SIZES = st.sampled_from([8, 16, 56, 64, 72, 112, 120, 304, 13, 100])


@st.composite
def ring_plays(draw):
    """A ring of 4 pages, a start position anywhere (so records wrap), and
    rounds of records (size, flag), drained after each round."""
    start = draw(st.integers(0, 4096 // 8 - 1)) * 8
    rounds = draw(st.lists(st.lists(st.tuples(SIZES, st.sampled_from(["", "", "", "discard", "busy"])),
                                    max_size=40), min_size=1, max_size=6))
    limits = draw(st.lists(st.one_of(st.none(), st.integers(1, 10)), min_size=len(rounds),
                           max_size=len(rounds)))
    return start, rounds, limits


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ring_plays())
def test_the_reader_takes_what_a_walk_of_the_headers_takes(play):
    start, rounds, limits = play
    ring = FakeRing(1 << 14)
    ring.write(b"\0" * start)  # an empty start: the producer and consumer move on
    ring.set_len(0, start - 8) if start else None
    ring.reader.drain()
    assert ring.reader.pending_bytes() == 0
    serial = 0
    for records, limit in zip(rounds, limits):
        blobs = [blob(serial + k, size) for k, (size, _) in enumerate(records)]
        serial += len(records)
        need = sum(8 + (len(b) + 7) // 8 * 8 for b in blobs)
        if need > ring.free():
            break
        at = ring.produce_raw(blobs)
        for pos, (size, flag) in zip(at.tolist(), records):
            if flag == "discard":
                ring.set_len(pos, size | DISCARD_BIT)
            elif flag == "busy":
                ring.set_len(pos, size | BUSY_BIT)
        want, cons = reference(ring, limit)
        got = ring.reader.drain(max_records=limit)
        assert got.as_bytes() == want
        assert int(ring.reader._cons_pos[0]) == cons
        # commit what was busy, for the next round (the kernel would)
        for pos, (size, flag) in zip(at.tolist(), records):
            if flag == "busy":
                ring.set_len(pos, size)
    want, cons = reference(ring)
    assert ring.reader.drain().as_bytes() == want
    assert int(ring.reader._cons_pos[0]) == cons


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=60), st.data())
def test_follow_chain_finds_the_members_a_loop_finds(steps_of_records, data):
    """Random chains in a space of positions whose other positions hold
    random steps (the payload): the members are those a loop visits, among
    all positions and among any superset of the members as candidates."""
    n = sum(steps_of_records)
    steps = np.asarray(data.draw(st.lists(st.integers(1, 12), min_size=n, max_size=n)), dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(steps_of_records)[:-1]]).astype(np.int64)
    steps[starts] = steps_of_records
    want, pos = [], 0
    while pos < n:
        want.append(pos)
        pos += int(steps[pos])
    got = follow_chain(np.arange(n), steps, n)
    assert got.tolist() == want
    extra = data.draw(st.sets(st.integers(0, n - 1)))
    cands = np.asarray(sorted(set(want) | extra), dtype=np.int64)
    got = follow_chain(cands, steps[cands], n)
    assert cands[got].tolist() == want
    missing = sorted(set(want[1:]) & set(data.draw(st.sets(st.sampled_from(want)))))
    if missing:  # a member that is not a candidate: the chain breaks there
        cands = np.asarray(sorted((set(want) | extra) - set(missing)), dtype=np.int64)
        assert follow_chain(cands, steps[cands], n) is None


def test_follow_chain_says_when_a_member_is_not_a_candidate():
    steps = np.asarray([2, 1, 3, 1, 1], dtype=np.int64)
    cands = np.asarray([0, 3])  # 2 is on the chain (0 -> 2 -> 5) but not a candidate
    assert follow_chain(cands, steps[cands], 5) is None
    assert follow_chain(np.arange(5), steps, 5).tolist() == [0, 2]


def test_raw_records_concatenate_in_order_across_sizes():
    a = RawRecords([np.frombuffer(b"a" * 16, "V8")])
    b = RawRecords([np.frombuffer(b"b" * 16, "V16"), np.frombuffer(b"c" * 8, "V8")],
                   np.asarray([1, 0], np.uint8))
    both = RawRecords.concat([a, b, RawRecords()])
    assert both.as_bytes() == [b"a" * 8, b"a" * 8, b"c" * 8, b"b" * 16]
    assert both.sizes == [8, 16]


@pytest.mark.parametrize("sizes", [[56], [56, 64], [56, 64, 120, 304]])
def test_gather_groups_by_size(sizes):
    rng = np.random.default_rng(5)
    pick = rng.integers(0, len(sizes), 200)
    blobs = [blob(i, sizes[k]) for i, k in enumerate(pick)]
    buf = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    lens = np.asarray([len(b) for b in blobs])
    offsets = np.concatenate([[0], np.cumsum(lens)[:-1]])
    raw = RawRecords.gather(buf, offsets, lens)
    assert raw.as_bytes() == blobs and sorted(raw.sizes) == sorted(set(np.asarray(sizes)[pick].tolist()))


def test_close_after_a_drain_raised_leaves_no_error_behind(monkeypatch):
    """A view of the ring kept alive by an exception's traceback must not
    turn close() into a second error (BufferError), which the first VM
    break-check run showed cascading into the next tests' fixtures."""
    import mmap

    ring = FakeRing(4096)
    ring.produce_raw([blob(0, 56), blob(1, 64)])
    reader = ring.reader
    reader._consumer = mmap.mmap(-1, 4096)  # close() only acts on a mapped reader
    reader._producer = mmap.mmap(-1, 3 * 4096)
    reader._data = memoryview(reader._producer)[4096:]
    reader._words = np.frombuffer(reader._data, dtype=np.uint32)
    held = np.frombuffer(reader._data, dtype=np.uint8)  # as a failed drain's frame would
    reader.close()
    reader.close()
    assert held.size == 2 * 4096
