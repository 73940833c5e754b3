"""A list of things to tick that reads without colour, and whose cursor
stops on every row.

Textual's SelectionList draws every box as `▐X▌` and tells ticked from
unticked by colour alone: under NO_COLOR (or on a console with few
colours) the two are the same (issue #29). Here the box's middle says it:
`X` ticked, a blank not ticked, `-` for a row that cannot be ticked.

A disabled option is skipped by the cursor, so a user counting rows to
reach a member lands on another one. Rows that cannot be ticked are
therefore ordinary options, `locked`: the cursor stops on them, and
toggling one ticks nothing and posts `Refused` (the screen says why).
"""

from __future__ import annotations

from collections.abc import Collection

from rich.segment import Segment
from textual.message import Message
from textual.strip import Strip
from textual.widgets import Checkbox, SelectionList
from textual.widgets.option_list import OptionDoesNotExist
from textual.widgets.selection_list import Selection

TICKED, UNTICKED, LOCKED = "X", " ", "-"


class TickList(SelectionList[str]):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.locked: frozenset[str] = frozenset()

    class Refused(Message):
        """A row that cannot be ticked was toggled."""

        def __init__(self, tick_list: "TickList", value: str) -> None:
            super().__init__()
            self.tick_list = tick_list
            self.value = value

        @property
        def control(self) -> "TickList":
            return self.tick_list

    def set_locked(self, values: Collection[str]) -> None:
        self.locked = frozenset(values)
        self.refresh()

    def toggle(self, selection: Selection[str] | str) -> "TickList":
        value = selection.value if isinstance(selection, Selection) else selection
        if value in self.locked:
            self.post_message(self.Refused(self, value))
            return self
        return super().toggle(selection)

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        try:
            value = self.get_option_at_index(self.scroll_offset.y + y).value
        except OptionDoesNotExist:
            return strip
        segments = list(strip)
        # SelectionList draws ToggleButton's box (Checkbox is one): left, inner, right
        if len(segments) < 2 or segments[1].text != Checkbox.BUTTON_INNER:
            return strip  # not a row with a box (Textual drew something else)
        mark = LOCKED if value in self.locked else TICKED if value in self.selected else UNTICKED
        segments[1] = Segment(mark, segments[1].style)
        return Strip(segments, strip.cell_length)
