"""Drill-down: a line of the stats pane chosen (a top comm or cgroup, an
errno, a top value, a histogram bucket) becomes a test on the selected probe's events, so
the event pane shows the events behind that number.

The counts come from the kernel; the events are what was streamed and
decoded (the event pane's window). So a drill-down tests decoded events
only, in the batch where they are decoded anyway: nothing more is decoded
and nothing more is kept (the pane's window stays its size).

An event is tested as the aggregation read the value: a `count(a3)` key is
a u64, a `hist(retval)` bucket an s64, so an event's value is first brought
to that type (width and sign). An event that carries the value narrower
than the aggregation (`a3:u32` against `count(a3)`) cannot be matched
exactly, and is refused with the reason, as is a probe whose events do not
carry the value at all, or a probe that emits no events (counting only).

No Textual or Rich here: the stats pane's lines carry a `Pick`, the screen
turns the chosen one into a `DrillDown` and gives it to the event window."""

from __future__ import annotations

from dataclasses import dataclass

from ktui.lang.bind import labelled_fetch
from ktui.lang.model import Builtin, Fetch, Probe, RetVal, positional
from ktui.pipeline.format import errno_name, format_latency, printable
from ktui.record.cgroups import short
from ktui.record.feed import Event
from ktui.record.histogram import slot_bounds

COMM, CGROUP, ERRNO, VALUE, BUCKET, LATENCY = "comm", "cgroup", "errno", "value", "bucket", "latency"
EVENT_FIELDS = ("comm", "pid", "tid", "cpu")  # every event carries these (Event's own fields)


@dataclass(frozen=True)
class Pick:
    """What a stats line stands for, if chosen: a comm (str), a cgroup (its
    path, as events carry it), an errno (its positive number), a top value's key (a tuple in `count:` order), or a
    histogram slot (the value histogram's, or the latency histogram's)."""

    kind: str  # COMM, CGROUP, ERRNO, VALUE, BUCKET, LATENCY
    value: object


class NotDrillable(Exception):
    """The events cannot say which of them a pick covers; str() says why."""


@dataclass(frozen=True)
class Test:
    """One test on an event: its `field` ("comm", "cgroup", "pid", "tid",
    "cpu", "latency", or the index of a fetched value) read as `type` ("" as it
    is) equals `equals`, or, with `slot`, falls in that log2 slot."""

    field: str | int
    equals: object = None
    slot: int | None = None
    type: str = ""

    def passes(self, event: Event) -> bool:
        if isinstance(self.field, int):
            if self.field >= len(event.values):
                return False
            value = event.values[self.field]
        elif self.field == "latency":
            value = event.latency_ns
        else:
            value = getattr(event, self.field)
        if isinstance(value, str) or self.field == "comm":
            return value == self.equals
        if not isinstance(value, int) or isinstance(value, bool):
            return False  # None: a return without its entry's time
        if self.type:
            value = as_type(value, self.type)
        if self.slot is not None:
            return 0 <= value < 1 << 64 and value.bit_length() == self.slot
        return value == self.equals


@dataclass(frozen=True)
class DrillDown:
    """The events of one probe that every test passes."""

    probe_id: int
    probe_name: str
    what: str  # `comm=bash`, `retval=-13 (EACCES)`, `a3 in [4096, 8192)`
    tests: tuple[Test, ...] = ()

    def matches(self, event: Event) -> bool:
        return event.probe_id == self.probe_id and all(t.passes(event) for t in self.tests)

    def describe(self) -> str:
        return f"drill-down: {self.probe_name} {self.what} (Esc clears)"


def width(type_: str) -> int | None:
    """Bits of an integer fetch type (`symbol` is an address); None for text."""
    if type_ == "symbol":
        return 64
    if type_[:1] in ("u", "s", "x") and type_[1:].isdigit():
        return int(type_[1:])
    return None


def as_type(value: int, type_: str) -> int:
    """`value` as the kernel stored it in `type_`: cut to its width, and
    negative when signed and its top bit is set (-1 as u64 is 2^64 - 1)."""
    bits = width(type_)
    if bits is None:
        return value
    value &= (1 << bits) - 1
    if type_.startswith("s") and value >> (bits - 1):
        value -= 1 << bits
    return value


