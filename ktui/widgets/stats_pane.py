"""Numbers for the probe under the table cursor: rate sparkline, the log2
latency histogram as bcc's funclatency prints it, errnos and top comms.
The pane takes focus (tab) and scrolls (arrows, page keys, Home/End, the
wheel), so the errnos and top comms under a tall histogram are always
reachable (issue 15: at 120x35 they were cut off, out of reach).
While the run-time statistics are on (`t`), the probe's own cost, with
what that measures and what it costs the machine.

With focus, up/down move a cursor over the lines that stand for events (an
errno, a top comm or cgroup, a top value, a histogram bucket) and Enter asks for a
drill-down on it (issue 14): the pane posts `Drill`, the screen filters the
event pane. Above the first such line and below the last, the arrows
scroll, so the head stays reachable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.geometry import Region
from textual.message import Message
from textual.widgets import Sparkline, Static

from ktui.lang.model import Kind
from ktui.pipeline.accounting import loss_lines
from ktui.pipeline.drilldown import Pick
from ktui.pipeline.format import format_count, format_cpu_share, format_latency
from ktui.pipeline.rates import ProbeCost, hist_lines
from ktui.pipeline.value_views import (COUNTERS, TITLES, counter_lines, next_view, pick_of, shown_view, view_lines,
                                       view_title, views_of)
from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus
from ktui.widgets.static_update import update_static
from ktui.widgets.value_view import ValueView, lines_text, tabs_text


@dataclass(frozen=True)
class ProbeView:
    """Everything the pane shows about one probe, at one stats tick."""

    status: ProbeStatus
    stats: ProbeStats | None
    rate: float | None
    history: tuple[float, ...]
    timed: bool = False  # the run-time statistics are on
    cost: ProbeCost | None = None  # over the last stats interval (needs two timed reads)


class StatsPane(VerticalScroll):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Up", show=False,
                tooltip="Cursor to the line above that stands for events (past the first: scroll)"),
        Binding("down", "cursor_down", "Down", show=False,
                tooltip="Cursor to the line below that stands for events (past the last: scroll)"),
        Binding("enter", "drill", "Drill down", id="drill",
                tooltip="Stats pane: show only the events behind the line under the cursor (a top comm, "
                        "an errno, a top value, a histogram bucket); esc clears"),
    ]
    DEFAULT_CSS = """
    StatsPane {
        border: round $border-blurred;
        border-title-color: $text-primary;
        padding: 0 1;
        &:focus { border: round $border; }
        & > Static { width: 100%; }
        & > .label { color: $text-muted; margin-top: 1; }
        & > Sparkline { height: 3; margin: 0 0; }
        & > Sparkline > .sparkline--max-color { color: $success; }
        & > Sparkline > .sparkline--min-color { color: $success 30%; }
    }
    """

    NO_PROBE = "No probe selected.\nPress a to add one, o to open a probe set."

    def __init__(self, *, id: str | None = None, symbolize=None, no_probe: str = NO_PROBE) -> None:
        """no_probe: what the pane says with no probe to show (a replay
        cannot add or open one)."""
        super().__init__(id=id)
        self.no_probe = no_probe
        self.symbolize = symbolize  # for the stacks view
        self.view: ProbeView | None = None
        self.wanted_view = COUNTERS  # `v` cycles it (pipeline.value_views)
        self._lines: list = []  # the body shown (counters or a view), pipeline.value_views lines
        self._picks: list[int] = []  # indexes of the lines that can be drilled into
        self._cursor = 0  # which of them the cursor is on
        self._cursor_pick: Pick | None = None  # ... and what it stood for: kept across updates

    class Drill(Message):
        """Enter on a line that stands for events."""

        def __init__(self, pick: Pick) -> None:
            super().__init__()
            self.pick = pick

    def compose(self) -> ComposeResult:
        yield Static(id="stats-head")
        yield Static(classes="label", id="rate-label")
        yield Sparkline([], id="rate-spark")
        yield Static(id="stats-tabs")
        yield Static(id="stats-body")
        yield ValueView(id="stats-values")

    def on_mount(self) -> None:
        self.border_title = "probe"
        self._render_view()

    def on_resize(self) -> None:
        self._render_view()  # the histogram bars follow the width

    def watch_show_vertical_scrollbar(self, shown: bool) -> None:
        # The scrollbar came (or went) once the body outgrew the pane: it
        # takes cells the histogram bars and the rows were sized without,
        # and a line that no longer fits wraps. Lay them out again (the body
        # only: the head and the rate do not depend on the width).
        self.call_after_refresh(self._relayout_body)

    def _relayout_body(self) -> None:
        if self.is_mounted and self.view is not None:
            self._render_values(self.view.status.probe, self.view.stats)

    def show(self, view: ProbeView | None) -> None:
        if view == self.view:
            return
        if view is None or self.view is None or view.status.probe_id != self.view.status.probe_id:
            self._cursor, self._cursor_pick = 0, None  # another probe: from its first line
        self.view = view
        self._render_view()

    def _render_view(self) -> None:
        if not self.is_mounted:
            return
        head = self.query_one("#stats-head", Static)
        label = self.query_one("#rate-label", Static)
        spark = self.query_one("#rate-spark", Sparkline)
        body = self.query_one("#stats-body", Static)
        view = self.view
        if view is None:
            self.border_title = "probe"
            update_static(head, self.no_probe)
            update_static(label, "")
            spark.data = []
            spark.display = False  # an empty sparkline still draws a row of bars
            update_static(body, "")
            self._render_values(None, None)
            return
        probe = view.status.probe
        self.border_title = Content(probe.name)
        update_static(head, _head(view))
        spark.display = True
        history = list(view.history)
        peak = max(history) if history else 0.0
        update_static(label, f"rate/s, last {len(history)} s (max {format_count(peak)})")
        spark.data = history
        self._render_values(probe, view.stats)

    def next_view(self) -> str:
        """Switch to the selected probe's next view; returns its title."""
        if self.view is not None:
            probe = self.view.status.probe
            self.wanted_view = next_view(shown_view(self.wanted_view, probe), probe)
        self._cursor, self._cursor_pick = 0, None  # another view: from its first line
        self._render_view()
        # the view bar to the top: in a short pane (80x24) the view starts
        # below what fits, under the probe's head and its rate sparkline
        self.call_after_refresh(self._view_to_top)
        return view_title(self.wanted_view, self.view.status.probe) if self.view is not None else TITLES[self.wanted_view]

    def _view_to_top(self) -> None:
        tabs = self.query_one("#stats-tabs", Static)
        if tabs.display:
            self.scroll_to_widget(tabs, top=True, animate=False)

    def _render_values(self, probe, stats) -> None:
        """The view bar, and the counters body or the aggregation view."""
        tabs = self.query_one("#stats-tabs", Static)
        shown = COUNTERS if probe is None else shown_view(self.wanted_view, probe)
        has_views = probe is not None and len(views_of(probe)) > 1
        tabs.display = has_views
        update_static(tabs, tabs_text(shown, probe) if has_views else "")
        if probe is None:
            self._lines = []
        elif shown == COUNTERS:
            self._lines = counter_lines(probe, stats, self._bar_width(self.view),
                                        room=self.scrollable_content_region.width or None)
        else:
            width = max(8, min(40, (self.scrollable_content_region.width or 40) - 30))
            self._lines = view_lines(shown, probe, stats, width, self.symbolize,
                                     room=self.scrollable_content_region.width or None)
        had_picks = bool(self._picks)
        self._picks = [i for i, line in enumerate(self._lines) if pick_of(line) is not None]
        if had_picks != bool(self._picks) and self.has_focus:
            self.refresh_bindings()  # Enter (drill down) comes or goes in the footer
        self._place_cursor()
        self._draw_lines()

    def _body_widget(self) -> Static:
        """The widget the lines are drawn in: the counters body or the view."""
        shown_counters = self.query_one("#stats-body", Static).display
        return self.query_one("#stats-body" if shown_counters else "#stats-values", Static)

    def _draw_lines(self, focused: bool | None = None) -> None:
        """focused: whether the pane has focus (on_focus runs before
        has_focus says so); None: ask has_focus."""
        focused = self.has_focus if focused is None else focused
        body = self.query_one("#stats-body", Static)
        values = self.query_one("#stats-values", ValueView)
        probe = self.view.status.probe if self.view is not None else None
        counters = probe is None or shown_view(self.wanted_view, probe) == COUNTERS
        cursor = self._picks[self._cursor] if self._picks and focused else None
        body.display = counters
        update_static(body, lines_text(self._lines, cursor) if counters else "")
        values.show(None if counters else self._lines, cursor)

    # ------------------------------------------------------------ drill-down cursor

    def _place_cursor(self) -> None:
        """Keep the cursor on the line of the same pick when the numbers
        move it; else on the same place, within the lines there are."""
        picks = [pick_of(self._lines[i]) for i in self._picks]
        if self._cursor_pick in picks:
            self._cursor = picks.index(self._cursor_pick)
        self._cursor = max(0, min(self._cursor, len(picks) - 1))
        self._cursor_pick = picks[self._cursor] if picks else None

    @property
    def cursor_pick(self) -> Pick | None:
        """What Enter would drill down to."""
        return self._cursor_pick if self._picks else None

    def _move(self, step: int) -> None:
        target = self._cursor + step
        if not self._picks or not 0 <= target < len(self._picks):
            # past the first or the last line with events: scroll, to the head and the notes
            (self.scroll_up if step < 0 else self.scroll_down)(animate=False)
            return
        self._cursor = target
        self._cursor_pick = pick_of(self._lines[self._picks[target]])
        self._draw_lines()
        self.call_after_refresh(self._scroll_to_cursor)

    def _scroll_to_cursor(self) -> None:
        if not self._picks:
            return
        body = self._body_widget()
        y = body.virtual_region.y + self._picks[self._cursor]
        self.scroll_to_region(Region(0, y, 1, 1), animate=False, immediate=True, force=True)

    def action_cursor_up(self) -> None:
        self._move(-1)

    def action_cursor_down(self) -> None:
        self._move(1)

    def action_drill(self) -> None:
        pick = self.cursor_pick
        if pick is not None:
            self.post_message(self.Drill(pick))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "drill":
            return bool(self._picks)
        return True

    def on_focus(self) -> None:
        self._draw_lines(focused=True)  # the cursor shows while the pane has focus
        self.call_after_refresh(self._scroll_to_cursor)

    def on_blur(self) -> None:
        self._draw_lines(focused=False)

    def _bar_width(self, view: ProbeView) -> int:
        stats = view.stats
        if stats is None or not any(stats.hist):
            return 0
        sample = hist_lines(stats.hist, bar_width=1)
        fixed = len(sample[1]) - 1
        width = self.scrollable_content_region.width or 40
        return max(4, min(40, width - fixed))


