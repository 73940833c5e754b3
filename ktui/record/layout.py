"""The binary layout of an event record, shared by codegen and the decoders.

A record is a 56-byte header (`HEADER`), then a payload laid out per probe. Each
probe's records are exactly as long as its own payload (`record_size_of`:
a multiple of 8; none for a probe that fetches nothing), so a buffer holds records of several
sizes; a decoder takes the records of one size with one numpy structured
view (`sized_layout`). Integers take an 8-byte slot (sign- or zero-extended in the kernel
to the fetch type's width), strings a STRING_MAX-byte slot. Builtins (comm,
pid, tid, cpu) are read from the header and take no payload space.

The header is the one definition of both sides: the compiled programs'
struct and the generic program's (generic/abi.py) are written from
HEADER_FIELDS. Headers are versioned: `HEADER_V1` (48 bytes, no cgroup)
is what records were before every event carried its task's cgroup id;
recordings of formats 1-3 hold it, and are decoded with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ktui.lang.limits import STRING_MAX, TASK_COMM_LEN
from ktui.lang.model import HEADER_BUILTINS, STRING_TYPES, Builtin, Fetch, Probe

MIN_PAYLOAD = 8  # a unit-wide layout's payload (the C struct's array) is never empty
# (name, numpy format, C declaration) in record order. Fields are only ever
# added at the end (a new Header): `probe` stays at byte 16, where readers
# of any version find it (recording_reader._old_unit_size).
HEADER_FIELDS_V1 = (
    ("ts", "<u8", "u64 ts;"),
    ("latency", "<u8", "u64 latency;"),
    ("probe", "<u4", "u32 probe;"),
    ("cpu", "<u4", "u32 cpu;"),
    ("pid", "<u4", "u32 pid;"),
    ("tid", "<u4", "u32 tid;"),
    ("comm", f"S{TASK_COMM_LEN}", f"char comm[{TASK_COMM_LEN}];"),
)
# the task's cgroup v2 id (its directory's inode), on every event: for a
# span's end, its start's (the task the span is charged to)
HEADER_FIELDS = HEADER_FIELDS_V1 + (("cgroup", "<u8", "u64 cgroup;"),)


@dataclass(frozen=True)
class Header:
    """One version of the record header."""

    fields: tuple[tuple[str, str, str], ...]

    @property
    def size(self) -> int:
        return sum(_format_size(fmt) for _, fmt, _ in self.fields)

    @property
    def has_cgroup(self) -> bool:
        return any(name == "cgroup" for name, _, _ in self.fields)


def _format_size(fmt: str) -> int:
    return int(fmt[2:]) if fmt[0] == "<" else int(fmt[1:])


HEADER = Header(HEADER_FIELDS)  # what ktui's programs write now
HEADER_V1 = Header(HEADER_FIELDS_V1)  # before the cgroup: recordings of formats 1-3
HEADER_SIZE = HEADER.size


@dataclass(frozen=True)
class Slot:
    """Where one fetch's value lives in a record."""

    fetch: Fetch
    # "uint", "sint", "str", "header", "func" (a wildcard's member, by its
    # index), "cgroup" (the task's cgroup id: record.cgroups names it)
    kind: str
    offset: int  # byte offset within the payload (or header field name for "header")
    header_field: str = ""

    @property
    def numpy_format(self) -> str:
        return {"uint": "<u8", "sint": "<i8", "str": f"S{STRING_MAX}", "func": "<u8",
                "cgroup": "<u8"}[self.kind]


def slot_kind(fetch: Fetch) -> str:
    if isinstance(fetch.expr, Builtin):
        if fetch.expr.name in HEADER_BUILTINS:
            return "header"
        return "cgroup" if fetch.expr.name == "cgroup" else "func"
    t = fetch.effective_type
    if t in STRING_TYPES:
        return "str"
    if t.startswith("s"):
        return "sint"
    return "uint"  # u*, x*, symbol


@dataclass(frozen=True)
class ProbeLayout:
    slots: tuple[Slot, ...]
    payload_size: int


def probe_layout(probe: Probe) -> ProbeLayout:
    slots = []
    offset = 0
    for fetch in probe.fetches:
        kind = slot_kind(fetch)
        if kind == "header":
            slots.append(Slot(fetch, kind, 0, header_field=fetch.expr.name))
            continue
        slots.append(Slot(fetch, kind, offset))
        offset += STRING_MAX if kind == "str" else 8
    return ProbeLayout(tuple(slots), offset)


@dataclass(frozen=True)
class RecordLayout:
    """Layout of every record of one compiled probe set."""

    probes: tuple[ProbeLayout, ...]
    payload_size: int
    header: Header = HEADER  # HEADER_V1 for an old recording's records

    @property
    def record_size(self) -> int:
        return self.header.size + self.payload_size


def record_layout(probes: tuple[Probe, ...] | list[Probe], header: Header = HEADER) -> RecordLayout:
    layouts = tuple(probe_layout(p) for p in probes)
    payload = max((lay.payload_size for lay in layouts), default=0)
    payload = max(MIN_PAYLOAD, (payload + 7) // 8 * 8)  # keep records 8-byte aligned
    return RecordLayout(layouts, payload, header)


def record_size_of(layout: ProbeLayout, header: Header = HEADER) -> int:
    """How long each of a probe's records is: the header and its own payload
    (both engines write exactly these bytes: a probe that fetches nothing
    writes the header alone)."""
    return header.size + (layout.payload_size + 7) // 8 * 8


def probe_record_size(probe: Probe, header: Header = HEADER) -> int:
    return record_size_of(probe_layout(probe), header)


def sized_layout(probes: tuple[Probe, ...] | list[Probe], record_size: int,
                 header: Header = HEADER) -> RecordLayout:
    """The layout of records of `record_size` bytes from any of `probes`.
    A probe whose payload does not fit in them never wrote one: it gets no
    slots here (its records are decoded by the layout of their own size)."""
    payload = record_size - header.size
    if payload < 0 or record_size % 8:
        raise ValueError(f"no record of {record_size} bytes")
    layouts = []
    for probe in probes:
        one = probe_layout(probe)
        layouts.append(one if one.payload_size <= payload else ProbeLayout((), 0))
    return RecordLayout(tuple(layouts), payload, header)
