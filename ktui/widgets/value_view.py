"""The stats pane's aggregation views (value histogram, top values, top
stacks): draws the lines `pipeline.value_views` makes. The pane shows this
instead of its counters body while one of those views is chosen (`v`)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ktui.lang.model import Probe
from ktui.pipeline.value_views import COUNTERS, view_lines, view_tabs
from ktui.record.feed import ProbeStats
from ktui.widgets.static_update import update_static


def lines_text(lines) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    for i, (line, style) in enumerate(lines):
        if i:
            text.append("\n")
        text.append(line, style)
    return text


def tabs_text(view: str, probe: Probe) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    for part, style in view_tabs(view, probe):
        text.append(part, style)
    text.append("   v: next view", "dim")
    return text


class ValueView(Static):
    """One aggregation view of the selected probe; hidden on counters."""

    symbolize = None  # addr -> "func+0x10", for stacks (the pane's owner sets it)

    def show(self, view: str, probe: Probe | None, stats: ProbeStats | None, bar_width: int) -> None:
        self.display = probe is not None and view != COUNTERS
        if probe is None or view == COUNTERS:
            update_static(self, "")
            return
        update_static(self, lines_text(view_lines(view, probe, stats, bar_width, self.symbolize)))
