"""Batch reader of a BPF ring buffer mapped into our own address space.

bcc's ring-buffer path calls back into Python once per record, which caps a
reader far below a kernel event flood (shared/notes/event-throughput.md).
Here the reader maps the ring itself and, on each drain, takes one snapshot
of the producer position, finds the committed records (honouring the BUSY
and DISCARD bits), copies them out grouped by size (record.raw.RawRecords)
and advances the consumer position. No Python call per event.

Records come in several sizes (each probe's are exactly as long as its own
fields), interleaved in any order. A flood of one size is checked and copied
in two numpy passes. Otherwise the chain of 8-byte record headers is
followed without a Python loop: the length word at every 8-byte position of
the available bytes says where a record there would end, and the chain from
the first record is found in numpy (follow_chain: a word inside a record
that looks like a header is pruned; pointer doubling if that does not
settle). Only positions whose length word is a size seen before are tried
first; a size never seen breaks that chain, and then every position is
tried (and the size learnt).

Nothing here waits for the kernel: the collector drains on a timer and never
polls the ring's fd, so the programs submit with BPF_RB_NO_WAKEUP.

Memory layout (kernel/bpf/ringbuf.c): page 0 holds the consumer position
(mapped read-write), page 1 the producer position, then the data pages, which
the kernel maps twice in a row so a record that wraps is still contiguous.
Each record starts with an 8-byte header: u32 length (bit 31 BUSY: reserved,
not committed yet; bit 30 DISCARD) and u32 page offset; the record takes
round_up(8 + length, 8) bytes. Plain loads and stores: correct on x86-64's
memory ordering only.
"""

from __future__ import annotations

import mmap

import numpy as np

from ktui.record.raw import RawRecords


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
SIZE_MASK = 0xFFFFFFFF & ~(BUSY_BIT | DISCARD_BIT)
RECORD_HEADER = 8
KNOWN_SIZES_MAX = 16  # sizes tried first; more than that: the last drain's
PRUNE_ROUNDS = 4  # follow_chain's cheap rounds before pointer doubling


def follow_chain(cands: np.ndarray, steps: np.ndarray, end: int) -> np.ndarray | None:
    """The records of a buffer, found without a loop per record.

    `cands`: sorted positions (any unit) where a record may start, the first
    record's (0) among them; `steps`: how far the record at each would reach
    (>= 1). The chain starts at 0 and goes from each record to the position
    where it ends, until `end` (or past it: the caller checks the last
    member). Returns the indices into `cands` of its members, in order; None
    when it reaches a position that is not a candidate.

    Each candidate points at the candidate where its record would end. The
    chain's members are those reachable from 0: first, candidates nobody
    points at are dropped, a few rounds (a stray candidate, a word inside a
    record that looks like a header, is rarely pointed at; what is left,
    every one pointed at by another left, is the chain); if that does not
    settle, pointer doubling: jump[k] is where 2^k steps lead from each
    candidate, log2(records) gathers build them, and the members come out by
    halving from the top (position p and jump[k][p], k down to 0), in order."""
    m = len(cands)
    if not m or cands[0] != 0:
        return None
    target = cands + steps
    # Every candidate a member, in order (no stray candidate): the common case.
    if (target[:-1] == cands[1:]).all():
        return np.arange(m) if target[-1] >= end else None
    finish, broken = m, m + 1  # absorbing: the end reached, a position not in `cands`
    where = np.full(end + 1, broken, dtype=np.intp)  # position -> candidate index
    where[cands] = np.arange(m)
    where[end] = finish  # the end, or past it
    nxt = where[np.minimum(target, end)]
    del where
    alive = np.ones(m, dtype=bool)
    for _ in range(PRUNE_ROUNDS):
        pointed = np.zeros(m + 2, dtype=bool)
        pointed[nxt[alive]] = True
        pointed[0] = True
        alive &= pointed[:m]
        members = np.flatnonzero(alive)
        follows = nxt[members]
        if (follows[:-1] == members[1:]).all() and follows[-1] >= finish:
            return members if follows[-1] == finish else None
    jump = np.append(nxt, [finish, broken])
    jumps = [jump]
    while jump[0] < finish:  # the chain goes on past 2^k records
        jump = jump[jump]
        jumps.append(jump)
    if jump[0] == broken:
        return None
    members = np.zeros(1, dtype=np.intp)
    for jump in reversed(jumps[:-1]):
        both = np.empty(2 * len(members), dtype=np.intp)
        both[0::2] = members
        both[1::2] = jump[members]
        members = both
    return members[: np.searchsorted(members, finish)]


