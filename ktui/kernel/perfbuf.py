"""Batch reader of a bcc BPF_PERF_OUTPUT map, mapping the perf rings itself.

bcc's perf-buffer path calls back into Python once per event, which caps a
reader at ~150k events/s in the VM (shared/notes/event-throughput.md). This
reader is for kernels without the BPF ring buffer (< 5.8): it opens one perf
event per online CPU itself, stores the fds into the BPF_PERF_OUTPUT map,
maps each ring and, on a timer, copies out every record in one numpy
operation per CPU. Same interface as ktui.kernel.ringbuf.RingBufReader.

Per-CPU ring layout (include/uapi/linux/perf_event.h): page 0 is struct
perf_event_mmap_page (data_head at byte 1024, data_tail at 1032, data_offset
at 1040, data_size at 1048), then `page_cnt` data pages mapped ONCE: a record
that wraps must be copied in two parts. Every record starts with
`u32 type, u16 misc, u16 size`. What bpf_perf_event_output() writes is a
PERF_RECORD_SAMPLE with only PERF_SAMPLE_RAW: `u32 rawsize` then the raw
bytes, which the kernel pads with zeros so that 4 + rawsize is a multiple of
8 (perf_prepare_sample). So a record of `record_size` bytes arrives as a
sample of 8 + round_up(4 + record_size, 8) bytes: 64 for ktui's 48-byte
records, verified in the VM on 6.1 and 6.12. A ring of N bytes holds at most
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

from ktui.kernel.kprobe_pmu import PerfEventAttr, perf_event_open
from ktui.kernel.ringbuf import shared_u64

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
        self.data.release()
        self.mm.close()
        os.close(self.fd)


class PerfBufReader:
    """Drain a BPF_PERF_OUTPUT map on a timer, one numpy copy per CPU ring."""

    def __init__(self, bpf, table_name: str, record_size: int, page_cnt: int = 256) -> None:
        # bcc is only present where kernel code runs; importing this module
        # (e.g. from host-side unit tests) must not need it.
        from bcc.libbcc import lib
        from bcc.utils import get_online_cpus

        if page_cnt <= 0 or page_cnt & (page_cnt - 1):
            raise ValueError("page_cnt must be a power of two")
        if record_size <= 0:
            raise ValueError("record_size must be positive")
        self.record_size = record_size
        self.stride = sample_size(record_size)
        self.rawsize = self.stride - HEADER.size - U32.size
        self.data_size = page_cnt * mmap.PAGESIZE
        self.lost_notified = 0  # sum of PERF_RECORD_LOST counts seen so far
        self.skipped_records = 0  # samples too short or records of unknown type
        self.walked_batches = 0  # batches that needed the slow path
        self._lib = lib
        self._table = bpf[table_name]
        self._rings: list[_CpuRing] = []
        self._closed = False
        pad = self.stride - HEADER.size - U32.size - record_size
        self._sample_dtype = np.dtype(
            [("type", "<u4"), ("misc", "<u2"), ("size", "<u2"), ("rawsize", "<u4"),
             ("record", f"V{record_size}")] + ([("pad", f"V{pad}")] if pad else [])
        )
        assert self._sample_dtype.itemsize == self.stride
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

    @property
    def cpus(self) -> list[int]:
        return [ring.cpu for ring in self._rings]

    def drain(self, max_records: int | None = None) -> np.ndarray:
        """Copy out every complete record; returns a (n,) array of V<record_size>.

        CPUs' batches are concatenated in CPU order, each in ring order."""
        batches = list(self.drain_by_cpu(max_records).values())
        if not batches:
            return np.empty(0, dtype=f"V{self.record_size}")
        return np.concatenate(batches)

    def drain_by_cpu(self, max_records: int | None = None) -> dict[int, np.ndarray]:
        """Like drain(), but keeps each CPU's batch apart: {cpu: records}."""
        out: dict[int, np.ndarray] = {}
        remaining = max_records
        for ring in self._rings:
            records = self._drain_ring(ring, remaining)
            out[ring.cpu] = records
            if remaining is not None:
                remaining -= len(records)
        return out

    def capacity(self) -> int:
        """How many records one CPU's ring holds (a rate over all CPUs
        against one CPU's ring errs on the safe side)."""
        return self.data_size // self.stride

    def pending_bytes(self) -> int:
        total = 0
        for ring in self._rings:
            tail, head = ring.positions()
            total += head - tail
        return total

    def positions(self) -> dict[int, tuple[int, int]]:
        """{cpu: (data_tail, data_head)}: for diagnostics and tests."""
        return {ring.cpu: ring.positions() for ring in self._rings}

    def _drain_ring(self, ring: _CpuRing, limit: int | None) -> np.ndarray:
        tail, head = ring.positions()
        avail = head - tail
        if avail <= 0 or limit == 0:
            return np.empty(0, dtype=f"V{self.record_size}")
        if avail % self.stride == 0:
            count = avail // self.stride
            if limit is not None:
                count = min(count, limit)
            nbytes = count * self.stride
            span = ring.span(tail, nbytes)
            samples = np.frombuffer(span, dtype=self._sample_dtype, count=count)
            if (
                np.all(samples["type"] == PERF_RECORD_SAMPLE)
                and np.all(samples["size"] == self.stride)
                and np.all(samples["rawsize"] == self.rawsize)
            ):
                records = samples["record"].copy()
                del samples, span  # drop the view of the mapping before moving the tail
                ring.set_tail(tail + nbytes)
                return records
            del samples, span
        # A PERF_RECORD_LOST (or anything unexpected) is in the range.
        return self._drain_mixed(ring, tail, avail, limit)

    def _drain_mixed(self, ring: _CpuRing, tail: int, avail: int, limit: int | None) -> np.ndarray:
        """Slow path, for a batch that holds more than our samples: after an
        overflow, the PERF_RECORD_LOST the kernel writes before the next
        sample. Runs of samples still go through the numpy check; only the
        records that break a run are read one by one in Python, so an
        overflow (when the reader is already behind) costs no Python call
        per event. Kept general so a surprise cannot wedge the reader."""
        self.walked_batches += 1
        buf = ring.span(tail, avail)
        if isinstance(buf, memoryview):
            buf = np.frombuffer(buf, dtype=np.uint8).copy()  # let go of the mapping
        out = []
        taken = 0
        pos = 0
        while pos < avail and (limit is None or taken < limit):
            count = (avail - pos) // self.stride
            if limit is not None:
                count = min(count, limit - taken)
            if count:
                samples = np.frombuffer(buf, dtype=self._sample_dtype, count=count, offset=pos)
                ok = (
                    (samples["type"] == PERF_RECORD_SAMPLE)
                    & (samples["size"] == self.stride)
                    & (samples["rawsize"] == self.rawsize)
                )
                run = count if ok.all() else int(np.argmin(ok))  # first record that is not ours
                if run:
                    out.append(samples["record"][:run].copy())
                    taken += run
                    pos += run * self.stride
                if run == count:
                    continue
            # One record that is not a sample of our size, at `pos`.
            rtype, _misc, size = HEADER.unpack_from(buf, pos)
            if size < HEADER.size or pos + size > avail:
                raise RuntimeError(
                    f"perf ring of cpu {ring.cpu} corrupt: record of {size} bytes at {tail + pos}"
                )
            if rtype == PERF_RECORD_LOST:
                self.lost_notified += U64.unpack_from(buf, pos + 16)[0]
            elif rtype == PERF_RECORD_SAMPLE and U32.unpack_from(buf, pos + 8)[0] >= self.record_size:
                out.append(np.frombuffer(buf, dtype=f"V{self.record_size}", count=1, offset=pos + 12).copy())
                taken += 1
            else:
                self.skipped_records += 1
            pos += size
        ring.set_tail(tail + pos)
        if not out:
            return np.empty(0, dtype=f"V{self.record_size}")
        return np.concatenate(out)

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
