"""A line-API view of the event window: draws only the visible lines.

Toolong's approach: the widget owns no child widgets per event; it renders
the rows in view from a small cache of strips, so a window of thousands of
rows costs the same to draw as a screenful.

Lines fit the pane's width (event_line.choose_layout): the probe and its
values come before the cpu and the timestamp's precision, and a cut value
ends in an ellipsis. Enter shows every field of an event.
"""

from __future__ import annotations

import re
from typing import ClassVar, Iterable

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ktui.lang.model import Probe
from ktui.pipeline.format import Symbolize
from ktui.record.feed import Event, EventBatch
from ktui.widgets.event_line import MIN_DETAILS, LineLayout, choose_layout, cut_time, fit, fit_cgroup
from ktui.widgets.event_window import DEFAULT_WINDOW, EventRow, EventWindow, line_text

_ERRNO = re.compile(r"\(E[A-Z0-9]+\)")
# Column widths never shrink while rows live, so lines do not jump sideways;
# they are capped so one long comm or name cannot push the values away.
# (a cgroup's path is longer than a comm: a wide pane shows most of them whole)
_MAX_TASK, _MAX_NAME, _MAX_CGROUP = 24, 24, 48
WHEEL_LINES = 3  # rows per wheel notch, as terminals scroll text


class EventLog(ScrollView, can_focus=True):
    """The event rows; a cursor row for the detail screen; follows the tail
    while the cursor sits on the last row."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select", "Detail", id="event-detail", tooltip="Every field of the event under the cursor"),
        Binding("up,k", "cursor_up", "Up", show=False),
        Binding("down,j", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home,g", "first", "First", show=False),
        Binding("end,G", "last", "Last", show=False, tooltip="Last row: follow new events again"),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "event-log--time",
        "event-log--task",
        "event-log--cgroup",
        "event-log--probe",
        "event-log--error",
        "event-log--cursor",
    }
    DEFAULT_CSS = """
    EventLog {
        background: $surface;
        color: $foreground;
        overflow-x: hidden;
        overflow-y: scroll;
        & > .event-log--time { color: $text-muted; }
        & > .event-log--task { color: $text-secondary; }
        & > .event-log--cgroup { color: $text-muted; }
        & > .event-log--probe { color: $text-accent; }
        & > .event-log--error { color: $text-error; text-style: bold; }
        & > .event-log--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
        }
        &:focus {
            background-tint: $foreground 5%;
            & > .event-log--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
    }
    """

    class Selected(Message):
        """Enter (or a double click) on a row."""

        def __init__(self, row: EventRow) -> None:
            super().__init__()
            self.row = row

    def __init__(
        self,
        window: int = DEFAULT_WINDOW,
        symbolize: Symbolize | None = None,
        *,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.window = EventWindow(window, symbolize)
        self.cursor = -1  # index into window.view; -1 when empty
        self._widths = [0, 3, 0, 0, 0, 0]  # time, cpu, task, cgroup, name, details (up to MIN_DETAILS)
        # the cgroups of the rows fitted so far, up to two: two say the rows
        # come from several cgroups (event_line: the column is then kept);
        # like the widths it is never forgotten while rows live
        self._cgroups: set[str] = set()
        self._width = 0  # the pane's width the cached lines were fitted to
        self._layout = LineLayout()
        self._cache: LRUCache[tuple[int, bool, bool], Strip] = LRUCache(512)
        self._styles: tuple[Style, Style] | None = None  # base and cursor

    # ------------------------------------------------------------ data

    def add_events(self, events: Iterable[Event], probes: dict[int, Probe]) -> None:
        was_at_end = self.cursor >= len(self.window) - 1
        self._added(was_at_end, *self.window.append(events, probes))

    def add_batch(self, batch: EventBatch, start: int, stop: int, probes: dict[int, Probe]) -> None:
        """Events [start, stop) of a batch; decoded when drawn (event_window)."""
        was_at_end = self.cursor >= len(self.window) - 1
        self._added(was_at_end, *self.window.append_batch(batch, start, stop, probes))

    def _added(self, was_at_end: bool, added: int, dropped: int) -> None:
        if not added:
            return
        if was_at_end:
            self.cursor = len(self.window) - 1
        else:
            self.cursor = max(0, self.cursor - dropped)
        self._update_virtual_size()
        if not was_at_end and dropped:
            # keep the rows the user is reading where they are on screen
            self.scroll_to(y=max(0, self.scroll_y - dropped), animate=False, immediate=True, force=True)
        self.refresh()

    def set_filter(self, text: str) -> None:
        self.window.set_filter(text)
        self.cursor = len(self.window) - 1
        self._after_reset()

    def set_drill(self, drill) -> None:
        """A drill-down from the stats pane (pipeline.drilldown), or None."""
        self.window.set_drill(drill)
        self.cursor = len(self.window) - 1
        self._after_reset()

    def clear(self) -> None:
        self.window.clear()
        self.cursor = -1
        self._after_reset()

    def _after_reset(self) -> None:
        self._cache.clear()
        self._update_virtual_size()
        self.refresh()

    @property
    def selected(self) -> EventRow | None:
        if 0 <= self.cursor < len(self.window):
            return self.window.view[self.cursor]
        return None

    def lines(self) -> list[str]:
        """The text of every row in view (tests, copying)."""
        return [line_text(self.window.columns(r)) for r in self.window.view]

    def _update_virtual_size(self) -> None:
        self.virtual_size = Size(0, len(self.window))  # lines fit the width: no horizontal scroll
        if self.cursor == len(self.window) - 1:
            # Follow the tail now (only after the next layout left the view
            # a row short now and then: a screen taken in between, or a
            # dialog opened, showed it so), and again after the layout in
            # case the pane's size changed with it.
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True, force=True)
            self.scroll_end(animate=False, x_axis=False, force=True)

    # ------------------------------------------------------------ cursor

    def _move(self, index: int) -> None:
        if not len(self.window):
            return
        self.cursor = max(0, min(index, len(self.window) - 1))
        self.scroll_to_region_of(self.cursor)
        self.refresh()

    def scroll_to_region_of(self, index: int) -> None:
        height = self.scrollable_content_region.height
        if index < self.scroll_y:
            self.scroll_to(y=index, animate=False, immediate=True, force=True)
        elif index >= self.scroll_y + height:
            self.scroll_to(y=index - height + 1, animate=False, immediate=True, force=True)

    def action_cursor_up(self) -> None:
        self._move(self.cursor - 1)

    def action_cursor_down(self) -> None:
        self._move(self.cursor + 1)

    def action_page_up(self) -> None:
        self._move(self.cursor - max(1, self.scrollable_content_region.height - 1))

    def action_page_down(self) -> None:
        self._move(self.cursor + max(1, self.scrollable_content_region.height - 1))

    def action_first(self) -> None:
        self._move(0)

    def action_last(self) -> None:
        self._move(len(self.window) - 1)

    def action_select(self) -> None:
        row = self.selected
        if row is not None:
            self.post_message(self.Selected(row))

    def on_click(self, event: events.Click) -> None:
        index = int(self.scroll_y) + event.y
        if index < len(self.window):
            self._move(index)
            if event.chain == 2:
                self.action_select()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._wheel(-WHEEL_LINES)
        event.prevent_default()
        event.stop()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._wheel(WHEEL_LINES)
        event.prevent_default()
        event.stop()

    def _wheel(self, lines: int) -> None:
        """Scroll the rows and keep the cursor on a row in view: scrolled
        up, the cursor leaves the last row, so new events no longer pull the
        view back to the tail (Textual's own wheel scroll was undone by the
        next poll); scrolled to the bottom, it follows again."""
        count, height = len(self.window), max(1, self.scrollable_content_region.height)
        if not count:
            return
        bottom = max(0, count - height)
        top = max(0, min(int(self.scroll_y) + lines, bottom))
        if lines > 0 and top == bottom:
            self.cursor = count - 1
        else:
            self.cursor = max(top, min(self.cursor, top + height - 1, count - 1))
        self.scroll_to(y=top, animate=False, immediate=True, force=True)
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        # The pane got shorter or taller (`s` folds the stats under the
        # events, the window was resized): a log that follows its tail keeps
        # the newest row in view. Before, it kept its old offset, rows short
        # of the tail until new events came, and a screen taken meanwhile
        # showed wherever a pending scroll had got to (a flaky snapshot).
        if len(self.window) and self.cursor == len(self.window) - 1:
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True, force=True)

    def on_focus(self) -> None:
        self._cache.clear()

    def on_blur(self) -> None:
        self._cache.clear()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._styles = None

    def _base_style(self) -> Style:
        # rich_style walks the ancestors: once per style change, not per line
        if self._styles is None:
            self._styles = (self.rich_style, self.get_component_rich_style("event-log--cursor"))
        return self._styles[0]

    # ------------------------------------------------------------ drawing

    def render_lines(self, crop: Region) -> list[Strip]:
        """Before any line of a frame is drawn, the columns grow for every
        row in view: grown while the frame was being drawn, the rows above
        had the old layout and the rows below the new one (issues 28, 29:
        one frame that showed lines which did not belong together)."""
        self._fit_rows_in_view()
        return super().render_lines(crop)

    def _fit_rows_in_view(self) -> None:
        width = self.scrollable_content_region.width
        grown = width != self._width
        self._width = width
        top = int(self.scroll_y)
        for index in range(max(0, top), min(top + self.scrollable_content_region.height, len(self.window))):
            grown = self._grow_widths(self.window.columns(self.window.view[index])) or grown
        if grown:
            self._relayout()
            self.refresh()  # every line again, those outside this crop too

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if width != self._width:
            self._width = width
            self._relayout()
        base = self._base_style()
        if not 0 <= index < len(self.window):
            return Strip.blank(width, base)
        row = self.window.view[index]
        is_cursor = index == self.cursor
        strip = self._row_strip(row, is_cursor, base)
        pad = base + self._styles[1] if is_cursor else base
        return strip.crop_extend(scroll_x, scroll_x + width, pad).apply_offsets(scroll_x, index)

    def _row_strip(self, row: EventRow, is_cursor: bool, base: Style) -> Strip:
        key = (row.seq, is_cursor, self.has_focus)
        strip = self._cache.get(key)
        if strip is not None:
            return strip
        columns = self.window.columns(row)
        if self._grow_widths(columns):
            # a row not in view when the frame began (render_lines): the
            # rows already drawn used narrower columns, draw them again
            self._relayout()
            self.call_later(self.refresh)
        time, cpu, task, cgroup, name, details = columns
        layout, w_time = self._layout, self._widths[0] - self._layout.time_cut
        style = self.get_component_rich_style
        text = Text(style=base, no_wrap=True, end="")
        text.append(cut_time(time, layout.time_cut).rjust(w_time) + " ", style("event-log--time"))
        if layout.cpu:
            text.append(cpu + " ", style("event-log--time"))
        text.append(fit(task, layout.task_width) + " ", style("event-log--task"))
        if layout.cgroup_width:
            text.append(fit_cgroup(cgroup, layout.cgroup_width) + " ", style("event-log--cgroup"))
        text.append(fit(name, layout.name_width) + " ", style("event-log--probe"))
        offset = len(text)
        text.append(details)
        error = style("event-log--error")
        for match in _ERRNO.finditer(details):
            text.stylize(error, offset + match.start(), offset + match.end())
        if self._width and cell_len(text.plain) > self._width:
            text.truncate(self._width, overflow="ellipsis")  # a cut value says so
        if is_cursor:
            text.stylize(style("event-log--cursor"))
        strip = Strip(text.render(self.app.console), cell_len(text.plain))
        self._cache[key] = strip
        return strip

    def _relayout(self) -> None:
        """Choose the columns again for the current width and column widths."""
        w_time, _, w_task, w_cgroup, w_name, w_details = self._widths
        self._layout = choose_layout(w_time, w_task, w_name, self._width or 10_000, w_details,
                                     w_cgroup, len(self._cgroups) > 1)
        self._cache.clear()

    def _grow_widths(self, columns: tuple[str, ...]) -> bool:
        caps = (len(columns[0]), 3, _MAX_TASK, _MAX_CGROUP, _MAX_NAME, MIN_DETAILS)
        grown = False
        for i in (0, 2, 3, 4, 5):
            wanted = min(len(columns[i]), caps[i])
            if wanted > self._widths[i]:
                self._widths[i] = wanted
                grown = True
        if len(self._cgroups) < 2 and columns[3] not in self._cgroups:
            self._cgroups.add(columns[3])
            grown = grown or len(self._cgroups) == 2  # the rows differ now: lay out again
        return grown
