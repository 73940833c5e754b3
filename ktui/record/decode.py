"""Raw records -> an EventBatch, decoded lazily and in bulk.

One numpy structured view decodes the headers of all records of one size;
`Event` objects are only built for the slice a consumer asks for (the rows a
dashboard shows, or what `ktui stream` writes). Each probe's records are as
long as its own fields, so a buffer's records come in several sizes,
interleaved: `SizedDecoders` decodes them size by size and keeps the order
they arrived in (`InterleavedBatch`). A batch's `events(start, stop)` are
always that slice of the batch in arrival order.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ktui.lang.model import Probe
from ktui.record.cgroups import CgroupName, names_of
from ktui.record.feed import CONTEXT_SHIFT, CPU_MASK, Event, context_name
from ktui.record.layout import HEADER_SIZE, RecordLayout, probe_record_size, sized_layout
from ktui.record.raw import RawRecords


def record_dtype(layout: RecordLayout) -> np.dtype:
    fields = [(name, fmt) for name, fmt, _ in layout.header.fields]
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
    the session's probe ids. `cgroup_name`: names a `cgroup` fetch's ids
    (record.cgroups; None: each one unknown)."""

    def __init__(self, layout: RecordLayout, probes: Sequence[Probe], probe_ids: Sequence[int],
                 cgroup_name: CgroupName | None = None):
        self.layout = layout
        self.cgroup_name = cgroup_name
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
        return [e for e in self._decode(start, stop) if e is not None]

    def first_ts(self) -> int:
        return int(self.records["ts"][0])

    def last_ts(self) -> int:
        return int(self.records["ts"][-1])

    def without(self, probe_ids) -> "RecordBatch":
        """The batch without the events of those probes."""
        return RecordBatch(self.decoder, self.records[self._kept(probe_ids)])

    def cgroup_ids(self) -> set[int]:
        """The distinct cgroup ids the batch holds, in its headers and its
        `cgroup` fetches (what a recording must be able to name again)."""
        out: set[int] = set()
        if self.decoder.layout.header.has_cgroup:  # every event's task's
            out.update(np.unique(self.records["cgroup"]).tolist())
        local = self.records["probe"]
        for index, layout in enumerate(self.decoder.layout.probes[:len(self.decoder.probes)]):
            slots = [i for i, slot in enumerate(layout.slots) if slot.kind == "cgroup"]
            if not slots:
                continue
            typed = self.records["payload"][local == index].view(self.decoder.payload_dtypes[index])
            for i in slots:
                out.update(np.unique(typed[f"f{i}"]).tolist())
        return out

    def _kept(self, probe_ids) -> np.ndarray:
        local = self.records["probe"]
        known = local < len(self.decoder.probe_ids)
        ids = self.decoder.probe_ids[np.where(known, local, 0)]
        return ~(known & np.isin(ids, list(probe_ids)))

    def _decode(self, start: int = 0, stop: int | None = None) -> list[Event | None]:
        """The events of rows [start, stop): None for a row whose probe
        index the decoder does not know (never written by ktui's programs)."""
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
                    elif slot.header_field == "cpu":  # its top bits are the context
                        columns.append((col & CPU_MASK).tolist())
                    else:
                        columns.append(col.tolist())
                elif slot.kind == "str":
                    columns.append([_text(b) for b in typed[f"f{i}"].tolist()])
                elif slot.kind == "func":
                    columns.append(member_names(dec.probes[index], typed[f"f{i}"].tolist()))
                elif slot.kind == "cgroup":
                    columns.append(names_of(dec.cgroup_name, typed[f"f{i}"].tolist()))
                else:
                    columns.append(typed[f"f{i}"].tolist())
            for row, vals in zip(rows.tolist(), zip(*columns)):
                values_by_row[row] = vals
        out: list[Event | None] = []
        ts = recs["ts"].tolist()
        lat = recs["latency"].tolist()
        cpu_field = recs["cpu"]
        cpu = (cpu_field & CPU_MASK).tolist()
        context = (cpu_field >> CONTEXT_SHIFT).tolist()
        pid = recs["pid"].tolist()
        tid = recs["tid"].tolist()
        comm = recs["comm"].tolist()
        probes = local.tolist()
        cgroups = header_cgroups(dec, recs)
        for k in range(len(recs)):
            index = probes[k]
            if index >= len(dec.probes):
                out.append(None)
                continue
            out.append(
                Event(
                    probe_id=int(dec.probe_ids[index]),
                    ts_ns=ts[k],
                    cpu=cpu[k],
                    pid=pid[k],
                    tid=tid[k],
                    comm=_text(comm[k]),
                    latency_ns=lat[k] if dec.probes[index].timed else None,
                    values=values_by_row[k],
                    context=context_name(context[k]),
                    cgroup=cgroups[k],
                )
            )
        return out