class RingBufReader:
    def __init__(self, map_fd: int, data_size: int, record_size: int = 56) -> None:
        """`record_size`: the records expected (header and payload, without
        the ring's 8-byte header), for capacity() until a drain says better."""
        self._setup(data_size, record_size)
        page = mmap.PAGESIZE
        self._consumer = mmap.mmap(
            map_fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0
        )
        self._producer = mmap.mmap(
            map_fd, page + 2 * data_size, mmap.MAP_SHARED, mmap.PROT_READ, offset=page
        )
        self._data = memoryview(self._producer)[page:]
        self._words = np.frombuffer(self._data, dtype=np.uint32)  # both copies: a length word anywhere
        self._cons_pos = shared_u64(self._consumer)
        self._prod_pos = shared_u64(self._producer)

    @classmethod
    def over(cls, data, positions, data_size: int, record_size: int = 56) -> "RingBufReader":
        """A reader of memory laid out as the kernel's (no mapping): `data`
        holds the data pages twice in a row, `positions` the consumer
        position then the producer's (two u64). For tests and benchmarks."""
        reader = cls.__new__(cls)
        reader._setup(data_size, record_size)
        reader._data = memoryview(data)
        reader._words = np.frombuffer(reader._data, dtype=np.uint32)
        reader._cons_pos = shared_u64(positions, 0)
        reader._prod_pos = shared_u64(positions, 8)
        reader._consumer = None
        return reader

    def _setup(self, data_size: int, record_size: int) -> None:
        if data_size & (data_size - 1):
            raise ValueError("ring buffer size must be a power of two")
        if record_size <= 0 or record_size % 8:
            raise ValueError("records must be 8-byte aligned")
        self.data_size = data_size
        self.record_size = record_size
        self._stride_seen = RECORD_HEADER + record_size  # bytes a record took, lately
        self._slot_dtypes: dict[int, np.dtype] = {}
        self._known: list[int] = []  # record sizes seen: tried first when following the chain
        self._closing = False
        self.skipped_records = 0  # committed records of length 0: nothing to hand over
        self.mixed_drains = 0  # drains that followed the chain (more than one size, BUSY, DISCARD)
        self.full_walks = 0  # ... that had to try every position (a size not seen before)

    def drain(self, max_records: int | None = None) -> RawRecords:
        """Copy out every committed record (at most `max_records`), in ring
        order, grouped by size; the arrays are fresh copies the caller owns
        (it may view and modify them in place)."""
        cons = int(self._cons_pos[0])
        prod = int(self._prod_pos[0])
        avail = prod - cons
        if avail <= 0 or max_records == 0:
            return RawRecords()
        start = cons & (self.data_size - 1)
        records = self._drain_uniform(cons, start, avail, max_records)
        if records is None:
            records = self._drain_mixed(cons, start, avail, max_records)
        return records

    def _drain_uniform(self, cons: int, start: int, avail: int, limit: int | None) -> RawRecords | None:
        """A flood of one size, in two numpy passes: every slot committed,
        none discarded, all as long as the first (one comparison of the
        length words says all three), then one strided copy of the records.
        None when any slot is otherwise: the caller follows the chain."""
        first = start >> 2
        size = int(self._words[first])
        if not size or size % 8 or size & ~SIZE_MASK:
            return None
        stride = RECORD_HEADER + size
        if avail % stride:
            return None
        count = avail // stride if limit is None else min(avail // stride, limit)
        words = stride >> 2
        if not (self._words[first:first + count * words:words] == size).all():
            return None
        slots = np.frombuffer(self._data, dtype=self._slot_dtype(size), count=count, offset=start)
        records = slots["record"].copy()
        self._cons_pos[0] = cons + count * stride
        self._stride_seen = stride
        return RawRecords([records])

    def _slot_dtype(self, size: int) -> np.dtype:
        dtype = self._slot_dtypes.get(size)
        if dtype is None:
            dtype = self._slot_dtypes[size] = np.dtype(
                [("len", "<u4"), ("pgoff", "<u4"), ("record", f"V{size}")])
        return dtype

    def _drain_mixed(self, cons: int, start: int, avail: int, limit: int | None) -> RawRecords:
        """Follow the chain of headers (follow_chain), stop at the first
        BUSY record, skip DISCARDed ones, copy the rest out by size."""
        self.mixed_drains += 1
        n = avail // 8  # 8-byte positions; every record starts at one
        words = np.frombuffer(self._data, dtype=np.uint32, count=2 * n, offset=start)[0::2]
        # The length word at every position, read once. A record's length
        # is written before the producer position covers it, and only its
        # flags change after (commit clears BUSY, may set DISCARD): so the
        # chain can be followed through BUSY records, whose flags are read
        # again below, before any data is copied.
        sizes = words & SIZE_MASK
        members = None
        if self._known:
            cands = np.flatnonzero(np.isin(sizes, self._known))
            csizes = sizes[cands].astype(np.int64)
            csteps = 1 + ((csizes + 7) >> 3)
            got = follow_chain(cands, csteps, n)
            if got is not None:
                members, msizes, ends = cands[got], csizes[got], cands[got] + csteps[got]
        if members is None:  # a size not seen before: every position may start a record
            self.full_walks += 1
            steps = 1 + ((sizes.astype(np.int64) + 7) >> 3)
            members = follow_chain(np.arange(n), steps, n)
            assert members is not None  # every position is a candidate: the chain cannot break
            msizes, ends = sizes[members].astype(np.int64), members + steps[members]
            self._learn(np.unique(msizes).tolist())
        flags = words[members] & (BUSY_BIT | DISCARD_BIT)
        # The chain ends at a record still being written, or (never with a
        # sane kernel) one reaching past the producer position: both stay.
        cut = len(members)
        flagged = flags.any()
        if flagged:
            stop = np.flatnonzero(flags & BUSY_BIT)
            if stop.size:
                cut = int(stop[0])
        if cut and ends[cut - 1] > n:
            cut -= 1
        if limit is not None and cut > limit:  # (DISCARDed ones do not count)
            kept = np.flatnonzero(flags[:cut] == 0)
            if len(kept) >= limit:
                cut = int(kept[limit - 1]) + 1
        end = int(ends[cut - 1]) * 8 if cut else 0
        taken, taken_sizes = members[:cut], msizes[:cut]
        if flagged:
            keep = flags[:cut] == 0
            taken, taken_sizes = taken[keep], taken_sizes[keep]
        if len(taken) and not taken_sizes.all():
            empty = taken_sizes == 0
            self.skipped_records += int(np.count_nonzero(empty))
            taken, taken_sizes = taken[~empty], taken_sizes[~empty]
        base = np.frombuffer(self._data, dtype=np.uint8, count=end, offset=start)
        records = RawRecords.gather(base, (taken + 1) * 8, taken_sizes, self._known)
        del base, words  # no view of the mapping outlives the drain
        self._cons_pos[0] = cons + end
        if cut:
            self._stride_seen = max(RECORD_HEADER + 8, end // cut)
        return records

    def _learn(self, sizes: list[int]) -> None:
        """Record sizes to try first from now on (the last ones if too many)."""
        known = list(dict.fromkeys(self._known + sizes))
        self._known = known if len(known) <= KNOWN_SIZES_MAX else sizes[:KNOWN_SIZES_MAX]

    def pending_bytes(self) -> int:
        return int(self._prod_pos[0]) - int(self._cons_pos[0])

    def capacity(self) -> int:
        """How many records the ring holds, at the sizes the last drain saw."""
        return self.data_size // self._stride_seen

    def close(self) -> None:
        if self._consumer is None or self._consumer.closed or self._closing:
            return
        self._closing = True
        del self._cons_pos, self._prod_pos, self._words  # views must go before the mappings
        try:
            self._data.release()
            self._consumer.close()
            self._producer.close()
        except BufferError:
            # A view of the ring still lives (the traceback of an exception
            # raised in a drain holds its frames): the mappings go with it.
            pass
