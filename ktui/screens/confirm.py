"""A yes/no question (deleting a probe)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from ktui.screens.modal import ModalFrame


class ConfirmDialog(ModalFrame[bool]):
    FRAME_ID = "dialog"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no"),
    ]
    DEFAULT_CSS = """
    ConfirmDialog > #dialog {
        width: auto;
        min-width: 40;
        max-width: 90%;
        border: round $warning;
        padding: 1 2;
    }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with self.frame():
            yield Static(Text(self.question, "bold"))
            yield self.keys_line("y / enter: yes    n / esc: no")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
