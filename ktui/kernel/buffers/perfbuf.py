"""Batch reader of a bcc BPF_PERF_OUTPUT map, mapping the perf rings itself.

bcc's perf-buffer path calls back into Python once per event, which caps a
reader at ~150k events/s in the VM (shared/notes/event-throughput.md). This
reader is for kernels without the BPF ring buffer (< 5.8): it opens one perf
event per online CPU itself, stores the fds into the BPF_PERF_OUTPUT map,
maps each ring and, on a timer, copies out every record in one numpy
operation per CPU (and per record size: each probe's records are as long as
its own fields). Same interface as ktui.kernel.buffers.ringbuf.RingBufReader.

Per-CPU ring layout (include/uapi/linux/perf_event.h): page 0 is struct
perf_event_mmap_page (data_head at byte 1024, data_tail at 1032, data_offset
at 1040, data_size at 1048), then `page_cnt` data pages mapped ONCE: a record
that wraps must be copied in two parts. Every record starts with
`u32 type, u16 misc, u16 size`. What bpf_perf_event_output() writes is a
PERF_RECORD_SAMPLE with only PERF_SAMPLE_RAW: `u32 rawsize` then the raw
bytes, which the kernel pads with zeros so that 4 + rawsize is a multiple of
8 (perf_prepare_sample). So a record of `record_size` bytes arrives as a
sample of 8 + round_up(4 + record_size, 8) bytes: 64 for ktui's 48-byte
records, verified in the VM on 6.1 and 6.12. ktui's records are multiples
of 8 bytes, so a sample's record is its rawsize rounded down to 8. A ring of N bytes holds at most
N // 64 - 1 of them: the kernel wants CIRC_SPACE >= size, and an empty
ring's CIRC_SPACE is N - 1. When a sample does not fit, the kernel drops it
(bpf_perf_event_output returns an error, so the BPF program can count it)
and keeps the count to itself until a later sample fits: only then does it
write one PERF_RECORD_LOST (`u64 id, u64 lost`) just before that sample.

Memory ordering: plain loads and stores, relying on x86-64 (TSO): loads are
not reordered with other loads, and our data_tail store is not reordered
before the loads that copied the data. arm64 would need acquire/release.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import platform
import struct

import numpy as np

from ktui.kernel.attach.kprobe_pmu import PerfEventAttr, perf_event_open
from ktui.kernel.buffers.ringbuf import follow_chain, shared_u64
from ktui.record.raw import RawRecords

PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_BPF_OUTPUT = 10
PERF_SAMPLE_RAW = 1 << 10
PERF_RECORD_LOST = 2
PERF_RECORD_SAMPLE = 9

DATA_HEAD = 1024
DATA_TAIL = 1032
DATA_OFFSET = 1040
DATA_SIZE = 1048
HEADER = struct.Struct("<IHH")  # type, misc, size
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")


def sample_size(record_size: int) -> int:
    """Bytes one BPF output sample of `record_size` bytes takes in the ring."""
    return HEADER.size + ((U32.size + record_size + 7) & ~7)


def perf_event_open_bpf_output(cpu: int) -> int:
    """One PERF_COUNT_SW_BPF_OUTPUT event on `cpu`, enabled from the start.

    wakeup_events=0 (and no watermark): the kernel wakes pollers only when a
    ring is half full. Nobody polls here: a timer drains, so a wakeup per
    event would only cost the traced process (5.7x slowdown in the notes).
    """
    if platform.machine() != "x86_64":
        # Syscall number and the memory-ordering argument above are x86-64's.
        raise OSError(errno.ENOSYS, "PerfBufReader supports x86-64 only")
    attr = PerfEventAttr()
    attr.type = PERF_TYPE_SOFTWARE
    attr.size = ctypes.sizeof(PerfEventAttr)
    attr.config = PERF_COUNT_SW_BPF_OUTPUT
    attr.sample_period = 1
    attr.sample_type = PERF_SAMPLE_RAW
    attr.wakeup_events = 0
    try:
        return perf_event_open(attr, -1, cpu)  # pid -1: any task on that CPU
    except OSError as exc:
        raise OSError(exc.errno, f"perf_event_open(BPF_OUTPUT, cpu={cpu}): {exc.strerror}") from exc


class _CpuRing:
    """One CPU's perf event: fd, mapping, and a view of its data pages."""

    def __init__(self, cpu: int, page_cnt: int) -> None:
        self.cpu = cpu
        self.fd = perf_event_open_bpf_output(cpu)
        try:
            page = mmap.PAGESIZE
            self.mm = mmap.mmap(
                self.fd,
                (1 + page_cnt) * page,
                mmap.MAP_SHARED,
                mmap.PROT_READ | mmap.PROT_WRITE,  # writable: we own data_tail
            )
        except OSError:
            os.close(self.fd)
            raise
        offset = U64.unpack_from(self.mm, DATA_OFFSET)[0] or page
        self.data_size = U64.unpack_from(self.mm, DATA_SIZE)[0] or page_cnt * page
        if self.data_size != page_cnt * page:
            raise OSError(errno.EINVAL, f"perf ring of {self.data_size} bytes, asked for {page_cnt} pages")
        self.data = memoryview(self.mm)[offset : offset + self.data_size]
        # Single 8-byte loads/stores: a torn data_tail could make the kernel
        # see the ring as full.
        self._head = shared_u64(self.mm, DATA_HEAD)
        self._tail = shared_u64(self.mm, DATA_TAIL)

    def positions(self) -> tuple[int, int]:
        return int(self._tail[0]), int(self._head[0])

    def set_tail(self, tail: int) -> None:
        self._tail[0] = tail

    def span(self, tail: int, nbytes: int):
        """Bytes [tail, tail + nbytes) of the ring as one contiguous buffer:
        a view when they do not wrap, otherwise a copy of both parts."""
        start = tail & (self.data_size - 1)
        first = self.data_size - start
        if nbytes <= first:
            return self.data[start : start + nbytes]
        out = np.empty(nbytes, dtype=np.uint8)
        out[:first] = np.frombuffer(self.data, dtype=np.uint8, count=first, offset=start)
        out[first:] = np.frombuffer(self.data, dtype=np.uint8, count=nbytes - first)
        return out

    def close(self) -> None:
        del self._head, self._tail  # views must go before the mapping
        try:
            self.data.release()
            self.mm.close()
        except BufferError:
            # A view of the ring still lives (the traceback of an exception
            # raised in a drain holds its frames): the mapping goes with it.
            pass
        os.close(self.fd)


