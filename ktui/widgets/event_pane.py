"""The event pane: filter input, the event log, and the honest meter.

When more events arrive in one poll than the window holds, only the newest
window's worth is decoded; the rest are counted as skipped and the meter
says so, every figure per second ("showing 2.0k of 100.0k events/s, 98.0k
skipped/s"; issue 15: the skipped count was the total since start, beside
per-second figures).
"""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Input

from ktui.lang.model import Probe
from ktui.pipeline.format import Symbolize, format_count
from ktui.record.feed import EventBatch
from ktui.widgets.event_log import EventLog
from ktui.widgets.event_window import DEFAULT_WINDOW


class EventPane(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close_filter", "Close filter", show=False),
    ]
    DEFAULT_CSS = """
    EventPane {
        border: round $border-blurred;
        border-title-color: $text-primary;
        border-subtitle-color: $text-muted;
        &:focus-within { border: round $border; }
        &.-paused { border-title-color: $text-warning; }
        #event-filter { display: none; border: none; height: 1; padding: 0 1; }
        #event-filter.-open { display: block; }
    }
    """

    def __init__(self, window: int = DEFAULT_WINDOW, symbolize: Symbolize | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.window_size = window
        self.symbolize = symbolize
        self.paused = False
        self.replay = False  # pausing stops a replay's playback: nothing arrives meanwhile
        self.skipped = 0  # never decoded: more arrived in one poll than the window holds
        self.not_shown_paused = 0  # arrived while paused
        self._arrived = 0  # since the last meter update
        self._shown = 0
        self._skipped = 0
        self._meter = ""

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter: probe, comm, pid, any text of the line", id="event-filter")
        yield EventLog(self.window_size, self.symbolize, id="event-log")

    def on_mount(self) -> None:
        self._update_title()

    @property
    def log_view(self) -> EventLog:
        return self.query_one(EventLog)

    @property
    def filter_input(self) -> Input:
        return self.query_one("#event-filter", Input)

    # ------------------------------------------------------------ data

    def ingest(self, batch: EventBatch, probes: dict[int, Probe]) -> None:
        """Take one drained batch: decode at most a window's worth, the newest."""
        total = len(batch)
        if not total:
            return
        self._arrived += total
        if self.paused:
            self.not_shown_paused += total
            self._update_title()
            return
        take = min(total, self.window_size)
        self.skipped += total - take
        self._skipped += total - take
        self._shown += take
        self.log_view.add_batch(batch, total - take, total, probes)

    def update_meter(self, seconds: float) -> None:
        """Turn the counts since the last call into per-second figures."""
        if seconds <= 0:
            return
        arrived, shown, skipped = self._arrived / seconds, self._shown / seconds, self._skipped / seconds
        self._arrived = self._shown = self._skipped = 0
        if skipped or shown < arrived and not self.paused:
            self._meter = (
                f"showing {format_count(shown)} of {format_count(arrived)} events/s, "
                f"{format_count(skipped)} skipped/s"
            )
        else:
            self._meter = f"{format_count(arrived)} events/s"
        self._update_title()

    def end_meter(self, text: str) -> None:
        """No more events will come (a replay's end): the meter says so
        instead of its last per-second figure."""
        if self._meter != text:
            self._meter = text
            self._arrived = self._shown = self._skipped = 0
            self._update_title()

    # ------------------------------------------------------------ controls

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        self.set_class(paused, "-paused")
        self._update_title()

    def clear(self) -> None:
        self.log_view.clear()
        self._update_title()

    def open_filter(self) -> None:
        self.filter_input.add_class("-open")
        self.filter_input.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Esc with no filter typed goes on to the screen (it clears a drill-down)
        if action == "close_filter":
            return self.filter_input.has_class("-open") or bool(self.filter_input.value)
        return True

    @property
    def drill(self):
        return self.log_view.window.drill

    def set_drill(self, drill) -> None:
        """Show only the events of a drill-down (pipeline.drilldown), or all."""
        self.log_view.set_drill(drill)
        self._update_title()

    def action_close_filter(self) -> None:
        """Escape: drop the filter and go back to the events."""
        self.filter_input.value = ""
        self.filter_input.remove_class("-open")
        self.log_view.focus()

    @on(Input.Changed, "#event-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.log_view.set_filter(event.value)
        self._update_title()

    @on(Input.Submitted, "#event-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        """Enter keeps the filter and moves to the rows."""
        if not event.value.strip():
            self.filter_input.remove_class("-open")
        self.log_view.focus()

    def _update_title(self) -> None:
        """Title and meter change at most once a second (or on a key): a
        border repaint per poll would cost more than the rows themselves."""
        log = self.log_view
        title = "events"
        if log.window.drill is not None:
            title += f", drill-down: {log.window.drill.what}"
        if log.window.filter:
            title += f", filter: {log.window.filter!r}"
        if self.paused and self.replay:
            title += " ⏸ paused (p: play)"
        elif self.paused:
            # Events that arrive while paused are not decoded, so they
            # cannot be matched against a filter: with one, the count says
            # it is of every event (issue 15: it read as matching ones).
            scope = " (unfiltered)" if log.window.filtered else ""
            title += f" ⏸ paused, {format_count(self.not_shown_paused)} not shown{scope} (p: follow)"
        # Content, not str: a filter like "[x]" must not be read as markup
        self.border_title = Content(title)
        self.border_subtitle = Content(self._meter)
