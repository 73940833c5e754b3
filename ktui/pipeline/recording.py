"""Recordings: a session's raw record batches in a self-describing file.

NDJSON per event cannot keep up with a kernel flood; raw batches can (one
write per drained batch). The file is a sequence of chunks, flushed as they
are written, so a recording cut off mid-write still replays up to its last
complete chunk.

    magic  b"KTUIREC\\x01"
    chunk  <4s kind> <u32 length> <length bytes of body>
      HEAD  JSON: format version, created, kernel, host name (since format 2's
            later writers; absent before), probe set name
      UNIT  JSON: unit number, probe ids, the probes as a YAML probe set, the
            size of its records (since format 3; before, every record of a
            unit was as long as its largest probe's: `record_layout`), a
            wildcard's matches (`members`, since wildcards: its events'
            func is a place among them)
      PROB  JSON: every probe of the session (ids, a YAML probe set, names'
            types) with its state, as `ktui record` last saw them; written at
            the start and again when a state changes (since format 2's later
            writers; earlier readers skip it). A probe that never emitted an
            event (counting only, never matched, still loading at the end)
            has no UNIT: without PROB its counts replayed under no probe.
      EVTS  <u32 unit> raw fixed-size records of that unit (one batch)
      EVTM  records of several sizes as they arrived (one batch; format 3):
            <u32 parts> <u32 order width: 1 or 2 bytes>, per part
            <u32 unit> <u32 records>, then each record's part in arrival
            order (u8 or u16, padded to 8 bytes), then each part's records
      STAT  JSON: a stats snapshot (top_cgroups by path, since they were
            counted; a recording without them replays them as not kept)
      CGRP  JSON {"cgroups": {"<id>": "<path>"}}: the paths of cgroup ids
            the events that follow hold, in their headers (format 4) and
            cgroup fetches (each id once, when first named; since the
            cgroup fetch: a replay has no cgroup tree, or another
            machine's). An id never named replays as cgroup:<id>.
            count(cgroup) keys are in STAT by path already.
      END   empty: written by close(); a recording without it was cut off
      STAT/UNIT/PROB/CGRP may repeat; EVTS chunks follow their UNIT.

Format 4 records carry the task's cgroup id in their header (56 bytes,
record.layout.HEADER; every event's id is named in CGRP). Formats 1-3
have the 48-byte header before it (HEADER_V1): their events replay with
no cgroup. Format 3 keeps records exactly as long as their probe's fields (a unit per
record size, EVTM for batches of several sizes in arrival order). Format 2
keeps latency histograms of record.histogram's 65 slots. Format 1 (before
it) kept 64 slots with the same meaning (bcc's bpf_log2l): they are read
back padded to 65 (`histogram.fit`), so old recordings still replay. A
format 1 or 2 unit does not say its record size; a unit of the generic
engine could hold records shorter than its largest probe's (drained after
a larger probe joined), so the reader finds the size its records have
(`_old_unit_size`).

What a recording contains: kernel addresses and argument values the probes
fetched, process names and ids, strings read from kernel and user memory.
It is written with mode 0600, never through a symlink and only to a regular
file (never a device or FIFO), and never over an existing file unless asked.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import stat
import struct
import time
from typing import TYPE_CHECKING, BinaryIO, Mapping

from ktui.pipeline import members
from ktui.pipeline.accounting import COMM_EXACT
from ktui.lang.model import KtuiError, ProbeSet
from ktui.record.cgroups import unknown as unknown_cgroup
from ktui.record.feed import EventBatch, ProbeStats, ProbeStatus, StatsSnapshot
from ktui.record.histogram import fit

if TYPE_CHECKING:
    from ktui.record.decode import Decoder, RecordBatch

MAGIC = b"KTUIREC\x01"
FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
FIRST_WITH_CGROUP = 4  # the first format whose records have HEADER (the cgroup id)
_CHUNK = struct.Struct("<4sI")
_UNIT = struct.Struct("<I")
_MIXED = struct.Struct("<II")  # EVTM: parts, order width; then per part: unit, records
MAX_CHUNK = 256 << 20


class RecordingError(KtuiError):
    pass


class RecordingExists(RecordingError):
    """The output file exists and overwriting it was not asked for."""


def open_private(path: str, *, append: bool = False, overwrite: bool = True) -> BinaryIO:
    """Create a file only we can read, refusing symlinks and non-regular files.
    With `overwrite` False, an existing file is refused too (RecordingExists):
    O_EXCL decides, so a file that appears after a check cannot be clobbered."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    flags |= os.O_APPEND if append else os.O_TRUNC
    if not append and not overwrite:
        flags |= os.O_EXCL
    try:
        # O_NONBLOCK: opening a FIFO must fail (ENXIO), not wait for a reader.
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        problem = exc.errno
        if problem == errno.EEXIST:
            # O_EXCL fails with EEXIST whatever is there: say what it is.
            mode = _lstat_mode(path)
            if stat.S_ISLNK(mode):
                problem = errno.ELOOP
            elif not stat.S_ISREG(mode):
                problem = errno.ENXIO
            else:
                raise RecordingExists(f"{path}: already exists") from exc
        if problem == errno.ELOOP:  # the final component is a symlink
            raise RecordingError(f"{path}: is a symlink; refusing to write through it") from exc
        if problem == errno.ENXIO:
            raise RecordingError(f"{path}: not a regular file; refusing to write to it") from exc
        raise RecordingError(f"{path}: {exc.strerror}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RecordingError(f"{path}: not a regular file; refusing to write to it")
        os.set_blocking(fd, True)
        os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "wb", buffering=1 << 20)


