"""Raw fixed-size records -> an EventBatch, decoded lazily and in bulk.

One numpy structured view decodes the headers of a whole batch; `Event`
objects are only built for the slice a consumer asks for (the rows a
dashboard shows, or what `ktui stream` writes).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ktui.lang.model import Kind, Probe
from ktui.record.feed import Event
from ktui.record.layout import HEADER_FIELDS, RecordLayout


def record_dtype(layout: RecordLayout) -> np.dtype:
    fields = [(name, fmt) for name, fmt, _ in HEADER_FIELDS]
    fields.append(("payload", f"V{layout.payload_size}"))
    dtype = np.dtype(fields)
    assert dtype.itemsize == layout.record_size
    return dtype


def payload_dtype(layout: RecordLayout, index: int) -> np.dtype:
    """Typed view of one probe's payload (header-backed fetches excluded)."""
    names, formats, offsets = [], [], []
    for i, slot in enumerate(layout.probes[index].slots):
        if slot.kind == "header":
            continue
        names.append(f"f{i}")
        formats.append(slot.numpy_format)
        offsets.append(slot.offset)
    return np.dtype(
        {"names": names, "formats": formats, "offsets": offsets, "itemsize": layout.payload_size}
    )


class Decoder:
    """Decodes records of one compiled program; maps local probe indices to
    the session's probe ids."""

    def __init__(self, layout: RecordLayout, probes: Sequence[Probe], probe_ids: Sequence[int]):
        self.layout = layout
        self.probes = tuple(probes)
        self.dtype = record_dtype(layout)
        self.payload_dtypes = [payload_dtype(layout, i) for i in range(len(probes))]
        self.probe_ids = np.asarray(probe_ids, dtype=np.int64)

    def batch(self, raw: np.ndarray) -> "RecordBatch":
        records = raw.view(self.dtype) if raw.dtype != self.dtype else raw
        return RecordBatch(self, records)


class RecordBatch:
    """An EventBatch over a numpy array of records of one program."""

    def __init__(self, decoder: Decoder, records: np.ndarray) -> None:
        self.decoder = decoder
        self.records = records

    def __len__(self) -> int:
        return len(self.records)

    def probe_counts(self) -> dict[int, int]:
        if not len(self.records):
            return {}
        local = self.records["probe"]
        counts = np.bincount(local, minlength=len(self.decoder.probes))
        return {
            int(self.decoder.probe_ids[i]): int(c) for i, c in enumerate(counts) if c
        }

    def events(self, start: int = 0, stop: int | None = None) -> list[Event]:
        recs = self.records[start:stop]
        if not len(recs):
            return []
        dec = self.decoder
        # Decode each probe's payload columns in bulk, then zip per row.
        values_by_row: list[tuple] = [()] * len(recs)
        local = recs["probe"]
        for index in np.unique(local):
            index = int(index)
            if index >= len(dec.probes):
                continue  # a corrupt record; never produced by our programs
            rows = np.flatnonzero(local == index)
            typed = recs["payload"][rows].view(dec.payload_dtypes[index])
            columns = []
            for i, slot in enumerate(dec.layout.probes[index].slots):
                if slot.kind == "header":
                    col = recs[slot.header_field][rows]
                    if slot.header_field == "comm":
                        columns.append([_text(b) for b in col.tolist()])
                    else:
                        columns.append(col.tolist())
                elif slot.kind == "str":
                    columns.append([_text(b) for b in typed[f"f{i}"].tolist()])
                else:
                    columns.append(typed[f"f{i}"].tolist())
            for row, vals in zip(rows.tolist(), zip(*columns)):
                values_by_row[row] = vals
        out = []
        ts = recs["ts"].tolist()
        lat = recs["latency"].tolist()
        cpu = recs["cpu"].tolist()
        pid = recs["pid"].tolist()
        tid = recs["tid"].tolist()
        comm = recs["comm"].tolist()
        probes = local.tolist()
        for k in range(len(recs)):
            index = probes[k]
            if index >= len(dec.probes):
                continue
            out.append(
                Event(
                    probe_id=int(dec.probe_ids[index]),
                    ts_ns=ts[k],
                    cpu=cpu[k],
                    pid=pid[k],
                    tid=tid[k],
                    comm=_text(comm[k]),
                    latency_ns=lat[k] if dec.probes[index].kind is Kind.RETURN else None,
                    values=values_by_row[k],
                )
            )
        return out


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


class EmptyBatch:
    def __len__(self) -> int:
        return 0

    def probe_counts(self) -> dict[int, int]:
        return {}

    def events(self, start: int = 0, stop: int | None = None) -> list[Event]:
        return []


class MultiBatch:
    """Several batches (e.g. one per compiled program) seen as one."""

    def __init__(self, parts: Sequence) -> None:
        self.parts = [p for p in parts if len(p)]

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def probe_counts(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for p in self.parts:
            for k, v in p.probe_counts().items():
                out[k] = out.get(k, 0) + v
        return out

    def events(self, start: int = 0, stop: int | None = None) -> list[Event]:
        total = len(self)
        start, stop, _ = slice(start, stop).indices(total)
        out: list[Event] = []
        base = 0
        for p in self.parts:
            n = len(p)
            lo, hi = max(start - base, 0), min(stop - base, n)
            if lo < hi:
                out.extend(p.events(lo, hi))
            base += n
        if len(self.parts) > 1:
            out.sort(key=lambda e: e.ts_ns)
        return out
