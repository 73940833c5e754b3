"""What every ktui dialog shares: the modal frame, Escape to cancel, and a
submit step that runs in a worker and shows its error inline instead of
closing (a bad path or a probe the kernel refuses is fixed in place)."""

from __future__ import annotations

import logging
from typing import Awaitable, Callable, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import Static

from ktui.lang.model import KtuiError
from ktui.record.feed import FeedError
from ktui.screens.modal import ModalFrame

log = logging.getLogger(__name__)


class Dialog(ModalFrame[None]):
    FRAME_ID = "dialog"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="dialog-cancel"),
    ]
    DEFAULT_CSS = """
    Dialog {
        & .hint { color: $text-muted; }
        & .field-label { margin-top: 1; text-style: bold; }
        & .problem { color: $text-error; height: auto; }
        & #submit-problem { color: $text-error; margin-top: 1; height: auto; }
        & Input { margin: 0; }
        & Input.-invalid { border: tall $error 60%; }
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self.busy = False  # a submit is running: Escape waits for it

    def action_cancel(self) -> None:
        if not self.busy:
            self.dismiss()

    def show_problem(self, message: str) -> None:
        """The error of the last submit, under the fields."""
        self.query_one("#submit-problem", Static).update(Text(message))

    def submit_with(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run `work` off the key handler; close on success, say why on failure."""
        if self.busy:
            return
        self.busy = True
        self.show_problem("working…")
        self.run_worker(self._submit(work), group="dialog-submit", exclusive=True)

    async def _submit(self, work: Callable[[], Awaitable[None]]) -> None:
        try:
            await work()
        except (FeedError, KtuiError) as err:
            log.info("%s: %s", type(self).__name__, err)
            self.busy = False
            self.show_problem(str(err))
            return
        self.busy = False
        self.dismiss()
