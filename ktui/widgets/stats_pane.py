"""Numbers for the probe under the table cursor: rate sparkline, the log2
latency histogram as bcc's funclatency prints it, errnos and top comms.
The pane takes focus (tab) and scrolls (arrows, page keys, Home/End, the
wheel), so the errnos and top comms under a tall histogram are always
reachable (issue 15: at 120x35 they were cut off, out of reach).
While the run-time statistics are on (`t`), the probe's own cost, with
what that measures and what it costs the machine."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Sparkline, Static

from ktui.lang.model import Kind
from ktui.pipeline.format import errno_name, format_count, format_cpu_share, format_latency, printable
from ktui.pipeline.rates import ProbeCost, error_count, hist_lines, percentile
from ktui.pipeline.value_views import COUNTERS, TITLES, next_view, shown_view, views_of
from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus
from ktui.widgets.value_view import ValueView, tabs_text

TOP_N = 6


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

    def __init__(self, *, id: str | None = None, symbolize=None) -> None:
        super().__init__(id=id)
        self.symbolize = symbolize  # for the stacks view
        self.view: ProbeView | None = None
        self.wanted_view = COUNTERS  # `v` cycles it (pipeline.value_views)

    def compose(self) -> ComposeResult:
        yield Static(id="stats-head")
        yield Static(classes="label", id="rate-label")
        yield Sparkline([], id="rate-spark")
        yield Static(id="stats-tabs")
        yield Static(id="stats-body")
        values = ValueView(id="stats-values")
        values.symbolize = self.symbolize
        yield values

    def on_mount(self) -> None:
        self.border_title = "probe"
        self._render_view()

    def on_resize(self) -> None:
        self._render_view()  # the histogram bars follow the width

    def show(self, view: ProbeView | None) -> None:
        if view == self.view:
            return
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
            head.update("No probe selected.\nPress a to add one, o to open a probe set.")
            label.update("")
            spark.data = []
            body.update("")
            self._render_values(None, None)
            return
        probe = view.status.probe
        self.border_title = Content(probe.name)
        head.update(_head(view))
        history = list(view.history)
        peak = max(history) if history else 0.0
        label.update(f"rate/s, last {len(history)} s (max {format_count(peak)})")
        spark.data = history
        body.update(_body(view, self._bar_width(view)))
        self._render_values(probe, view.stats)

    def next_view(self) -> str:
        """Switch to the selected probe's next view; returns its title."""
        if self.view is not None:
            probe = self.view.status.probe
            self.wanted_view = next_view(shown_view(self.wanted_view, probe), probe)
        self._render_view()
        return TITLES[self.wanted_view]

    def _render_values(self, probe, stats) -> None:
        """The view bar, and the aggregation view in place of the body."""
        tabs = self.query_one("#stats-tabs", Static)
        values = self.query_one("#stats-values", ValueView)
        shown = COUNTERS if probe is None else shown_view(self.wanted_view, probe)
        has_views = probe is not None and len(views_of(probe)) > 1
        tabs.display = has_views
        tabs.update(tabs_text(shown, probe) if has_views else "")
        self.query_one("#stats-body", Static).display = shown == COUNTERS
        width = max(8, min(40, (self.scrollable_content_region.width or 40) - 30))
        values.show(shown, probe, stats, width)

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
        for line, style in miss_lines(s):
            text.append("\n" + line, style)
        if s.counted_only:
            text.append(f"\n{format_count(s.counted_only)} hits counted while its program loaded (no events)", "dim")
    if not probe.emits_events:
        text.append("\nstats only: no fetches, no events streamed", "dim")
    if view.timed:
        text.append("\n" + cost_line(view.cost), "bold")
        text.append(f"\n{COST_NOTE}", "dim")
    return text


def miss_lines(s: ProbeStats) -> list[tuple[str, str]]:
    """What the kernel dropped without running the probe, with what to do:
    a kretprobe out of instances misses the longest calls, so latency reads
    low unless it is said."""
    out = []
    if s.maxactive:
        if s.missed_returns:
            out.append((f"{format_count(s.missed_returns)} returns missed (maxactive {s.maxactive}): "
                        "raise maxactive: in the probe set", "yellow bold"))
        else:
            out.append((f"0 returns missed (maxactive {s.maxactive})", "dim"))
    if s.recursion_misses:
        out.append((f"{format_count(s.recursion_misses)} runs missed (recursion)", "yellow"))
    return out


COST_NOTE = ("times its BPF program only, not the kprobe trap or return hook; "
             "slows every BPF program on this machine while on (t: off)")


def cost_line(cost: ProbeCost | None) -> str:
    """`cost 1.25us/hit  0.42% of a CPU`, or what is missing."""
    if cost is None:
        return "cost: measuring (two stats reads)"
    if cost.ns_per_hit is None:
        return "cost: no runs in the last interval"
    return f"cost {format_latency(cost.ns_per_hit)}/hit  {format_cpu_share(cost.cpu_percent)} of a CPU"


def _body(view: ProbeView, bar_width: int) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    stats = view.stats
    if stats is None:
        return text
    if view.status.probe.kind is Kind.RETURN:
        p50, p99 = percentile(stats.hist, 50), percentile(stats.hist, 99)
        text.append(f"latency  p50 {format_latency(p50)}  p99 {format_latency(p99)}\n", "bold")
        lines = hist_lines(stats.hist, bar_width=bar_width) if bar_width else []
        text.append("\n".join(lines) if lines else "no returns yet", "" if lines else "dim")
        text.append("\n\n")
        errors = error_count(stats)
        share = f" ({100 * errors / stats.hits:.1f}% of returns)" if stats.hits else ""
        text.append(f"errors {format_count(errors)}{share}\n", "bold")
        for code, count in stats.errnos[:TOP_N]:
            text.append(f"  {errno_name(code):<12} {-abs(code):>5}  {format_count(count):>8}\n", "red")
        text.append("\n")
    text.append("top comms\n", "bold")
    for comm, count in stats.top_comms[:TOP_N]:
        text.append(f"  {printable(comm):<16} {format_count(count):>8}\n")
    if not stats.top_comms:
        text.append("  none yet\n", "dim")
    text.rstrip()
    return text
