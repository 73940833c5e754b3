"""The stats pane's aggregation views (value histogram, top values, top
stacks): draws the lines `pipeline.value_views` makes. The pane shows this
instead of its counters body while one of those views is chosen (`v`)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ktui.lang.model import Probe
from ktui.pipeline.value_views import view_tabs
from ktui.widgets.static_update import update_static


def lines_text(lines, cursor: int | None = None) -> Text:
    """The lines as one Text; line `cursor` (the drill-down cursor, while
    the pane has focus) drawn reversed."""
    text = Text(no_wrap=True, overflow="ellipsis")
    for i, line in enumerate(lines):
        if i:
            text.append("\n")
        text.append(line[0], line[1])
        if i == cursor:
            text.stylize("reverse", len(text) - len(line[0]), len(text))
    return text


def tabs_text(view: str, probe: Probe) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    for part, style in view_tabs(view, probe):
        text.append(part, style)
    text.append("   v: next view", "dim")
    return text


class ValueView(Static):
    """One aggregation view of the selected probe; hidden on counters."""

    def show(self, lines, cursor: int | None = None) -> None:
        """lines: pipeline.value_views' lines; None hides the view."""
        self.display = lines is not None
        update_static(self, "" if lines is None else lines_text(lines, cursor))
