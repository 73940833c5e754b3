"""Reading a recording back: its chunks, in order, as the replay wants them.

The format is pipeline/recording.py's (its docstring describes each chunk);
this side decodes records with numpy, which the writer needs only once
events flow (`ktui record` imports it after its probes are attached).
"""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass
from typing import BinaryIO, Iterator

import numpy as np

from ktui.lang.bind import with_fetch_types
from ktui.lang.model import ProbeSet, ProbeSetError
from ktui.pipeline.recording import (FIRST_WITH_CGROUP, FORMAT_VERSION, MAGIC, MAX_CHUNK, READABLE_VERSIONS,
                                     RecordingError, _CHUNK, _MIXED, _UNIT, stats_from_json)
from ktui.record.cgroups import unknown as unknown_cgroup
from ktui.record.decode import Decoder, RecordBatch, interleaved
from ktui.record.feed import ProbeState, ProbeStatus
from ktui.record.layout import HEADER, HEADER_V1, Header, probe_record_size, record_layout, sized_layout


@dataclass
class Chunk:
    kind: str  # "head", "unit", "probes", "events", "stats"
    value: object


class RecordingReader:
    """Iterates a recording's chunks; `truncated` says whether it ended early."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.truncated = False
        self.complete = False  # the END chunk was read
        self.head: dict = {}
        self.decoders: dict[int, Decoder] = {}
        self.probesets: dict[int, ProbeSet] = {}
        self._old_units: dict[int, dict[int, Decoder]] = {}  # format 1-2 units: size -> decoder
        self.cgroups: dict[int, str] = {}  # CGRP chunks: cgroup id -> path, as recorded
        self.header: Header = HEADER  # its records' header: HEADER_V1 before format 4 (set by HEAD)

    def chunks(self) -> Iterator[Chunk]:
        from ktui.lang.probeset import loads_probeset

        try:
            f = open(self.path, "rb")
        except OSError as exc:
            raise RecordingError(f"{self.path}: {exc.strerror}") from exc
        with f:
            self._check_magic(f.read(len(MAGIC)))
            while True:
                header = f.read(_CHUNK.size)
                if not header:
                    # Cut off exactly between chunks: only the missing END tells.
                    self._cut_off(f)
                    self.truncated = not self.complete
                    return
                if len(header) < _CHUNK.size:
                    self._cut_off(f)
                    self.truncated = True
                    return
                kind, length = _CHUNK.unpack(header)
                if length > MAX_CHUNK:
                    raise RecordingError(f"{self.path}: corrupt chunk of {length} bytes")
                body = f.read(length)
                if len(body) < length:
                    self._cut_off(f)
                    self.truncated = True
                    return
                try:
                    chunk = self._decode(kind, body, loads_probeset)
                except (ValueError, KeyError, TypeError, AttributeError, struct.error,
                        RecursionError, ProbeSetError) as exc:
                    raise RecordingError(f"{self.path}: corrupt {kind!r} chunk: {exc}") from exc
                if chunk is not None:
                    yield chunk

    def _check_magic(self, magic: bytes) -> None:
        """One line for each way the first bytes are not a recording's."""
        if magic == MAGIC:
            return
        if not magic:
            raise RecordingError(f"{self.path}: empty file, not a ktui recording")
        if MAGIC.startswith(magic):
            self._cut_off_in_header(len(magic))
        if magic[:-1] == MAGIC[:-1]:
            raise RecordingError(
                f"{self.path}: a ktui recording in a layout this ktui does not read (magic version "
                f"{magic[-1]}; it reads formats {_readable()}, magic version {MAGIC[-1]})")
        raise RecordingError(f"{self.path}: not a ktui recording")

    def _cut_off(self, f: BinaryIO) -> None:
        """The file ends here: before its header was whole, it cannot even
        say which format it is (an empty dashboard saying `kernel ?` would)."""
        if not self.head:
            self._cut_off_in_header(f.tell())

    def _cut_off_in_header(self, size: int) -> "NoReturn":  # noqa: F821
        raise RecordingError(f"{self.path}: cut off inside its header ({size} bytes): nothing to replay "
                             f"(this ktui reads formats {_readable()})")

    def _decode(self, kind: bytes, body: bytes, loads_probeset) -> Chunk | None:
        if kind == b"END ":
            self.complete = True
            return None
        if kind == b"HEAD":
            self.head = _json_object(body)
            if self.head.get("version") not in READABLE_VERSIONS:
                raise RecordingError(
                    f"{self.path}: recording format {self.head.get('version')!r} is not one this ktui "
                    f"reads (formats {_readable()}; it writes {FORMAT_VERSION})"
                )
            self.header = HEADER if self.head["version"] >= FIRST_WITH_CGROUP else HEADER_V1
            return Chunk("head", self.head)
        if kind == b"UNIT":
            obj = _json_object(body)
            unit = int(obj["unit"])
            ids, ps = _probes_from_json(obj, loads_probeset, f"{self.path}#unit{unit}")
            if "record_size" in obj:
                layout = sized_layout(ps.probes, int(obj["record_size"]), self.header)
                self._old_units.pop(unit, None)
            else:
                layout = record_layout(ps.probes, self.header)
                self._old_units[unit] = {}
            self.decoders[unit] = Decoder(layout, ps.probes, ids, self._cgroup_name)
            self.probesets[unit] = ps
            return Chunk("unit", (unit, ids, ps))
        if kind == b"PROB":
            return Chunk("probes", _probe_statuses(_json_object(body), loads_probeset, self.path))
        if kind == b"EVTS":
            (unit,) = _UNIT.unpack_from(body)
            data = memoryview(body)[_UNIT.size:]
            decoder = self._decoder_of(unit, data)
            return Chunk("events", RecordBatch(decoder, np.frombuffer(data, dtype=decoder.dtype)))
        if kind == b"EVTM":
            return Chunk("events", self._mixed(body))
        if kind == b"STAT":
            return Chunk("stats", stats_from_json(_json_object(body)))
        if kind == b"CGRP":
            table = _json_object(body)["cgroups"]
            if not isinstance(table, dict):
                raise ValueError("cgroups is no table")
            self.cgroups.update({int(k): str(v) for k, v in table.items()})
            return None
        return None  # unknown chunk kinds from newer writers are skipped


    def _cgroup_name(self, cgid: int) -> str:
        """A cgroup id as the recording named it (events are decoded when
        asked, after the CGRP chunks before them were read)."""
        return self.cgroups.get(cgid) or unknown_cgroup(cgid)

    def _decoder_of(self, unit: int, data) -> Decoder:
        """The decoder of a unit's records: a format 1-2 unit's as
        `_old_unit_size` finds them."""
        decoder = self.decoders[unit]
        sized = self._old_units.get(unit)
        if sized is None:
            return decoder
        size = _old_unit_size(decoder, data)
        if size == decoder.layout.record_size:
            return decoder
        if size not in sized:
            sized[size] = Decoder(sized_layout(decoder.probes, size, decoder.layout.header), decoder.probes,
                                  decoder.probe_ids,
                                  self._cgroup_name)
        return sized[size]

    def _mixed(self, body: bytes):
        """An EVTM chunk: records of several sizes, in arrival order."""
        count, width = _MIXED.unpack_from(body)
        if width not in (1, 2) or not 1 < count <= 0xFFFF:
            raise ValueError(f"{count} parts, order of {width}-byte entries")
        pos = _MIXED.size
        parts = []
        for k in range(count):
            unit, n = _MIXED.unpack_from(body, pos + k * _MIXED.size)
            parts.append((self.decoders[unit], n))
        pos += count * _MIXED.size
        total = sum(n for _, n in parts)
        if not total:
            raise ValueError("no records")  # never written: a batch of none is not written at all
        order = np.frombuffer(body, dtype=np.uint8 if width == 1 else "<u2", count=total, offset=pos)
        pos += total * width + (-(total * width) % 8)
        batches = []
        for decoder, n in parts:
            batches.append(RecordBatch(decoder, np.frombuffer(body, dtype=decoder.dtype, count=n, offset=pos)))
            pos += n * decoder.dtype.itemsize
        if pos != len(body):
            raise ValueError(f"{len(body) - pos} bytes left over")
        if total and int(order.max()) >= count:
            raise ValueError("an event in no part")
        if any(np.count_nonzero(order == k) != n for k, (_, n) in enumerate(parts)):
            raise ValueError("the order does not fit the parts")
        return interleaved(batches, order)


