"""Batch reader of a BPF ring buffer mapped into our own address space.

bcc's ring-buffer path calls back into Python once per record, which caps a
reader far below a kernel event flood (shared/notes/event-throughput.md).
Here the reader maps the ring itself and, on each drain, takes one snapshot
of the producer position, walks the 8-byte record headers (honouring the BUSY
and DISCARD bits), copies every committed record out in one go and advances
the consumer position. No Python call per event.

Memory layout (kernel/bpf/ringbuf.c): page 0 holds the consumer position
(mapped read-write), page 1 the producer position, then the data pages, which
the kernel maps twice in a row so a record that wraps is still contiguous.
Plain loads and stores: correct on x86-64's memory ordering only.
"""

from __future__ import annotations

import mmap
import struct

import numpy as np


def shared_u64(buf, offset: int = 0) -> np.ndarray:
    """One aligned 8-byte word of a mapping shared with the kernel.

    Indexing it is a single 8-byte load or store. struct.pack_into and
    unpack_from go byte by byte, so the kernel could see a torn position
    (and it did: the ring buffer refused single events as "full" while
    nearly empty, because a half-written consumer position looked like
    one ahead of the producer)."""
    if offset % 8:
        raise ValueError("shared positions are 8-byte aligned")
    return np.frombuffer(buf, dtype=np.uint64, count=1, offset=offset)


BUSY_BIT = 1 << 31
DISCARD_BIT = 1 << 30
RECORD_HEADER = 8


class RingBufReader:
    def __init__(self, map_fd: int, data_size: int, record_size: int) -> None:
        if data_size & (data_size - 1):
            raise ValueError("ring buffer size must be a power of two")
        if record_size % 8:
            raise ValueError("records must be 8-byte aligned")
        self.data_size = data_size
        self.record_size = record_size
        self.stride = RECORD_HEADER + record_size
        page = mmap.PAGESIZE
        self._page = page
        self._consumer = mmap.mmap(
            map_fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0
        )
        self._producer = mmap.mmap(
            map_fd, page + 2 * data_size, mmap.MAP_SHARED, mmap.PROT_READ, offset=page
        )
        self._data = memoryview(self._producer)[page:]
        self._cons_pos = shared_u64(self._consumer)
        self._prod_pos = shared_u64(self._producer)
        self._slot_dtype = np.dtype(
            [("len", "<u4"), ("pgoff", "<u4"), ("record", f"V{record_size}")]
        )

    def drain(self, max_records: int | None = None) -> np.ndarray:
        """Copy out every committed record; returns a (n,) array of V<record_size>,
        a fresh copy the caller owns (it may view and modify it in place)."""
        cons = int(self._cons_pos[0])
        prod = int(self._prod_pos[0])
        avail = prod - cons
        if avail <= 0:
            return np.empty(0, dtype=f"V{self.record_size}")
        start = cons & (self.data_size - 1)
        count = avail // self.stride
        if max_records is not None:
            count = min(count, max_records)
        if avail % self.stride == 0 or max_records is not None:
            records = self._drain_whole(cons, start, count)
            if records is not None:
                return records
            slots = np.frombuffer(self._data, dtype=self._slot_dtype, count=count, offset=start)
            lens = slots["len"]
            # A record still being written (BUSY) ends what we may read now.
            busy = np.flatnonzero(lens & BUSY_BIT)
            if busy.size:
                count = int(busy[0])
                slots = slots[:count]
                lens = lens[:count]
            keep = (lens & DISCARD_BIT) == 0
            if count and not np.all((lens[keep] & ~DISCARD_BIT) == self.record_size):
                return self._drain_walk(cons, prod)
            records = slots["record"][keep].copy()
            new_cons = cons + count * self.stride
        else:  # records of another size are in the ring: walk the headers
            return self._drain_walk(cons, prod)
        self._cons_pos[0] = new_cons
        return records

    def _drain_whole(self, cons: int, start: int, count: int) -> np.ndarray | None:
        """The flood's case, in two numpy passes: every one of `count` slots
        committed, none discarded, all of our size (one comparison of the
        length words says all three), then one strided copy of the records.
        None when any slot is otherwise: the caller takes the careful path."""
        if not count:
            return None
        words = self.stride // 4
        lens = np.frombuffer(self._data, dtype=np.uint32, count=count * words, offset=start)[::words]
        if not (lens == self.record_size).all():
            return None
        slots = np.frombuffer(self._data, dtype=self._slot_dtype, count=count, offset=start)
        records = slots["record"].copy()
        self._cons_pos[0] = cons + count * self.stride
        return records

    def _drain_walk(self, cons: int, prod: int) -> np.ndarray:
        """Slow path, one header at a time (never taken with the compiled
        programs, whose records all have one size; kept so a surprise cannot
        wedge us). Records of another size are dropped here."""
        return dict(self._walk(cons, prod)).get(self.record_size, np.empty(0, f"V{self.record_size}"))

    def _walk(self, cons: int, prod: int) -> list[tuple[int, np.ndarray]]:
        """Every committed record from `cons`, grouped in runs of one size."""
        groups: list[tuple[int, list[bytes]]] = []
        pos = cons
        mask = self.data_size - 1
        while pos < prod:
            off = pos & mask
            length, _ = struct.unpack_from("<II", self._data, off)
            if length & BUSY_BIT:
                break
            size = length & ~(BUSY_BIT | DISCARD_BIT)
            if not length & DISCARD_BIT and size and size % 8 == 0:
                if not groups or groups[-1][0] != size:
                    groups.append((size, []))
                groups[-1][1].append(bytes(self._data[off + RECORD_HEADER : off + RECORD_HEADER + size]))
            pos += (RECORD_HEADER + size + 7) & ~7
        self._cons_pos[0] = pos
        return [(size, np.frombuffer(b"".join(parts), dtype=f"V{size}").copy()) for size, parts in groups]

    def drain_groups(self) -> list[tuple[int, np.ndarray]]:
        """Like drain(), for a ring whose record size may have changed (the
        generic engine's grows): (record size, records) runs, oldest first."""
        cons = int(self._cons_pos[0])
        prod = int(self._prod_pos[0])
        if prod - cons <= 0:
            return []
        start = cons & (self.data_size - 1)
        avail = prod - cons
        if avail % self.stride == 0:
            records = self._drain_whole(cons, start, avail // self.stride)
            if records is None:  # BUSY or DISCARD among them: drain() sorts it out
                lens = np.frombuffer(self._data, dtype=self._slot_dtype, count=avail // self.stride,
                                     offset=start)["len"]
                if np.all((lens & ~(BUSY_BIT | DISCARD_BIT)) == self.record_size):
                    records = self.drain()
            if records is not None:
                return [(self.record_size, records)] if len(records) else []
        return [(size, records) for size, records in self._walk(cons, prod) if len(records)]

    def set_record_size(self, record_size: int) -> None:
        """Records from now on have this size (the generic engine's grow)."""
        if record_size % 8:
            raise ValueError("records must be 8-byte aligned")
        self.record_size = record_size
        self.stride = RECORD_HEADER + record_size
        self._slot_dtype = np.dtype([("len", "<u4"), ("pgoff", "<u4"), ("record", f"V{record_size}")])

    def pending_bytes(self) -> int:
        return int(self._prod_pos[0]) - int(self._cons_pos[0])

    def capacity(self) -> int:
        """How many records of the current size the ring holds."""
        return self.data_size // self.stride

    def close(self) -> None:
        if self._consumer.closed:
            return
        del self._cons_pos, self._prod_pos  # views must go before the mappings
        self._data.release()
        self._consumer.close()
        self._producer.close()
