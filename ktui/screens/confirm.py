"""Yes/no questions: deleting a probe (Enter says yes) and replacing a
file (only `y` does: Enter twice, once for the path and once more by
habit or key repeat, must not replace a file)."""

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


class ConfirmReplace(ConfirmDialog):
    """Replace an existing file? Only `y` says yes; Enter is answered with
    a reminder, so the Enter that submitted the path (or a second one
    typed ahead) never replaces anything."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Replace", id="replace-yes"),
        Binding("n,escape", "answer(False)", "Keep", id="replace-no"),
        Binding("enter", "remind", show=False),
    ]

    def compose(self) -> ComposeResult:
        with self.frame("replace a file?"):
            yield Static(Text(self.question, "bold"))
            yield Static(id="replace-reminder")
            yield self.keys_line("y: replace it    n / esc: keep it")

    def action_remind(self) -> None:
        self.query_one("#replace-reminder", Static).update(Text("press y to replace it, n to keep it", "yellow"))