def drill_down(probe_id: int, probe: Probe, pick: Pick) -> DrillDown:
    """The drill-down a pick on this probe's stats means; NotDrillable says
    why there is none (no events at all, or none carrying the value)."""
    if not probe.emits_events:
        raise NotDrillable(f"{probe.name} emits no events (counting only: no fetches), so there are no "
                           "events to show; its counts are in the stats pane")
    name = probe.name
    if pick.kind == COMM:
        comm = str(pick.value)
        return DrillDown(probe_id, name, f"comm={printable(comm)}", (Test("comm", comm),))
    if pick.kind == CGROUP:
        # the top cgroups and the events name a cgroup alike (its path, or
        # `cgroup:<id>` where none could be found), a span's by its start's task
        path = str(pick.value)
        return DrillDown(probe_id, name, f"cgroup={printable(short(path))}", (Test("cgroup", path),))
    if pick.kind == ERRNO:
        code = -abs(int(pick.value))  # type: ignore[call-overload]
        source = _source(probe, Fetch(RetVal()), "the return value")
        return DrillDown(probe_id, name, f"retval={code} ({errno_name(code)})", (Test(source, code, type="s64"),))
    if pick.kind == LATENCY:
        if not probe.timed:
            raise NotDrillable(f"{name} is neither a return probe nor a span: its events have no latency")
        slot = int(pick.value)  # type: ignore[call-overload]
        return DrillDown(probe_id, name, f"lat {_range(slot, format_latency)}", (Test("latency", slot=slot),))
    agg = probe.agg
    if pick.kind == BUCKET and agg is not None and agg.hist is not None and not agg.hist_keys:
        slot = int(pick.value)  # type: ignore[call-overload]
        source = _source(probe, agg.hist, str(agg.hist.expr))
        test = Test(source, slot=slot, type=agg.hist.effective_type)
        return DrillDown(probe_id, name, f"{agg.hist.expr} {_range(slot, str)}", (test,))
    if pick.kind == VALUE and agg is not None:
        key = tuple(pick.value)  # type: ignore[arg-type]
        tests, parts = [], []
        for fetch, value in zip(agg.key_fetches, key):
            source = _source(probe, fetch, str(fetch.expr))
            is_text = isinstance(value, str)
            tests.append(Test(source, value, type="" if is_text else fetch.effective_type))
            parts.append(f"{fetch.expr}={printable(value) if is_text else value}")
        return DrillDown(probe_id, name, " ".join(parts) or "(every event)", tuple(tests))
    raise NotDrillable(f"{name}: nothing to drill down to on that line")


def _range(slot: int, fmt) -> str:
    """`in [4096, 8192)` for a log2 slot; `= 0` for slot 0."""
    low, high = slot_bounds(slot)
    return f"= {fmt(0)}" if slot == 0 else f"in [{fmt(low)}, {fmt(high + 1)})"


def _plain(expr):
    """A fetch's expression as it reads the kernel: a name by what it is
    bound to (an aggregation's fetch is positional), else as written."""
    try:
        return positional(expr)
    except ValueError:  # a name not bound (a replay): compared as written
        return expr


def _source(probe: Probe, fetch: Fetch, what: str) -> str | int:
    """Where an event carries `fetch`'s value: one of its own fields, or
    the first fetched value that reads the same thing at least as wide."""
    expr = fetch.expr
    if isinstance(expr, Builtin) and expr.name in EVENT_FIELDS:
        return expr.name
    named = labelled_fetch(probe, fetch)
    if named is not None:  # a key naming a fetch's label (`count(dev)` of `dev=rq->part->bd_dev`): that fetch
        return next(index for index, own in enumerate(probe.fetches) if own is named)
    wanted = width(fetch.effective_type)
    narrower = None
    for index, own in enumerate(probe.fetches):
        if _plain(own.expr) != _plain(expr):
            continue
        have = width(own.effective_type)
        if have is None or wanted is None:
            continue
        if have >= wanted:
            return index
        narrower = own
    if narrower is not None:
        raise NotDrillable(f"{probe.name}'s events carry {what} as {narrower.effective_type}, narrower than the "
                           f"{fetch.effective_type} counted: fetch it as {fetch.effective_type} to drill down")
    raise NotDrillable(f"{probe.name}'s events do not carry {what}: add it to the probe's fetches to drill down")
