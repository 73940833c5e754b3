"""One row per probe, updated in place: cells change, rows keep their place.

The table is rebuilt only when the set of probes changes (add, remove,
edit, open); every stats tick only rewrites the cells whose text changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import DataTable

from ktui.lang.model import Kind
from ktui.pipeline.format import format_count, format_latency
from ktui.pipeline.rates import error_count, percentile
from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus

# (key, header, width); the name column is sized to the names, see NAME_WIDTH
COLUMNS = (
    ("on", " ", 1),
    ("name", "probe", None),
    ("kind", "k", 1),
    ("state", "state", 22),
    ("hits", "hits", 8),
    ("rate", "rate/s", 8),
    ("lost", "lost", 8),
    ("p50", "p50", 7),
    ("p99", "p99", 7),
    ("errors", "errors", 7),
)
NAME_WIDTH = (12, 40)  # min, max
MARKERS = {
    ProbeState.ATTACHED: Text("●", "green"),
    ProbeState.PENDING: Text("◌", "yellow"),
    ProbeState.LOADING: Text("◐", "yellow"),
    ProbeState.OFF: Text("○", "dim"),
    ProbeState.FAILED: Text("✗", "red bold"),
}
STATE_STYLES = {ProbeState.ATTACHED: "green", ProbeState.PENDING: "yellow", ProbeState.LOADING: "yellow",
                ProbeState.OFF: "dim", ProbeState.FAILED: "red"}


@dataclass(frozen=True)
class ProbeLine:
    """What one row shows at one tick."""

    status: ProbeStatus
    stats: ProbeStats | None = None
    rate: float | None = None
    losing: bool = False  # lost grew since the previous stats read

    @property
    def probe_id(self) -> int:
        return self.status.probe_id


def _right(text: str, style: str = "") -> Text:
    return Text(text, style, justify="right")


def row_cells(line: ProbeLine) -> tuple[Text, ...]:
    status, stats = line.status, line.stats
    probe = status.probe
    state = status.state.value + (f": {status.reason}" if status.reason else "")
    cells = [
        MARKERS[status.state],
        Text(probe.name, "bold" if status.state is ProbeState.ATTACHED else ""),
        Text(probe.kind.value, "magenta" if probe.kind is Kind.RETURN else "cyan"),
        Text(state, STATE_STYLES[status.state], overflow="ellipsis", no_wrap=True),
    ]
    if stats is None:
        return tuple(cells + [_right("-", "dim")] * 6)
    cells += [
        _right(format_count(stats.hits)),
        _right("-" if line.rate is None else format_count(line.rate)),
        _right(("⚠ " if line.losing else "") + format_count(stats.lost), "yellow bold" if line.losing else ("yellow" if stats.lost else "dim")),
    ]
    if probe.kind is Kind.RETURN:
        errors = error_count(stats)
        cells += [
            _right(format_latency(percentile(stats.hist, 50)) if any(stats.hist) else "-"),
            _right(format_latency(percentile(stats.hist, 99)) if any(stats.hist) else "-"),
            _right(format_count(errors), "red" if errors else "dim"),
        ]
    else:
        cells += [_right("")] * 3
    return tuple(cells)


class ProbeTable(DataTable):
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

    def on_mount(self) -> None:
        self.border_title = "probes"

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

    def set_lines(self, lines: list[ProbeLine]) -> None:
        ids = [line.probe_id for line in lines]
        names = [len(line.status.probe.name) for line in lines]
        width = max(NAME_WIDTH[0], min(NAME_WIDTH[1], max(names, default=0)))
        if ids != self._ids or width != self._name_width:
            self._rebuild(lines, width)
            return
        keys = [c[0] for c in COLUMNS]
        for line in lines:
            new = row_cells(line)
            old = self._cells[line.probe_id]
            for key, before, after in zip(keys, old, new):
                if before != after:
                    self.update_cell(str(line.probe_id), key, after)
            self._cells[line.probe_id] = new

    def _rebuild(self, lines: list[ProbeLine], name_width: int) -> None:
        keep = self.selected_id
        old_row = self.cursor_row
        self.clear(columns=True)
        for key, header, width in COLUMNS:
            label = Text(header, justify="right") if width and width > 1 and key not in ("state",) else header
            self.add_column(label, key=key, width=name_width if width is None else width)
        self._ids = [line.probe_id for line in lines]
        self._name_width = name_width
        self._cells = {}
        for line in lines:
            cells = row_cells(line)
            self._cells[line.probe_id] = cells
            self.add_row(*cells, key=str(line.probe_id))
        if keep in self._ids:
            self.move_cursor(row=self._ids.index(keep), animate=False)
        elif self._ids:
            self.move_cursor(row=min(old_row, len(self._ids) - 1), animate=False)
        self.border_title = f"probes {len(self._ids)}"