def header_cgroups(decoder: Decoder, recs: np.ndarray) -> list[str]:
    """Each record's task's cgroup, named: each distinct id once (a batch's
    events mostly share a few cgroups), then spread by numpy, not by a
    Python call per record; "" each where the header has none (HEADER_V1)."""
    if not decoder.layout.header.has_cgroup:
        return [""] * len(recs)
    ids, where = np.unique(recs["cgroup"], return_inverse=True)
    names = np.asarray(names_of(decoder.cgroup_name, ids.tolist()), dtype=object)
    return names[where].tolist()


class InterleavedBatch:
    """Batches of records of several sizes that arrived interleaved, seen as
    one in arrival order: `order[k]` is the part the k-th event is in (each
    part keeps its own events in arrival order)."""

    def __init__(self, parts: Sequence[RecordBatch], order: np.ndarray) -> None:
        if len(parts) > 0xFFFF or len(order) != sum(len(p) for p in parts):
            raise ValueError("the order does not fit the parts")
        self.parts = list(parts)
        self.order = order
        self._ranks: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.order)

    def probe_counts(self) -> dict[int, int]:
        return _summed_probe_counts(self.parts)

    def ranks(self) -> np.ndarray:
        """Each event's row in its part."""
        if self._ranks is None:
            ranks = np.empty(len(self.order), dtype=np.int64)
            for p, part in enumerate(self.parts):
                ranks[self.order == p] = np.arange(len(part))
            self._ranks = ranks
        return self._ranks

    def events(self, start: int = 0, stop: int | None = None) -> list[Event]:
        start, stop, _ = slice(start, stop).indices(len(self))
        if start >= stop:
            return []
        # The slice holds one run of rows of each part: decode each run in
        # bulk, then put every event at its place.
        picked = self.order[start:stop]
        ranks = self.ranks()[start:stop]
        out: list[Event | None] = [None] * (stop - start)
        for p, part in enumerate(self.parts):
            where = np.flatnonzero(picked == p)
            if not where.size:
                continue
            decoded = part._decode(int(ranks[where[0]]), int(ranks[where[-1]]) + 1)
            for k, event in zip(where.tolist(), decoded):
                out[k] = event
        return [e for e in out if e is not None]

    def first_ts(self) -> int:
        return int(self.parts[int(self.order[0])].records["ts"][0])

    def last_ts(self) -> int:
        return int(self.parts[int(self.order[-1])].records["ts"][-1])

    def without(self, probe_ids):
        """The batch without the events of those probes (in order still)."""
        keep = np.empty(len(self.order), dtype=bool)
        parts = []
        for p, part in enumerate(self.parts):
            kept = part._kept(probe_ids)
            keep[self.order == p] = kept
            parts.append(RecordBatch(part.decoder, part.records[kept]))
        return interleaved(parts, self.order[keep])


