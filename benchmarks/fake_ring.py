"""A BPF ring buffer's memory without the kernel, for tests and benchmarks.

Laid out as kernel/bpf/ringbuf.c lays it out for the reader: a consumer and
a producer position (u64 each), and the data pages twice in a row (the
kernel maps them twice, so a record that wraps is contiguous; here
`produce` writes both copies). Each record gets an 8-byte header (u32
length, u32 page offset) and takes round_up(8 + length, 8) bytes, as
bpf_ringbuf_output() makes it. The reader is the real RingBufReader over
this memory (RingBufReader.over).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ktui.kernel.buffers.ringbuf import RECORD_HEADER, RingBufReader, shared_u64
from ktui.record.raw import RawRecords


def ring_bytes(records: RawRecords | Sequence[bytes]) -> tuple[bytes, np.ndarray]:
    """Records (in order) as the kernel writes them into the ring: each
    behind its header, padded to 8 bytes. Returns the bytes and each
    record's header offset in them."""
    if not isinstance(records, RawRecords):
        blobs = list(records)
        lens = np.asarray([len(b) for b in blobs], dtype=np.int64)
        strides = RECORD_HEADER + ((lens + 7) & ~7)
        at = np.concatenate([[0], np.cumsum(strides)[:-1]]).astype(np.int64)
        out = bytearray(int(strides.sum()))
        for pos, length, blob in zip(at.tolist(), lens.tolist(), blobs):
            out[pos:pos + 4] = length.to_bytes(4, "little")
            out[pos + RECORD_HEADER:pos + RECORD_HEADER + length] = blob
        return bytes(out), at
    # RawRecords: in numpy, a flood's worth at once
    n = len(records)
    if not n:
        return b"", np.empty(0, dtype=np.int64)
    sizes = np.asarray(records.sizes, dtype=np.int64)
    order = records.order if records.order is not None else np.zeros(n, dtype=np.uint8)
    lens = sizes[order]
    strides = RECORD_HEADER + ((lens + 7) & ~7)
    at = np.zeros(n, dtype=np.int64)
    np.cumsum(strides[:-1], out=at[1:])
    out = np.zeros(int(strides.sum()), dtype=np.uint8)
    out.view("<u4")[at // 4] = lens
    for k, group in enumerate(records.groups):
        size = group.dtype.itemsize
        window = np.ndarray((len(out) - size + 1,), dtype=f"V{size}", buffer=out, strides=(1,))
        window[at[order == k] + RECORD_HEADER] = group.view(f"V{size}")
    return out.tobytes(), at


class FakeRing:
    def __init__(self, data_size: int, record_size: int = 56) -> None:
        self.data_size = data_size
        self.record_size = record_size
        self.stride = RECORD_HEADER + record_size  # of records of record_size
        self.data = bytearray(2 * data_size)
        self.positions = bytearray(16)
        self.prod = 0
        self.reader = RingBufReader.over(self.data, self.positions, data_size, record_size)
        self._prod_pos = shared_u64(self.positions, 8)

    def produce(self, records: np.ndarray) -> np.ndarray:
        """Records of one size (a V<size> or structured array) at once."""
        size = records.dtype.itemsize
        slots = np.zeros(len(records), dtype=[("len", "<u4"), ("pgoff", "<u4"), ("record", f"V{size}"),
                                               ("pad", f"V{-size % 8}")] if size % 8 else
                         [("len", "<u4"), ("pgoff", "<u4"), ("record", f"V{size}")])
        slots["len"] = size
        slots["record"] = records.view(f"V{size}")
        stride = slots.dtype.itemsize
        self.write(slots.tobytes())
        return self.prod - len(records) * stride + np.arange(len(records)) * stride

    def produce_raw(self, records: RawRecords | Sequence[bytes]) -> np.ndarray:
        """Records of any sizes, in order; returns each one's header position
        (in the ring's byte count since the start, as the kernel's)."""
        raw, at = ring_bytes(records)
        base = self.prod
        self.write(raw)
        return base + at

    def write(self, raw: bytes) -> None:
        """Bytes the producer adds, then its position moves past them."""
        if self.prod + len(raw) - int(self.reader._cons_pos[0]) > self.data_size:
            raise ValueError("the ring would overflow")
        off = self.prod % self.data_size
        for base in (off, off + self.data_size):  # both copies of the pages
            end = min(base + len(raw), 2 * self.data_size)
            self.data[base:end] = raw[: end - base]
        first_end = off + len(raw) - self.data_size  # wrapped part, first copy
        if first_end > 0:
            self.data[0:first_end] = raw[len(raw) - first_end:]
        self.prod += len(raw)
        self._prod_pos[0] = self.prod

    def set_len(self, pos: int, value: int) -> None:
        """The length word of the record whose header is at `pos`, in both copies."""
        off = pos % self.data_size
        for base in (off, off + self.data_size):
            self.data[base:base + 4] = value.to_bytes(4, "little")

    def free(self) -> int:
        return self.data_size - (self.prod - int(self.reader._cons_pos[0]))
