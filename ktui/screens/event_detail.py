"""Every field of one event: raw values beside their formatted form, and the
probe that produced it."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from ktui.pipeline.format import (
    Symbolize,
    fetch_pairs,
    format_latency,
    format_ts,
    printable,
)
from ktui.lang.alternatives import chosen_text
from ktui.lang.model import Fetch, positional
from ktui.record.cgroups import short as cgroup_short
from ktui.record.feed import ProbeState, ProbeStatus
from ktui.screens.modal import ModalFrame
from ktui.widgets.event_window import EventRow


def _raw(value: object) -> str:
    if isinstance(value, int):
        return f"{value} (0x{value & (1 << 64) - 1:x})" if value < 0 else f"{value} (0x{value:x})"
    return repr(value)


def _fetch_text(fetch: Fetch | None) -> str:
    """What was fetched, and for a name what it read in the kernel
    (`file->f_pos = +112(a1)`, from the kernel's BTF)."""
    if fetch is None:
        return "?"
    try:
        reads = positional(fetch.expr)
    except ValueError:  # a replay: the recording kept the types, not the offsets
        return str(fetch.expr)
    return str(fetch.expr) if reads == fetch.expr else f"{fetch.expr} = {reads}"


def _kind_text(probe, status: ProbeStatus | None) -> str:
    """`call (fentry)`: the kind, and what the probe runs on as the probe
    table says it (a return probe may run on fexit, a call on fentry). The
    mechanism is the session's choice, known once the probe attached."""
    kind = {"r": "return", "t": "tracepoint", "usdt": "usdt"}.get(probe.kind.value, "call")
    if status is None:
        return kind
    if status.via == kind:  # a tracepoint has one mechanism: "tracepoint (tracepoint)" says nothing more
        return kind
    if status.via:
        return f"{kind} ({status.via})"
    if status.state in (ProbeState.OFF, ProbeState.FAILED):
        return f"{kind} (not attached)"
    if status.state is ProbeState.PENDING:
        return f"{kind} (not attached yet)"
    return kind  # attached, by a feed that does not say how (an older recording)


def _context_text(context: str) -> str:
    if context == "task":
        return "task (process context)"
    return f"{context}: comm and pid are the task it interrupted"


def _cgroup_text(path: str) -> str:
    """The whole path (the event pane may shorten it), and the short form
    beside it where it has one: `system.slice/docker-<id>.scope  (docker:<12 hex>)`."""
    shown = cgroup_short(path)
    return printable(path) if shown == path else f"{printable(path)}  ({printable(shown)})"


def detail_tables(row: EventRow, status: ProbeStatus | None, symbolize: Symbolize | None) -> tuple[Table, Table]:
    event, probe = row.event, row.probe
    fields = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
    fields.add_column(style="bold")
    fields.add_column()
    fields.add_row("time", f"{format_ts(event.ts_ns)} s  ({event.ts_ns} ns, CLOCK_MONOTONIC)")
    fields.add_row("cpu", str(event.cpu))
    if event.context:
        fields.add_row("context", _context_text(event.context))
    fields.add_row("comm", printable(event.comm))
    fields.add_row("pid / tid", f"{event.pid} / {event.tid}")
    if event.cgroup:  # (a recording made before events carried it has none)
        fields.add_row("cgroup", _cgroup_text(event.cgroup))
    if event.latency_ns is not None:
        fields.add_row("latency", f"{format_latency(event.latency_ns)}  ({event.latency_ns} ns since entry)")
    fields.add_row("probe", f"#{event.probe_id}  {probe.name if probe else '(gone)'}")
    if probe is not None:
        fields.add_row("spec", probe.spec_text)
        if probe.target.alternatives:  # which of them this kernel runs
            fields.add_row("function", chosen_text(probe))
        fields.add_row("kind", _kind_text(probe, status))
        fields.add_row("filter", str(probe.filter) if probe.filter is not None else Text("none", "dim"))
    if status is not None:
        fields.add_row("state now", status.state.value + (f": {status.reason}" if status.reason else ""))

    values = Table(box=None, padding=(0, 2, 0, 0), header_style="bold")
    for header in ("name", "fetch", "type", "C type", "raw", "formatted"):
        values.add_column(header)
    fetches = probe.fetches if probe is not None else ()
    for i, ((name, text), raw) in enumerate(zip(fetch_pairs(probe, event.values, symbolize), event.values)):
        fetch = fetches[i] if i < len(fetches) else None
        values.add_row(
            name,
            _fetch_text(fetch),
            fetch.effective_type if fetch else "?",
            (fetch.ctype or "") if fetch else "",
            _raw(raw),
            text,
        )
    return fields, values


class EventDetailScreen(ModalFrame[None]):
    FRAME_ID = "detail"
    SCROLLS = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close", id="detail-close"),
        Binding("q,enter", "dismiss", "Close", show=False, id="detail-close-alt"),
    ]
    DEFAULT_CSS = """
    EventDetailScreen {
        & > #detail { width: 110; }
        & .section { margin-top: 1; text-style: bold; color: $text-primary; }
    }
    """

    def __init__(self, row: EventRow, status: ProbeStatus | None, symbolize: Symbolize | None = None) -> None:
        super().__init__()
        self.row = row
        self.status = status
        self.symbolize = symbolize

    def compose(self) -> ComposeResult:
        fields, values = detail_tables(self.row, self.status, self.symbolize)
        name = self.row.probe.name if self.row.probe else f"#{self.row.event.probe_id}"
        with self.frame(f"event: {name}"):
            yield Static(fields, id="fields")
            yield Static("values", classes="section")
            yield Static(values if self.row.event.values else Text("no fetched values", "dim"), id="values")
            yield self.keys_line("esc / q / enter: close")