def interleaved(parts: Sequence[RecordBatch], order: np.ndarray):
    """`parts` in `order` (part of each event), parts left empty dropped:
    one RecordBatch when one part is left, EmptyBatch when none."""
    kept = [p for p, part in enumerate(parts) if len(part)]
    if not kept:
        return EmptyBatch()
    if len(kept) == 1:
        return parts[kept[0]]
    if len(kept) < len(parts):
        remap = np.zeros(len(parts), dtype=np.int64)
        remap[kept] = np.arange(len(kept))
        order = remap[order]
    dtype = np.uint8 if len(kept) <= 0xFF else np.uint16
    return InterleavedBatch([parts[p] for p in kept], order.astype(dtype, copy=False))


def merged_by_time(batches: Sequence) -> "InterleavedBatch | RecordBatch | EmptyBatch | MultiBatch":
    """Batches of one drain from different buffers (each compiled unit's,
    the generic engine's) as one batch in time order, each buffer's events
    still in their own order: by the running maximum of each buffer's
    timestamps, a stable sort. So the event pane's last rows are the
    drain's latest, and any two slices add up to the whole. Batches with no
    records behind them (a test's ready-made events) come one after the
    other instead."""
    batches = [b for b in batches if len(b)]
    if len(batches) <= 1:
        return batches[0] if batches else EmptyBatch()
    parts: list[RecordBatch] = []
    owners, keys = [], []
    for batch in batches:
        if isinstance(batch, RecordBatch):
            owner = np.full(len(batch), len(parts), dtype=np.int64)
            ts = batch.records["ts"]
            parts.append(batch)
        elif isinstance(batch, InterleavedBatch):
            owner = batch.order.astype(np.int64) + len(parts)
            ts = np.empty(len(batch), dtype=np.uint64)
            for p, part in enumerate(batch.parts):
                ts[batch.order == p] = part.records["ts"]
            parts.extend(batch.parts)
        else:
            return MultiBatch(batches)
        owners.append(owner)
        keys.append(np.maximum.accumulate(ts))
    order = np.concatenate(owners)[np.argsort(np.concatenate(keys), kind="stable")]
    return interleaved(parts, order)