def _old_unit_size(decoder: Decoder, data) -> int:
    """The record size of a format 1-2 unit's EVTS chunk. Units said no
    size: every record was as long as the unit's largest probe's, except
    the generic engine's after a grow, whose records drained after a larger
    probe joined had the size of an earlier probe. The unit's own size when
    its records read well, else the first of its probes' sizes that does:
    the chunk is whole records of it, each naming a probe that fits."""
    nbytes = memoryview(data).nbytes
    header = decoder.layout.header
    sizes = [decoder.layout.record_size] + sorted(
        {probe_record_size(p, header) for p in decoder.probes} - {decoder.layout.record_size})
    for size in sizes:
        if size > decoder.layout.record_size or nbytes % size:
            continue
        local = np.frombuffer(data, dtype=[("skip", "V16"), ("probe", "<u4"), ("rest", f"V{size - 20}")])["probe"]
        if not len(local) or (local < len(decoder.probes)).all() and all(
                probe_record_size(decoder.probes[i], header) <= size for i in np.unique(local).tolist()):
            return size
    raise ValueError(f"{nbytes} bytes of records of none of the unit's sizes")


def _readable() -> str:
    return ", ".join(str(v) for v in READABLE_VERSIONS)


def _probes_from_json(obj: dict, loads_probeset, source: str) -> tuple[list[int], ProbeSet]:
    """_probes_json read back: the ids and their probes, with the names' types."""
    ids = [int(i) for i in obj["ids"]]
    if not ids and obj["probeset"] == "":  # a session without probes (PROB)
        return [], ProbeSet(source)
    ps = loads_probeset(obj["probeset"], source=source)
    if len(ids) != len(ps.probes):
        raise ValueError(f"{len(ids)} probe ids for {len(ps.probes)} probes")
    kept = obj.get("fetch_types")
    if isinstance(kept, list) and len(kept) == len(ps.probes):
        ps = dataclasses.replace(ps, probes=tuple(with_fetch_types(p, t) for p, t in zip(ps.probes, kept)))
    members = obj.get("members")  # absent before wildcards
    if isinstance(members, list) and len(members) == len(ps.probes):
        ps = dataclasses.replace(ps, probes=tuple(_with_members(p, m) for p, m in zip(ps.probes, members)))
    return ids, ps


def _with_members(probe, members: object):
    """`probe` with the matches it ran with, where they read as a list of names."""
    if probe.target.is_wildcard and isinstance(members, list) and all(isinstance(m, str) for m in members):
        return dataclasses.replace(probe, members=tuple(members))
    return probe


def _probe_statuses(obj: dict, loads_probeset, path: str) -> dict[int, ProbeStatus]:
    """A PROB chunk's probes, by id, with the states they were recorded in."""
    ids, ps = _probes_from_json(obj, loads_probeset, f"{path}#probes")
    probes = ps.probes
    n = len(ids)
    states = _list_of(obj, "states", n, ProbeState.ATTACHED.value)
    reasons = _list_of(obj, "reasons", n, "")
    via = _list_of(obj, "via", n, "")
    return {i: ProbeStatus(i, p, ProbeState(str(s)), str(r), str(v))
            for i, p, s, r, v in zip(ids, probes, states, reasons, via)}


def _list_of(obj: dict, key: str, n: int, default) -> list:
    got = obj.get(key)
    return got if isinstance(got, list) and len(got) == n else [default] * n


def _json_object(body: bytes) -> dict:
    obj = json.loads(body)
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    return obj