def _lstat_mode(path: str) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return stat.S_IFREG  # gone again since open(): call it what open() said


class Recorder:
    """A collector sink that appends batches and stats to a recording."""

    def __init__(self, path: str, probeset: ProbeSet, *, overwrite: bool = False) -> None:
        """`overwrite`: replace an existing file (`ktui record --force`);
        by default an existing file is refused with RecordingExists."""
        self.path = path
        self.file = open_private(path, overwrite=overwrite)
        self._units: dict[int, int] = {}  # id(decoder) -> unit number
        self._probes_noted: object = None  # what the last PROB chunk said
        self._decoders: list[Decoder] = []  # keep them alive: id() must stay unique
        self._cgroups: set[int] = set()  # cgroup ids a CGRP chunk named
        self._next_unit = 0
        self.events = 0
        self.file.write(MAGIC)
        self._chunk(b"HEAD", json.dumps({
            "version": FORMAT_VERSION,
            "created": time.time(),
            "kernel": os.uname().release,
            "host": os.uname().nodename,  # a replay's header says where it was recorded
            "probeset": probeset.name,
        }).encode())
        self.file.flush()

    def _chunk(self, kind: bytes, body: bytes) -> None:
        self.file.write(_CHUNK.pack(kind, len(body)))
        self.file.write(body)

    def _unit_chunk(self, ids: list[int], probes: tuple, record_size: int) -> int:
        number, self._next_unit = self._next_unit, self._next_unit + 1
        self._chunk(b"UNIT", json.dumps({"unit": number, **_probes_json("unit", ids, probes),
                                         "record_size": record_size}).encode())
        return number

    def _unit(self, decoder: Decoder) -> int:
        key = id(decoder)
        if key not in self._units:
            self._units[key] = self._unit_chunk(list(decoder.probe_ids), decoder.probes,
                                                decoder.layout.record_size)
            self._decoders.append(decoder)
        return self._units[key]

    def note_probes(self, statuses: Mapping[int, ProbeStatus]) -> None:
        """A PROB chunk with every probe and its state, unless the last one
        said the same: the replay shows each probe, and its counts, even if
        it never emitted an event."""
        ordered = [statuses[k] for k in sorted(statuses)]
        said = [(st.probe_id, st.probe, st.state, st.reason, st.via) for st in ordered]
        if said == self._probes_noted:
            return
        self._probes_noted = said
        self._chunk(b"PROB", json.dumps({
            **_probes_json("probes", [st.probe_id for st in ordered], tuple(st.probe for st in ordered)),
            "states": [st.state.value for st in ordered],
            "reasons": [st.reason for st in ordered],
            "via": [st.via for st in ordered],
        }).encode())
        self.file.flush()

    def _name_cgroups(self, parts: list[RecordBatch]) -> None:
        """A CGRP chunk with the paths of the cgroup ids these records hold
        that no earlier chunk named. An id the namer does not know yet is
        asked again with the next batch (the live resolver walks the tree
        again at most once a second)."""
        named: dict[str, str] = {}
        for part in parts:
            name = part.decoder.cgroup_name
            for cgid in sorted(part.cgroup_ids() - self._cgroups) if name is not None else ():
                path = name(cgid)
                if path != unknown_cgroup(cgid):
                    named[str(cgid)] = path
                    self._cgroups.add(cgid)
        if named:
            self._chunk(b"CGRP", json.dumps({"cgroups": named}).encode())

    def on_batch(self, batch: EventBatch) -> None:
        # numpy and the decoders are first needed here, with the first batch:
        # `ktui record` makes its file before its session (a bad path fails
        # before any probe is attached), and a module import of them would put
        # numpy's 0.1-0.3 s (seconds in an emulated VM) before the attach.
        import numpy as np
        from ktui.record.decode import InterleavedBatch

        for part in _parts(batch):
            self._name_cgroups(part.parts if isinstance(part, InterleavedBatch) else [part])
            # The records' own memory goes to the file: no bytes object per
            # batch, no concatenation (a flood's batches are megabytes).
            # Straight to the fd, past the 1 MiB buffer (a flood's batch of a
            # few hundred kB would be copied into it first: 0.2 us an event
            # under emulation); what is buffered (UNIT) goes out before.
            if isinstance(part, InterleavedBatch):
                units = [self._unit(p.decoder) for p in part.parts]
                order = np.ascontiguousarray(part.order)
                head = _MIXED.pack(len(part.parts), order.dtype.itemsize) + b"".join(
                    _MIXED.pack(unit, len(p)) for unit, p in zip(units, part.parts))
                bodies = [order, b"\0" * (-order.nbytes % 8)] + [np.ascontiguousarray(p.records)
                                                                 for p in part.parts]
                kind = b"EVTM"
            else:
                head = _UNIT.pack(self._unit(part.decoder))
                bodies = [np.ascontiguousarray(part.records)]
                kind = b"EVTS"
            views = [memoryview(b).cast("B") for b in bodies]
            self.file.flush()
            _write_all(self.file.fileno(),
                       [_CHUNK.pack(kind, len(head) + sum(v.nbytes for v in views)) + head, *views])
            self.events += len(part)
        self.file.flush()

    def on_stats(self, stats: StatsSnapshot) -> None:
        self._chunk(b"STAT", json.dumps(stats_to_json(stats)).encode())
        self.file.flush()

    def close(self) -> None:
        if not self.file.closed:
            self._chunk(b"END ", b"")
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()


