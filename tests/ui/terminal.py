"""What a terminal shows, frame by frame, for a pilot test.

Textual's headless driver writes nothing, and a screenshot renders the
screen afresh: neither shows what a user saw in one frame (a line drawn
with an older layout, rows left from before). `Terminal` takes every update
the app would write (`App._display`: the compositor's full and partial
updates) and applies it to a grid of cells, as a terminal does."""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import ControlType


class Terminal:
    def __init__(self, app, size: tuple[int, int], on_frame) -> None:
        """`on_frame(terminal)` runs after each update the app writes."""
        width, height = size
        self.cells = [[" "] * width for _ in range(height)]
        self.frames = 0
        self._app = app
        self._on_frame = on_frame
        original = app._display

        def display(screen, renderable) -> None:
            original(screen, renderable)
            if renderable is None or app._batch_count:
                return  # what the app itself would not write now
            self._apply(renderable)
            self.frames += 1
            on_frame(self)

        app._display = display

    def _apply(self, renderable) -> None:
        console = self._app.console
        x = y = 0
        for segment in renderable.__rich_console__(console, console.options):
            if segment.control:
                for control in segment.control:
                    if control[0] == ControlType.CURSOR_MOVE_TO:
                        x, y = control[1], control[2]
                continue
            if segment.text == "\n":
                continue  # every line starts with a move
            for char in segment.text:
                if 0 <= y < len(self.cells) and 0 <= x < len(self.cells[0]):
                    self.cells[y][x] = char
                x += cell_len(char)

    def lines(self, region) -> list[str]:
        """The text of a screen region (a widget's `content_region`), line by line."""
        return ["".join(self.cells[y][region.x:region.x + region.width])
                for y in range(region.y, region.y + region.height)]
