"""The perf buffer reader with records of several sizes, without a kernel.

A CPU's perf ring laid out as the kernel's (include/uapi/linux/perf_event.h;
data pages mapped once, so a record that wraps comes in two parts): samples
`u32 type, u16 misc, u16 size, u32 rawsize`, then the record and the
kernel's padding to 8 bytes; PERF_RECORD_LOST `u64 id, u64 lost`. The
reader's numpy path (the perf headers' chain followed as the ring buffer
reader does) against a walk of the records one by one. The real kernel's
rings: tests/kernel/test_perfbuf.py."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ktui.kernel.buffers.perfbuf import PERF_RECORD_LOST, PERF_RECORD_SAMPLE, PerfBufReader, _CpuRing, sample_size

DATA = 1 << 13


class FakeCpuRing:
    span = _CpuRing.span  # the real one: copies a range that wraps

    def __init__(self, cpu: int = 0, data_size: int = DATA) -> None:
        self.cpu = cpu
        self.data_size = data_size
        self.buf = bytearray(data_size)
        self.data = memoryview(self.buf)
        self.head = self.tail = 0

    def positions(self) -> tuple[int, int]:
        return self.tail, self.head

    def set_tail(self, tail: int) -> None:
        self.tail = tail

    def put(self, raw: bytes) -> None:
        assert self.head + len(raw) - self.tail <= self.data_size
        for k, byte in enumerate(raw):  # byte by byte: the wrap is the point
            self.buf[(self.head + k) % self.data_size] = byte
        self.head += len(raw)

    def sample(self, record: bytes) -> None:
        rawsize = (len(record) + 4 + 7) // 8 * 8 - 4
        self.put(struct.pack("<IHHI", PERF_RECORD_SAMPLE, 0, 8 + 4 + rawsize, rawsize)
                 + record + b"\0" * (rawsize - len(record)))

    def lost(self, count: int) -> None:
        self.put(struct.pack("<IHHQQ", PERF_RECORD_LOST, 0, 24, 1, count))

    def other(self) -> None:
        self.put(struct.pack("<IHHQ", 99, 0, 16, 0))


def blob(i: int, size: int) -> bytes:
    word = (0xAB000000 | i).to_bytes(4, "little") * 2
    return (word * (size // 8 + 1))[:size]


def reader_of(*rings) -> PerfBufReader:
    return PerfBufReader.over(list(rings), DATA, 56)


def test_samples_of_several_sizes_and_a_lost_record_across_the_wrap():
    ring = FakeCpuRing()
    reader = reader_of(ring)
    filler = [blob(i, 56) for i in range(100)]  # 100 x 72 bytes: 7200 of 8192
    for b in filler:
        ring.sample(b)
    assert reader.drain().as_bytes() == filler and reader.walked_batches == 0
    sent = [blob(200 + i, [56, 112, 64][i % 3]) for i in range(30)]
    for k, b in enumerate(sent):
        ring.sample(b)
        if k == 4:
            ring.lost(17)
        if k == 9:
            ring.other()
    assert ring.head % DATA < ring.tail % DATA  # the range wraps
    raw = reader.drain()
    assert raw.as_bytes() == sent
    assert reader.lost_notified == 17 and reader.skipped_records == 1 and reader.walked_batches == 1
    assert ring.tail == ring.head


def test_cpus_come_one_after_the_other_and_max_records_counts_samples():
    a, b = FakeCpuRing(0), FakeCpuRing(1)
    reader = reader_of(a, b)
    sa = [blob(i, 56 if i % 2 else 64) for i in range(6)]
    sb = [blob(10 + i, 112) for i in range(3)]
    for x in sa:
        a.sample(x)
    a.lost(2)
    for x in sb:
        b.sample(x)
    first = reader.drain(max_records=4)
    assert first.as_bytes() == sa[:4]
    assert reader.lost_notified == 0  # after the 4th sample: not taken yet
    rest = reader.drain()
    assert rest.as_bytes() == sa[4:] + sb and reader.lost_notified == 2
    assert reader.pending_bytes() == 0


def test_a_uniform_flood_is_one_numpy_copy():
    ring = FakeCpuRing()
    reader = reader_of(ring)
    sent = [blob(i, 48) for i in range(50)]  # 48-byte records: samples of 64 (sample_size)
    for b in sent:
        ring.sample(b)
    assert ring.head == 50 * sample_size(48)
    assert reader.drain().as_bytes() == sent and reader.walked_batches == 0


def walk(ring: FakeCpuRing, limit: int | None) -> tuple[list[bytes], int, int]:
    """The records one by one: (records, lost counted, new tail)."""
    data = bytes(ring.buf) * 2  # a wrapping record is contiguous here
    pos, out, lost = ring.tail, [], 0
    while pos < ring.head and (limit is None or len(out) < limit):
        at = pos % ring.data_size
        rtype, _, size = struct.unpack_from("<IHH", data, at)
        if rtype == PERF_RECORD_SAMPLE:
            rawsize = struct.unpack_from("<I", data, at + 8)[0]
            out.append(data[at + 12:at + 12 + rawsize // 8 * 8])
        elif rtype == PERF_RECORD_LOST:
            lost += struct.unpack_from("<Q", data, at + 16)[0]
        pos += size
    return out, lost, pos


@settings(max_examples=200, deadline=None)
@given(st.integers(0, DATA // 8 - 1),
       st.lists(st.lists(st.one_of(st.sampled_from([48, 56, 64, 112, 304]), st.just("lost")), max_size=30),
                min_size=1, max_size=5),
       st.lists(st.one_of(st.none(), st.integers(1, 8)), min_size=5, max_size=5))
def test_the_reader_takes_what_a_walk_takes(start, rounds, limits):
    ring = FakeCpuRing()
    ring.head = ring.tail = start * 8  # anywhere in the ring: records wrap
    reader = reader_of(ring)
    serial = 0
    for items, limit in zip(rounds, limits):
        room = DATA - 1 - (ring.head - ring.tail)
        need = sum(24 if x == "lost" else sample_size(x) for x in items)
        if need > room:
            break
        for x in items:
            if x == "lost":
                ring.lost(serial + 1)
            else:
                ring.sample(blob(serial, x))
            serial += 1
        want, lost, tail = walk(ring, limit)
        before = reader.lost_notified
        assert reader.drain(max_records=limit).as_bytes() == want
        assert reader.lost_notified - before == lost and ring.tail == tail


def test_capacity_follows_the_sizes_drained():
    ring = FakeCpuRing()
    reader = reader_of(ring)
    assert reader.capacity() == DATA // sample_size(56)
    for i in range(10):
        ring.sample(blob(i, 112))
    reader.drain()
    assert reader.capacity() == DATA // sample_size(112)
    assert np.dtype("V8").itemsize == 8