def _parts(batch: EventBatch):
    """The record batches of a batch, in order (other kinds hold no records)."""
    from ktui.record.decode import InterleavedBatch, MultiBatch, RecordBatch

    if isinstance(batch, MultiBatch):
        for part in batch.parts:
            yield from _parts(part)
    elif isinstance(batch, (RecordBatch, InterleavedBatch)) and len(batch):
        yield batch


def _write_all(fd: int, parts: list) -> None:
    """os.writev until every byte is written (a regular file may take less)."""
    views = [memoryview(p).cast("B") for p in parts]
    while views:
        done = os.writev(fd, views)
        while views and done >= views[0].nbytes:
            done -= views[0].nbytes
            views.pop(0)
        if views and done:
            views[0] = views[0][done:]


def stats_to_json(stats: StatsSnapshot) -> dict:
    return {
        "time": stats.time,
        "timed": stats.timed,
        "probes": {str(k): dataclasses.asdict(v) for k, v in stats.probes.items()},
    }


def aggregates_from_json(v: dict) -> dict:
    """hist/count/sum/stack fields (absent in recordings made before them)."""
    return {
        "value_hist": fit(v.get("value_hist", ())),
        "value_hist_sum": int(v.get("value_hist_sum", 0)),  # 0 in recordings made before it
        "top_values": tuple((tuple(k), int(c), int(s)) for k, c, s in v.get("top_values", ())),
        "key_hists": tuple((tuple(k), fit(h), int(s)) for k, h, s in v.get("key_hists", ())),
        "hist_keys": int(v.get("hist_keys", 0)),
        "value_keys": int(v.get("value_keys", 0)), "values_dropped": int(v.get("values_dropped", 0)),
        "value_sum": int(v.get("value_sum", 0)),
        "keys_dropped": int(v.get("keys_dropped", 0)),
        "keys_dropped_unknown": int(v.get("keys_dropped_unknown", 0)),
        # a user frame was named when it was read (it is text): kept as such
        "stacks": tuple((tuple(a if isinstance(a, str) else int(a) for a in f), int(n))
                        for f, n in v.get("stacks", ())),
        "stack_count": int(v.get("stack_count", 0)), "stacks_dropped": int(v.get("stacks_dropped", 0)),
    }