class PerfBufReader:
    """Drain a BPF_PERF_OUTPUT map on a timer, one numpy copy per CPU ring
    (per record size when sizes are mixed)."""

    def __init__(self, bpf, table_name: str, record_size: int, page_cnt: int = 256) -> None:
        """`record_size`: the records expected, for capacity() until a drain
        says better (records of any size are read)."""
        # bcc is only present where kernel code runs; importing this module
        # (e.g. from host-side unit tests) must not need it.
        from bcc.libbcc import lib
        from bcc.utils import get_online_cpus

        if page_cnt <= 0 or page_cnt & (page_cnt - 1):
            raise ValueError("page_cnt must be a power of two")
        self._setup(page_cnt * mmap.PAGESIZE, record_size)
        self._lib = lib
        self._table = bpf[table_name]
        try:
            for cpu in get_online_cpus():
                ring = _CpuRing(cpu, page_cnt)
                self._rings.append(ring)
                # The map entry is what bpf_perf_event_output(BPF_F_CURRENT_CPU)
                # writes to; it holds its own reference to the perf event.
                # The event was opened enabled, so no PERF_EVENT_IOC_ENABLE.
                self._table[ctypes.c_int(cpu)] = ctypes.c_int(ring.fd)
        except BaseException:
            self.close()
            raise

    @classmethod
    def over(cls, rings: list, data_size: int, record_size: int) -> "PerfBufReader":
        """A reader of rings that are not the kernel's: objects with `cpu`,
        positions(), set_tail() and span() as _CpuRing has. For tests."""
        reader = cls.__new__(cls)
        reader._setup(data_size, record_size)
        reader._rings = list(rings)
        reader._closed = True  # nothing of the kernel's to let go
        return reader

    def _setup(self, data_size: int, record_size: int) -> None:
        if record_size <= 0:
            raise ValueError("record_size must be positive")
        self.record_size = record_size
        self.stride = sample_size(record_size)
        self.data_size = data_size
        self.lost_notified = 0  # sum of PERF_RECORD_LOST counts seen so far
        self.skipped_records = 0  # samples too short or records of unknown type
        self.walked_batches = 0  # batches that needed the slow path
        self._stride_seen = self.stride  # bytes a sample took, lately
        self._sample_dtypes: dict[tuple[int, int], np.dtype] = {}
        self._known: list[int] = []  # record sizes (perf headers') seen: tried first
        self._rings: list[_CpuRing] = []
        self._closed = False

    @property
    def cpus(self) -> list[int]:
        return [ring.cpu for ring in self._rings]

    def drain(self, max_records: int | None = None) -> RawRecords:
        """Copy out every complete record, grouped by size (record.raw).

        CPUs' batches are concatenated in CPU order, each in ring order."""
        return RawRecords.concat(list(self.drain_by_cpu(max_records).values()))

    def drain_by_cpu(self, max_records: int | None = None) -> dict[int, RawRecords]:
        """Like drain(), but keeps each CPU's batch apart: {cpu: records}."""
        out: dict[int, RawRecords] = {}
        remaining = max_records
        for ring in self._rings:
            records = self._drain_ring(ring, remaining)
            out[ring.cpu] = records
            if remaining is not None:
                remaining -= len(records)
        return out

    def capacity(self) -> int:
        """How many records one CPU's ring holds, at the sizes the last
        drain saw (a rate over all CPUs against one CPU's ring errs on the
        safe side)."""
        return self.data_size // self._stride_seen

    def pending_bytes(self) -> int:
        total = 0
        for ring in self._rings:
            tail, head = ring.positions()
            total += head - tail
        return total

    def positions(self) -> dict[int, tuple[int, int]]:
        """{cpu: (data_tail, data_head)}: for diagnostics and tests."""
        return {ring.cpu: ring.positions() for ring in self._rings}

    def _drain_ring(self, ring: _CpuRing, limit: int | None) -> RawRecords:
        tail, head = ring.positions()
        avail = head - tail
        if avail <= 0 or limit == 0:
            return RawRecords()
        records = self._drain_uniform(ring, tail, avail, limit)
        if records is None:
            # A PERF_RECORD_LOST, samples of several sizes, anything unexpected.
            records = self._drain_mixed(ring, tail, avail, limit)
        return records

    def _drain_uniform(self, ring: _CpuRing, tail: int, avail: int, limit: int | None) -> RawRecords | None:
        """The flood's case: samples all as long as the first, nothing
        else; checked and copied in one numpy pass each. None otherwise."""
        first = ring.span(tail, min(avail, HEADER.size + U32.size))
        if len(first) < HEADER.size + U32.size:
            return None
        rtype, _misc, size = HEADER.unpack_from(first, 0)
        rawsize = U32.unpack_from(first, HEADER.size)[0]
        del first
        record = rawsize & ~7  # ktui's records are 8-byte multiples: the rest is the kernel's padding
        if rtype != PERF_RECORD_SAMPLE or not record or size < HEADER.size + U32.size + rawsize \
                or avail % size:
            return None
        count = avail // size if limit is None else min(avail // size, limit)
        nbytes = count * size
        span = ring.span(tail, nbytes)
        samples = np.frombuffer(span, dtype=self._sample_dtype(size, record), count=count)
        if not (
            (samples["type"] == PERF_RECORD_SAMPLE).all()
            and (samples["size"] == size).all()
            and (samples["rawsize"] == rawsize).all()
        ):
            return None
        records = samples["record"].copy()
        del samples, span  # drop the view of the mapping before moving the tail
        ring.set_tail(tail + nbytes)
        self._stride_seen = size
        return RawRecords([records])

    def _sample_dtype(self, size: int, record: int) -> np.dtype:
        dtype = self._sample_dtypes.get((size, record))
        if dtype is None:
            pad = size - HEADER.size - U32.size - record
            dtype = self._sample_dtypes[(size, record)] = np.dtype(
                [("type", "<u4"), ("misc", "<u2"), ("size", "<u2"), ("rawsize", "<u4"),
                 ("record", f"V{record}")] + ([("pad", f"V{pad}")] if pad else []))
        return dtype

    def _drain_mixed(self, ring: _CpuRing, tail: int, avail: int, limit: int | None) -> RawRecords:
        """Every record of the range, without a Python call per record: the
        chain of perf headers is followed as the ring buffer reader does
        (ringbuf.follow_chain: positions whose size word is a size seen
        before first, every 8-byte position when that breaks); then LOST
        counts are added up and the samples copied out by size. Kept
        general so a surprise cannot wedge the reader."""
        self.walked_batches += 1
        buf = ring.span(tail, avail)
        n = avail // 8  # records are 8-byte aligned: each starts at one of these
        words = np.frombuffer(buf, dtype=np.uint16, count=4 * n)
        sizes = words[3::4].astype(np.int64)  # u16 size of a header there
        steps = np.maximum(sizes >> 3, 1)
        members = None
        if self._known:
            cands = np.flatnonzero(np.isin(sizes, self._known))
            got = follow_chain(cands, steps[cands], n)
            if got is not None:
                members = cands[got]
        if members is None:  # a size not seen before: every position may start a record
            members = follow_chain(np.arange(n), steps, n)
            assert members is not None
            known = list(dict.fromkeys(self._known + np.unique(sizes[members]).tolist()))
            self._known = known if len(known) <= 16 else known[-16:]
        msizes = sizes[members]
        bad = np.flatnonzero(msizes < HEADER.size)
        if bad.size or (len(members) and (members[-1] * 8 + msizes[-1] > avail)):
            at = int(members[bad[0]]) * 8 if bad.size else int(members[-1]) * 8
            raise RuntimeError(
                f"perf ring of cpu {ring.cpu} corrupt: record of {int(sizes[at // 8])} bytes at {tail + at}")
        types = np.frombuffer(buf, dtype=np.uint32, count=2 * n)[0::2][members]
        sample = types == PERF_RECORD_SAMPLE
        if limit is not None and np.count_nonzero(sample) >= limit:
            last = np.flatnonzero(sample)[limit - 1]
            members, msizes, types, sample = members[: last + 1], msizes[: last + 1], types[: last + 1], \
                sample[: last + 1]
        end = int(members[-1] * 8 + msizes[-1]) if len(members) else 0
        u32 = np.frombuffer(buf, dtype=np.uint32, count=2 * n)
        lost = types == PERF_RECORD_LOST
        if lost.any():  # u64 id, u64 lost after the header
            self.lost_notified += int(np.frombuffer(buf, dtype=np.uint64, count=n)[members[lost] + 2].sum())
        rawsize = u32[2 * members[sample] + 2].astype(np.int64)
        fits = (rawsize >= 8) & (HEADER.size + U32.size + rawsize <= msizes[sample])
        self.skipped_records += int(np.count_nonzero(~sample & ~lost)) + int(np.count_nonzero(~fits))
        at = members[sample][fits] * 8 + HEADER.size + U32.size
        records = RawRecords.gather(np.frombuffer(buf, dtype=np.uint8, count=end), at, rawsize[fits] & ~7,
                                    [size - HEADER.size - U32.size - 4 for size in self._known])
        del buf, words, u32  # let go of the mapping before moving the tail
        ring.set_tail(tail + end)
        if len(members):
            self._stride_seen = max(HEADER.size + U32.size + 8, end // len(members))
        return records

    def close(self) -> None:
        """Remove our map entries, unmap and close. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            for ring in self._rings:
                key = ctypes.c_int(ring.cpu)
                if self._lib.bpf_delete_elem(self._table.map_fd, ctypes.byref(key)) < 0:
                    err = ctypes.get_errno()  # libbcc is loaded with use_errno=True
                    # ENOENT: never stored. EBADF: bcc already closed the map (after
                    # BPF.cleanup()), which dropped its references with it.
                    if err not in (errno.ENOENT, errno.EBADF):
                        raise OSError(err, f"removing cpu {ring.cpu} from the perf map: {os.strerror(err)}")
        finally:
            for ring in self._rings:
                ring.close()
            self._rings = []
