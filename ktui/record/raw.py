"""Raw records of several sizes, as a reader copied them out of a buffer.

Each probe's records are exactly as long as its own fields, so one kernel
buffer holds records of several sizes, interleaved in any order. A reader
hands them over grouped by size (one numpy array per size, which decodes
with one structured view) and says in `order` which group each record, in
arrival order, went to: so no Python call per record, and the arrival order
is kept for whoever needs it (record.decode.InterleavedBatch).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


class RawRecords:
    """Records in arrival order: `groups` holds one array of `V<size>` per
    size (each in arrival order), `order` the group of each record (uint8,
    or uint16 past 255 groups; None for one group or none)."""

    __slots__ = ("groups", "order")

    def __init__(self, groups: Sequence[np.ndarray] = (), order: np.ndarray | None = None) -> None:
        self.groups = list(groups)
        if len(self.groups) > 1:
            if order is None:
                raise ValueError("records of several sizes need their order")
            self.order = order
        else:
            self.order = None

    def __len__(self) -> int:
        if self.order is not None:
            return len(self.order)
        return len(self.groups[0]) if self.groups else 0

    def __repr__(self) -> str:
        return f"RawRecords({', '.join(f'{len(g)} x {g.dtype.itemsize}' for g in self.groups)})"

    @property
    def sizes(self) -> list[int]:
        return [g.dtype.itemsize for g in self.groups]

    def of_size(self, size: int) -> np.ndarray:
        """The records of that size, in arrival order (an empty array if none)."""
        for g in self.groups:
            if g.dtype.itemsize == size:
                return g
        return np.empty(0, dtype=f"V{size}")

    def as_bytes(self) -> list[bytes]:
        """Every record, in arrival order (for tests and small checks only:
        one Python object per record)."""
        if not self.groups:
            return []
        if self.order is None:
            return [bytes(r) for r in self.groups[0]]
        rows = [iter(g) for g in self.groups]
        return [bytes(next(rows[k])) for k in self.order.tolist()]

    @classmethod
    def gather(cls, buf: np.ndarray, offsets: np.ndarray, sizes: np.ndarray,
               likely: Sequence[int] = ()) -> "RawRecords":
        """Copy the records at byte `offsets` of `buf` (1-D uint8, contiguous;
        a view of a kernel mapping will do) with their `sizes`, grouped by
        size. Every record must lie inside `buf`. `likely`: the sizes they
        probably have (a reader's sizes seen so far: one comparison each
        instead of sorting the sizes)."""
        if not len(offsets):
            return cls()
        sizes = np.asarray(sizes, dtype=np.int64)
        first = int(sizes[0])
        same = sizes == first
        if same.all():
            return cls([_window(buf, first)[offsets]])
        picks = [(first, same)]
        found = int(np.count_nonzero(same))
        for size in likely:
            if size != first and found < len(sizes):
                pick = sizes == size
                count = int(np.count_nonzero(pick))
                if count:
                    picks.append((size, pick))
                    found += count
        if found < len(sizes):  # sizes not among the likely ones
            picks = [(int(size), sizes == size) for size in np.unique(sizes).tolist()]
        order = np.zeros(len(sizes), dtype=_order_dtype(len(picks)))
        groups = []
        for k, (size, pick) in enumerate(picks):
            if k:
                order[pick] = k
            groups.append(_window(buf, size)[offsets[pick]])
        return cls(groups, order)

    @classmethod
    def concat(cls, parts: Sequence["RawRecords"]) -> "RawRecords":
        """One after the other (e.g. the CPUs of a perf buffer)."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls()
        if len(parts) == 1:
            return parts[0]
        sizes = sorted({s for p in parts for s in p.sizes})
        if len(sizes) == 1:
            return cls([np.concatenate([p.groups[0] for p in parts])])
        where = {s: k for k, s in enumerate(sizes)}
        groups = [np.concatenate([p.of_size(s) for p in parts]) for s in sizes]
        orders = []
        for p in parts:
            remap = np.asarray([where[s] for s in p.sizes], dtype=np.int64)
            orders.append(remap[p.order] if p.order is not None else np.full(len(p), remap[0]))
        return cls(groups, np.concatenate(orders).astype(_order_dtype(len(groups))))


def _order_dtype(groups: int) -> type:
    return np.uint8 if groups <= 0xFF else np.uint16


def _window(buf: np.ndarray, size: int) -> np.ndarray:
    """Every `size`-byte run of `buf`, one per byte offset, as a V<size>
    array sharing its memory: indexing it with record offsets copies those
    records out in one numpy call (np.take is far slower on such a view)."""
    count = len(buf) - size + 1
    if count <= 0:
        return np.empty(0, dtype=f"V{size}")
    return np.ndarray((count,), dtype=f"V{size}", buffer=buf, offset=0, strides=(1,))