def uncounted_from_json(v: dict) -> dict:
    """Issue 28's counters and honesty marks. A recording made before them
    has none: its counters read 0 (not counted then), its errnos "" (how
    they were checked is not known), and its top comms exact only while
    no CPU can have counted past the exact first hits (then sampling, at a
    fixed stride, began)."""
    return {
        "unpaired": int(v.get("unpaired", 0)), "entries_unstored": int(v.get("entries_unstored", 0)),
        "nest_dropped": int(v.get("nest_dropped", 0)), "errnos_other": int(v.get("errnos_other", 0)),
        "errno_check": str(v.get("errno_check", "")),
        "top_comms_exact": bool(v.get("top_comms_exact", int(v["hits"]) <= COMM_EXACT)),
        # `within:` gates (absent before them)
        "gate_unkept": int(v.get("gate_unkept", 0)), "gate_unpaired": int(v.get("gate_unpaired", 0)),
        # spans (absent before them)
        **{k: int(v.get(k, 0)) for k in ("span_starts", "span_unkept", "span_replaced", "span_matched",
                                             "span_unmatched")},
    }


def cgroups_from_json(v: dict) -> dict:
    """Top cgroups, by path (STAT keeps paths, not ids: a replay has no
    cgroup tree to name ids by). A recording made before they were counted
    has none: not kept, rather than none hit."""
    if "top_cgroups" not in v:
        return {"top_cgroups": (), "top_cgroups_kept": False}
    return {"top_cgroups": tuple((str(a), int(b)) for a, b in v["top_cgroups"]),
            "top_cgroups_kept": bool(v.get("top_cgroups_kept", True))}


def stats_from_json(obj: dict) -> StatsSnapshot:
    probes = {}
    for key, v in obj.get("probes", {}).items():
        probes[int(key)] = ProbeStats(
            probe_id=int(v["probe_id"]), hits=int(v["hits"]), lost=int(v["lost"]),
            emitted=int(v["emitted"]), counted_only=int(v.get("counted_only", 0)), hist=fit(v["hist"]),
            # absent in recordings made before missed returns were counted
            missed_returns=int(v.get("missed_returns", 0)), maxactive=int(v.get("maxactive", 0)),
            recursion_misses=int(v.get("recursion_misses", 0)),
            errnos=tuple((int(a), int(b)) for a, b in v["errnos"]),
            top_comms=tuple((str(a), int(b)) for a, b in v["top_comms"]),
            **cgroups_from_json(v),
            run_ns=int(v.get("run_ns", 0)), run_count=int(v.get("run_count", 0)),
            latency_sum_ns=int(v.get("latency_sum_ns", 0)),  # absent before the kernel kept it
            **uncounted_from_json(v),
            **aggregates_from_json(v),
            **members.from_json(v),  # a wildcard's hits by function
        )
    return StatsSnapshot(float(obj.get("time", 0.0)), probes, timed=bool(obj.get("timed", False)))


def _probes_json(name: str, ids: list[int], probes: tuple) -> dict:
    """What a UNIT or PROB chunk says of its probes: ids, the probes as a
    YAML probe set, and the names' types from the kernel's BTF (the replay
    has no kernel to ask)."""
    from ktui.lang.bind import fetch_types
    from ktui.lang.probeset_write import dumps_probeset

    return {
        "ids": [int(i) for i in ids],
        "probeset": dumps_probeset(ProbeSet(name, probes=probes)) if probes else "",
        "fetch_types": [fetch_types(p) for p in probes],
        # a wildcard's matches as it ran: its events' func is a place among them
        "members": [list(p.members) if p.members is not None else None for p in probes],
    }
