"""One row per probe, updated in place: cells change, rows keep their place.

The table is rebuilt only when the set of probes changes (add, remove,
edit, open) or the width calls for other columns; every stats tick only
rewrites the cells whose text changed.

At narrow widths (issue 15: at 80 columns p50/p99 were cut off at the
edge) columns give way by priority, see `fit_columns`: errors, p99 and p50
go, the state and lost columns narrow, and the name, state, hits and rate of
every probe always show.

While the run-time statistics are on (the `t` key) two columns say what
each probe's own BPF program costs: time per hit and share of a CPU. They
are the first to give way, and are not there at all while timing is off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable

from ktui.lang.alternatives import table_name
from ktui.lang.model import Kind
from ktui.pipeline.accounting import errno_unchecked, uncounted
from ktui.pipeline.format import format_count, format_cpu_share, format_latency
from ktui.pipeline.rates import ProbeCost, error_count, percentile
from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus

# (key, header, width); the name column is sized to the names, see NAME_WIDTH
COLUMNS = (
    ("on", " ", 1),
    ("name", "probe", None),
    ("kind", "k", 1),
    ("state", "state", 22),
    ("hits", "hits", 8),
    ("rate", "rate/s", 8),
    ("cost", "ns/hit", 7),  # only while timed
    ("cpu", "cpu%", 6),  # only while timed
    ("lost", "lost", 8),
    ("p50", "p50", 7),
    ("p99", "p99", 7),
    ("errors", "errors", 7),
)
NAME_WIDTH = (12, 40)  # min, max (unless the table has room to spare)
STATE_WIDTH = (5, 22)  # min (the header), max (the same): sized to the states shown
# lost: 8 cells, wider when a row's "⚠ lost+N" needs it (a cut number would
# read as another number), up to "⚠ 12.35M+123.5k"; narrowed, it ends in …
LOST_WIDTH = (8, 15)
CELL_PADDING = 1  # DataTable's default, on each side of every column
# How the columns give way when the table is narrower than all of them, in
# order: (column, new width), None drops the column. Name, state, hits and
# rate stay (the selected probe's numbers when the stats pane is folded).
NARROWING = (
    ("name", 28),  # long specs as names: cut, they end in an ellipsis
    ("state", 18),
    ("cpu", None),
    ("cost", None),
    ("errors", None),
    ("p99", None),
    ("p50", None),
    ("state", 14),
    ("lost", 6),
    ("name", 20),
    ("state", 10),
    ("name", 14),
    ("lost", None),
    ("kind", None),
    ("state", 8),
)
KEYS = tuple(key for key, _, _ in COLUMNS)
TRACING_VIAS = ("fentry", "fexit")
TIMED_ONLY = ("cost", "cpu")
MARKERS = {
    ProbeState.ATTACHED: Text("●", "green"),
    ProbeState.PENDING: Text("◌", "yellow"),
    ProbeState.LOADING: Text("◐", "yellow"),
    ProbeState.OFF: Text("○", "dim"),
    ProbeState.FAILED: Text("✗", "red bold"),
}
STATE_STYLES = {ProbeState.ATTACHED: "green", ProbeState.PENDING: "yellow", ProbeState.LOADING: "yellow",
                ProbeState.OFF: "dim", ProbeState.FAILED: "red"}

# the kind column: c a call, r a return (latency), t a tracepoint
KIND_STYLES = {Kind.CALL: "cyan", Kind.RETURN: "magenta", Kind.TRACEPOINT: "green", Kind.USDT: "yellow"}


@dataclass(frozen=True)
class ProbeLine:
    """What one row shows at one tick."""

    status: ProbeStatus
    stats: ProbeStats | None = None
    rate: float | None = None
    losing: bool = False  # lost grew since the previous stats read
    cost: ProbeCost | None = None  # its own cost over the last stats interval (timed)

    @property
    def probe_id(self) -> int:
        return self.status.probe_id


def fit_columns(name_width: int, available: int, timed: bool = False,
                state_width: int = STATE_WIDTH[1], lost_width: int = LOST_WIDTH[0]) -> tuple[tuple[str, str, int], ...]:
    """The columns to show, as (key, header, width), in a table `available`
    cells wide: all of them when they fit, else narrowed by NARROWING until
    they do (or nothing is left to give). The cost columns only when `timed`.
    `name_width`, `state_width`, `lost_width`: the longest name, state and
    lost cell shown (lost is as wide as its longest cell). The
    columns start at most NAME_WIDTH and STATE_WIDTH wide (`attached` needs
    8 cells, not the 22 a reason may take); what is left over then goes
    back to a cut name, then a cut state (a wide table shows them whole)."""
    widths = {key: min(name_width, NAME_WIDTH[1]) if width is None else width for key, _, width in COLUMNS
              if timed or key not in TIMED_ONLY}
    widths["state"] = max(STATE_WIDTH[0], min(STATE_WIDTH[1], state_width))
    widths["lost"] = max(LOST_WIDTH[0], min(LOST_WIDTH[1], lost_width))
    # One cell stays free: columns that fill the width exactly make
    # Textual's DataTable (8.2.8) show a horizontal scrollbar, a blank row.
    available -= 1

    def total() -> int:
        return sum(w + 2 * CELL_PADDING for w in widths.values())

    for key, width in NARROWING:
        if total() <= available:
            break
        if key not in widths:
            continue
        if width is None:
            del widths[key]
        else:
            widths[key] = min(widths[key], width)
    for key, whole in (("name", name_width), ("state", state_width)):
        spare = available - total()
        if spare > 0 and key in widths and widths[key] < whole:
            widths[key] += min(spare, whole - widths[key])
    return tuple((key, header, widths[key]) for key, header, _ in COLUMNS if key in widths)


def _right(text: str, style: str = "") -> Text:
    return Text(text, style, justify="right")


def state_text(status: ProbeStatus) -> str:
    # fentry/fexit named beside the state ("attached fexit"); a kprobe, the
    # default, says nothing more: the 80-column layout stays as it was
    via = f" {status.via}" if status.via in TRACING_VIAS else ""
    return status.state.value + via + (f": {status.reason}" if status.reason else "")


def lost_text(stats: ProbeStats, losing: bool = False) -> str:
    """The lost cell: `⚠ 12+3`, lost events, then (after +) the hits the
    kernel saw but could not count (pipeline.accounting.uncounted)."""
    missed = uncounted(stats)
    return ("⚠ " if losing else "") + format_count(stats.lost) + (f"+{format_count(missed)}" if missed else "")


def row_cells(line: ProbeLine) -> tuple[Text, ...]:
    status, stats = line.status, line.stats
    probe = status.probe
    state = state_text(status)
    cells = [
        MARKERS[status.state],
        Text(table_name(probe, stats.member_count if stats is not None else 0), "bold" if status.state is ProbeState.ATTACHED else "", overflow="ellipsis", no_wrap=True),
        Text(probe.kind.value, KIND_STYLES[probe.kind]),
        Text(state, STATE_STYLES[status.state], overflow="ellipsis", no_wrap=True),
    ]
    if stats is None:
        return tuple(cells + [_right("-", "dim")] * 8)
    cost = line.cost
    # what the kernel saw but could not count (returns missed or unpaired,
    # runs skipped for recursion, nested hits dropped) sits beside lost
    # events: "lost+N", which is which in the stats pane
    lost = lost_text(stats, line.losing)
    missed = uncounted(stats)
    cells += [
        _right(format_count(stats.hits)),
        _right("-" if line.rate is None else format_count(line.rate)),
        _right("-" if cost is None else format_latency(cost.ns_per_hit), "dim" if cost is None else ""),
        _right("-" if cost is None else format_cpu_share(cost.cpu_percent), "dim" if cost is None else ""),
        Text(lost, "yellow bold" if line.losing else ("yellow" if stats.lost or missed else "dim"),
             justify="right", overflow="ellipsis", no_wrap=True),
    ]
    if probe.timed:  # a return probe, a span: latencies (and a return probe's errors)
        errors = error_count(stats)
        cells += [
            _right(format_latency(percentile(stats.hist, 50)) if any(stats.hist) else "-"),
            _right(format_latency(percentile(stats.hist, 99)) if any(stats.hist) else "-"),
            # "-": its errnos are not counted (a void function, say), not none
            _right("") if probe.since is not None else
            _right("-", "dim") if errno_unchecked(stats) else _right(format_count(errors), "red" if errors else "dim"),
        ]
    else:
        cells += [_right("")] * 3
    return tuple(cells)


class ProbeTable(DataTable):
    # Home/End move the cursor to the first/last probe (DataTable's own
    # home/end scroll sideways only, and ctrl+home is not what users try).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "scroll_top", "First probe", show=False),
        Binding("end", "scroll_bottom", "Last probe", show=False),
    ]
    DEFAULT_CSS = """
    ProbeTable {
        height: auto;
        max-height: 40%;
        border: round $border-blurred;
        border-title-color: $text-primary;
        &:focus { border: round $border; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False, cursor_foreground_priority="renderable")
        self._ids: list[int] = []
        self._cells: dict[int, tuple[Text, ...]] = {}
        self._name_width = 0
        self._state_width = STATE_WIDTH[1]
        self._lost_width = LOST_WIDTH[0]
        self._columns: tuple[tuple[str, str, int], ...] = ()
        self._lines: list[ProbeLine] = []
        self._timed = False  # the cost columns are there
        self._sort: tuple[str, str] | None = None  # (column, arrow) the rows are sorted by

    class MarkClicked(Message):
        """A click on a probe's on/off mark: switch that probe."""

        def __init__(self, probe_id: int) -> None:
            super().__init__()
            self.probe_id = probe_id

    def on_mount(self) -> None:
        self.border_title = "probes"

    def on_click(self, event: events.Click) -> None:
        """A click on the mark in the first column switches the probe (the
        screen does it as space would); a click anywhere else on a row
        selects it, as DataTable does."""
        meta = event.style.meta
        row, column = meta.get("row"), meta.get("column")
        if not isinstance(row, int) or not isinstance(column, int) or not 0 <= row < len(self._ids):
            return
        if 0 <= column < len(self._columns) and self._columns[column][0] == "on":
            self.move_cursor(row=row, animate=False)
            self.post_message(self.MarkClicked(self._ids[row]))
            # DataTable's own click would also "select" a highlighted row
            # (Enter: go to the events): a switch is all this click asks.
            event.prevent_default()
            event.stop()

    def on_resize(self) -> None:
        if self._lines and self._fit(self._name_width, self._timed) != self._columns:
            self._rebuild(self._lines, self._name_width, self._state_width)

    @property
    def shown_columns(self) -> tuple[str, ...]:
        """The keys of the columns on screen now."""
        return tuple(key for key, _, _ in self._columns)

    def _available(self) -> int:
        # The border takes 2 cells; a vertical scrollbar, when the rows do
        # not fit, takes its own width (the region below excludes it).
        return self.scrollable_content_region.width if self.size.width else 10_000

    def _fit(self, name_width: int, timed: bool) -> tuple[tuple[str, str, int], ...]:
        return fit_columns(name_width, self._available(), timed, self._state_width, self._lost_width)

    @property
    def selected_id(self) -> int | None:
        if not self._ids or not 0 <= self.cursor_row < len(self._ids):
            return None
        return self._ids[self.cursor_row]

    @property
    def probe_ids(self) -> list[int]:
        return list(self._ids)

    def select(self, probe_id: int) -> None:
        if probe_id in self._ids:
            self.move_cursor(row=self._ids.index(probe_id))

    def set_lines(self, lines: list[ProbeLine], timed: bool = False, sort: tuple[str, str] | None = None) -> None:
        """`timed`: the run-time statistics are on (the cost columns show).
        `sort`: (column key, arrow) the lines are sorted by, marked in its
        header and the title."""
        self._timed = timed
        ids = [line.probe_id for line in lines]
        names = [len(table_name(line.status.probe, line.stats.member_count if line.stats is not None else 0))
                 for line in lines]
        width = max(NAME_WIDTH[0], max(names, default=0))  # (fit_columns caps it while short of room)
        state_width = max((len(state_text(line.status)) for line in lines), default=0)
        lost_width = max((len(lost_text(line.stats, line.losing)) for line in lines if line.stats is not None),
                         default=0)
        if ids == self._ids:  # only grows while the probes stay (⚠ comes and goes: no rebuild each tick)
            lost_width = max(lost_width, self._lost_width)
        self._lines = list(lines)
        resorted = sort != self._sort
        self._sort = sort
        if (resorted or ids != self._ids or width != self._name_width or state_width != self._state_width
                or fit_columns(width, self._available(), timed, state_width, lost_width) != self._columns):
            self._lost_width = lost_width
            self._rebuild(lines, width, state_width)
            return
        shown = set(self.shown_columns)
        for line in lines:
            new = row_cells(line)
            old = self._cells[line.probe_id]
            for key, before, after in zip(KEYS, old, new):
                if before != after and key in shown:
                    self.update_cell(str(line.probe_id), key, after)
            self._cells[line.probe_id] = new

    def _rebuild(self, lines: list[ProbeLine], name_width: int, state_width: int) -> None:
        keep = self.selected_id
        old_row = self.cursor_row
        self.clear(columns=True)
        self._state_width = state_width
        self._columns = self._fit(name_width, self._timed)
        for key, header, width in self._columns:
            if self._sort is not None and key == self._sort[0]:
                header = _marked(header, self._sort[1], width)
            label = Text(header, justify="right") if width > 1 and key not in ("name", "state") else header
            self.add_column(label, key=key, width=width)
        self._ids = [line.probe_id for line in lines]
        self._name_width = name_width
        self._cells = {}
        shown = [KEYS.index(key) for key in self.shown_columns]
        for line in lines:
            cells = row_cells(line)
            self._cells[line.probe_id] = cells
            self.add_row(*(cells[i] for i in shown), key=str(line.probe_id))
        if keep in self._ids:
            self.move_cursor(row=self._ids.index(keep), animate=False)
        elif self._ids:
            self.move_cursor(row=min(old_row, len(self._ids) - 1), animate=False)
        self.border_title = f"probes {len(self._ids)}" + (
            f", by {self._sort[0]} {self._sort[1]}" if self._sort is not None else "")


def _marked(header: str, arrow: str, width: int) -> str:
    """A sorted column's header with its arrow, within the column's width."""
    if width <= 1:
        return arrow
    return (header[: width - 1] if len(header) >= width else header) + arrow
