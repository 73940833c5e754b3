"""The frame every ktui modal screen draws in: a centred box with a round
border on $surface, its title in the border, a muted line of keys below.

The dialogs, the delete confirmation, the help and the event detail all
look alike because they are all this one class; a change of look is made
here once. A screen says only what differs: its frame's size in its own CSS
(the confirmation also its warning colour), and whether the content scrolls.
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

from rich.console import RenderableType
from textual.containers import Vertical, VerticalScroll
from textual.renderables.background_screen import BackgroundScreen
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static

from ktui.screens.modal_background import TintedBackground, TintedLines
from ktui.widgets.scrollbars import whole_cell_scrollbars

ResultT = TypeVar("ResultT")


class ModalFrame(ModalScreen[ResultT]):
    FRAME_ID: ClassVar[str] = "frame"  # the box's id, for the screen's own CSS and for tests
    SCROLLS: ClassVar[bool] = False  # long content (help, event detail) scrolls in the box
    DEFAULT_CSS = """
    ModalFrame {
        align: center middle;
        & > .modal-frame {
            width: 96;
            max-width: 95%;
            height: auto;
            max-height: 90%;
            border: round $primary;
            border-title-color: $text-primary;
            border-title-style: bold;
            background: $surface;
            padding: 0 1;
        }
        & .keys-line { color: $text-muted; margin-top: 1; }
    }
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._tinted_lines = TintedLines()

    def render(self) -> RenderableType:
        # Textual decides whether the screen below shows through (and
        # which one); only how it is drawn changes (modal_background.py).
        background = super().render()
        if isinstance(background, BackgroundScreen):
            return TintedBackground(background.screen, background.color, self._tinted_lines)
        return background

    def on_mount(self) -> None:
        for box in self.query(".modal-frame"):
            whole_cell_scrollbars(box)

    def frame(self, title: str = "") -> Widget:
        """The box to compose into: `with self.frame("title"): yield ...`."""
        box = (VerticalScroll if self.SCROLLS else Vertical)(id=self.FRAME_ID, classes="modal-frame")
        box.border_title = title
        return box

    @staticmethod
    def keys_line(text: str) -> Static:
        """The last line of the box: which keys do what here."""
        return Static(text, id="keys", classes="keys-line")