class SizedDecoders:
    """Decoding for one set of probes whose records come in several sizes.

    `tags`: what each probe's records carry in the header's probe field
    (sorted; None: the probe's index). `sizes`: the record sizes each probe
    may write (None: exactly its own, layout.probe_record_size). A record
    is decoded only as its own probe's, and only at a size that probe
    writes: one with a tag no probe has, or of another size, would be
    decoded with the wrong layout, so it is counted instead (`unreadable`,
    also returned by each `batch`) and left out of the batch."""

    def __init__(self, probes: Sequence[Probe], probe_ids: Sequence[int], *,
                 tags: Sequence[int] | None = None, sizes: Sequence[Sequence[int]] | None = None,
                 cgroup_name: CgroupName | None = None) -> None:
        self.probes = tuple(probes)
        self.cgroup_name = cgroup_name
        self.probe_ids = list(probe_ids)
        if tags is not None and (len(tags) != len(self.probes) or list(tags) != sorted(tags)):
            raise ValueError("one tag per probe, sorted")
        self.tags = None if tags is None else np.asarray(tags, dtype=np.uint32)
        self.sizes = [tuple(s) for s in sizes] if sizes is not None else \
            [(probe_record_size(p),) for p in self.probes]
        self.unreadable = 0
        self._decoders: dict[int, Decoder] = {}
        self._plans: dict[int, tuple | None] = {}

    def decoder(self, size: int) -> Decoder:
        decoder = self._decoders.get(size)
        if decoder is None:
            decoder = self._decoders[size] = Decoder(sized_layout(self.probes, size), self.probes,
                                                     self.probe_ids, self.cgroup_name)
        return decoder

    def _plan(self, size: int) -> tuple | None:
        """How records of `size` bytes are decoded: (decoder, which probes
        write that size, the one that does and its tag when only one does);
        None when no probe does."""
        fits = np.asarray([size in s for s in self.sizes], dtype=bool)
        plan = None
        if size >= HEADER_SIZE and size % 8 == 0 and fits.any():
            owners = np.flatnonzero(fits)
            own = int(owners[0]) if len(owners) == 1 else None
            tag = None if own is None else own if self.tags is None else int(self.tags[own])
            plan = (self.decoder(size), fits, own, tag)
        self._plans[size] = plan
        return plan

    def _index(self, tags: np.ndarray, fits: np.ndarray) -> tuple[np.ndarray, np.ndarray | bool]:
        """Each tag's probe index among those that write this size (`fits`),
        and whether it is one (True: all are)."""
        n = len(self.probes)
        if self.tags is None:
            ok = tags < n
            index = tags if ok.all() else np.where(ok, tags, 0)
        else:
            index = np.minimum(np.searchsorted(self.tags, tags), n - 1)
            ok = self.tags[index] == tags
        if not fits.all():  # some probes write other sizes: theirs are not decoded here
            ok &= fits[index]
        return index, (True if ok.all() else ok)

    def batch(self, raw: RawRecords):
        """The records as one batch in arrival order, those that cannot be
        decoded left out (counted in `unreadable`)."""
        return self.split(raw)[0]

    def split(self, raw: RawRecords):
        """batch(), and how many records it left out."""
        parts: list[RecordBatch] = []
        kept: list[np.ndarray | bool] = []  # per group: which records stay (True: all)
        unreadable = 0
        for group in raw.groups:
            plan = self._plans.get(group.dtype.itemsize, False)
            if plan is False:
                plan = self._plan(group.dtype.itemsize)
            if plan is None:
                unreadable += len(group)
                kept.append(False)
                parts.append(EmptyBatch())
                continue
            decoder, fits, own, tag = plan
            records = group.view(decoder.dtype)  # the reader's fresh copy: rewritten in place
            probe = records["probe"]
            if own is not None:  # one probe writes this size (the usual case)
                index = own
                ok = probe == tag
                if ok.all():  # all its own: index in place (a comparison and a fill)
                    ok = True
            else:
                index, ok = self._index(probe, fits)
            if ok is not True:
                records = records[ok]
                if not isinstance(index, int):
                    index = index[ok]
                unreadable += len(group) - len(records)
                probe = records["probe"]
            probe[...] = index
            kept.append(ok)
            parts.append(RecordBatch(decoder, records))
        self.unreadable += unreadable
        if raw.order is None:
            return (parts[0] if parts and len(parts[0]) else EmptyBatch()), unreadable
        order = raw.order
        if unreadable:
            keep = np.empty(len(order), dtype=bool)
            for g, ok in enumerate(kept):
                keep[order == g] = ok
            order = order[keep]
        return interleaved(parts, order), unreadable


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
    """Several batches seen as one, one after the other: drains in turn (the
    collector's backlog, a replay's chunks), or the buffers of one drain
    (each compiled unit's, the generic engine's). Nothing is reordered: a
    slice is the same events whichever way the batch is cut (the event pane
    decodes the last rows block by block; stream and record take it all)."""

    def __init__(self, parts: Sequence) -> None:
        self.parts = [p for p in parts if len(p)]

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)

    def probe_counts(self) -> dict[int, int]:
        return _summed_probe_counts(self.parts)

    def events(self, start: int = 0, stop: int | None = None) -> list[Event]:
        """The slice of the parts one after the other, each in its own order."""
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
        return out


def _summed_probe_counts(parts) -> dict[int, int]:
    """Events per probe id over several batches (MultiBatch's and
    InterleavedBatch's parts)."""
    out: dict[int, int] = {}
    for p in parts:
        for k, v in p.probe_counts().items():
            out[k] = out.get(k, 0) + v
    return out


def member_names(probe: Probe, indices: list[int]) -> list[str]:
    """A wildcard's `func` values: the names of its members at those places
    (`Probe.members`, as bound when it ran); one it does not have (members
    not known, or past them) as `#N`, never another function's name."""
    members = probe.members or ()
    return [members[i] if i < len(members) else f"#{i}" for i in indices]
