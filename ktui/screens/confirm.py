"""A yes/no question (deleting a probe)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class ConfirmDialog(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no"),
    ]
    DEFAULT_CSS = """
    ConfirmDialog {
        align: center middle;
        & > #dialog {
            width: auto;
            min-width: 40;
            max-width: 90%;
            height: auto;
            border: round $warning;
            background: $surface;
            padding: 1 2;
        }
        & #keys { color: $text-muted; margin-top: 1; }
    }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(self.question, "bold"))
            yield Static("y / enter: yes    n / esc: no", id="keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