def _head(view: ProbeView) -> Text:
    status, probe = view.status, view.status.probe
    text = Text()
    text.append(probe.spec_text, "bold")
    if probe.filter is not None:
        text.append(f"\nif {probe.filter}", "italic")
    state = status.state
    style = {ProbeState.ATTACHED: "green", ProbeState.FAILED: "red bold"}.get(state, "dim")
    text.append("\n" + state.value, style)
    if status.reason:
        text.append(f": {status.reason}", style)
    if state is ProbeState.LOADING and not status.counting:
        text.append(f" ({status.via}: not in the kernel until its program is loaded; counts nothing yet)", style)
    if view.stats is not None:
        s = view.stats
        rate = "-" if view.rate is None else format_count(view.rate)
        text.append(f"\nhits {format_count(s.hits)}  rate {rate}/s  emitted {format_count(s.emitted)}  lost {format_count(s.lost)}")
        for line, style in loss_lines(s, probe.kind is Kind.RETURN, span=probe.since is not None):
            text.append("\n" + line, style)
        if s.counted_only:
            text.append(f"\n{format_count(s.counted_only)} hits counted while its program loaded (no events)", "dim")
    if not probe.emits_events:
        text.append("\nstats only: no fetches, no events streamed", "dim")
    if view.timed:
        text.append("\n" + cost_line(view.cost), "bold")
        text.append(f"\n{COST_NOTE}", "dim")
    return text


COST_NOTE = ("times its BPF program only, not the kprobe trap or return hook; "
             "slows every BPF program on this machine while on (t: off)")


def cost_line(cost: ProbeCost | None) -> str:
    """`cost 1.25us/hit  0.42% of a CPU`, or what is missing."""
    if cost is None:
        return "cost: measuring (two stats reads)"
    if cost.ns_per_hit is None:
        return "cost: no runs in the last interval"
    return f"cost {format_latency(cost.ns_per_hit)}/hit  {format_cpu_share(cost.cpu_percent)} of a CPU"
