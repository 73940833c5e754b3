"""The Textual app: key bindings, the poll timer, and wiring to the Feed.

The Feed is opened and closed by the caller (the Memray pattern), so kernel
resources are released even when the UI crashes:

    with Session(probeset) as feed:
        KtuiApp(feed).run()

Every 1/refresh_hz seconds the app drains the feed once and, about once a
second, reads the stats; each poll updates the screen in one batch.
"""

from __future__ import annotations

import gc
import io
import logging
import time
from typing import ClassVar

from rich.console import Console
from textual.app import App
from textual.binding import Binding, BindingType
from textual.worker import WorkerFailed

from ktui.pipeline.format import Symbolize
from ktui.pipeline.held import HeldBatches
from ktui.record.feed import Feed
from ktui.screens.browse_model import FunctionIndex
from ktui.screens.browser import BrowserScreen
from ktui.screens.dialog import Dialog
from ktui.screens.help import HelpScreen, Section
from ktui.screens.main import MainScreen
from ktui.widgets.event_log import EventLog
from ktui.widgets.event_pane import EventPane
from ktui.widgets.event_window import DEFAULT_WINDOW
from ktui.widgets.stats_pane import StatsPane

STATS_INTERVAL = 1.0  # seconds between reads of the in-kernel counters
PREWARM_AFTER = 0.2  # seconds after the dashboard is ready: the help's table is rendered then
DIALOG_KEYS = [
    Binding("enter", "submit", "Add / save / open / write", tooltip="Submit the dialog (errors stay inline)"),
    Binding("tab", "focus_next", "Next field"),
]


class _AppendToLog(io.TextIOBase):
    """A text stream that appends each write to the log file (nowhere when
    there is none). Textual prints a failure's traceback to
    `App.error_console` once the screen is gone: on the terminal that would
    be a screenful of traceback, so it goes to the log instead. The file is
    opened per write because Textual prints after the app is unmounted."""

    def __init__(self, path: str | None) -> None:
        super().__init__()
        self.path = path

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.path:
            with open(self.path, "a", encoding="utf-8", errors="replace") as log:
                log.write(text)
        return len(text)


class KtuiApp(App[None]):
    TITLE = "ktui"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="quit", tooltip="Quit ktui"),
        Binding("ctrl+c", "quit", "Quit", id="quit-ctrl-c", show=False, priority=True),
        Binding("question_mark", "help", "Help", id="help", key_display="?", tooltip="Show every key"),
    ]

    def __init__(
        self,
        feed: Feed,
        *,
        refresh_hz: float = 15,
        log_path: str | None = None,
        probeset_path: str | None = None,
        symbolize: Symbolize | None = None,
        window: int = DEFAULT_WINDOW,
        functions: FunctionIndex | None = None,
    ) -> None:
        """refresh_hz: polls a second; 0 means no timer (tests call `poll()`).
        symbolize: addr -> "func+0x10" for `:symbol` fetches; by default the
        feed's own `symbolize` method if it has one.
        window: how many recent events the event pane keeps.
        functions: the kernel functions the browser lists (default: this
        machine's, loaded on first use)."""
        super().__init__()
        if refresh_hz < 0:
            raise ValueError(f"refresh_hz must be >= 0, got {refresh_hz}")
        self.feed = feed
        self.refresh_hz = refresh_hz
        self.log_path = log_path
        self.main = MainScreen(
            feed,
            symbolize=symbolize if symbolize is not None else getattr(feed, "symbolize", None),
            window=window,
            probeset_path=probeset_path,
            functions=functions,
        )
        self._stats_at = float("-inf")
        self._held = HeldBatches(keep=window)  # drained while covered (see poll)
        self._log_handler: logging.Handler | None = None
        self._propagate = True
        # The first exception that escaped a handler, timer or worker: the
        # app has exited because of it; the caller reports it in one line.
        self.failure: BaseException | None = None
        self.error_console = Console(file=_AppendToLog(log_path), markup=False, highlight=False,
                                     color_system=None, width=120)

    def _handle_exception(self, error: Exception) -> None:
        # Textual's one entry point for an exception escaping a handler, a
        # timer or a worker (it then exits with return code 1). Overridden
        # only to remember the error. A private method: Textual (8.2.8) has
        # no public hook for this; run() only leaves return_code 1 and keeps
        # the exception to itself. Checked against the version pinned in
        # tests/ui/test_textual_pins.py (an upgrade fails there until this
        # is checked again); tests/ui/test_crash.py notices if Textual stops
        # calling it.
        if self.failure is None:
            # A worker's exception arrives wrapped: report the one it raised.
            self.failure = error.error if isinstance(error, WorkerFailed) else error
        super()._handle_exception(error)

    def get_default_screen(self) -> MainScreen:
        return self.main

    def on_mount(self) -> None:
        self._start_logging()

    def on_ready(self) -> None:
        """The dashboard is composed: first poll, then poll on a timer."""
        self.poll(read_stats=True)
        if self.refresh_hz:  # 0: no timers at all (tests poll, and prewarm, when they say)
            self.set_interval(1 / self.refresh_hz, self._tick, name="poll")
            # The help's table, rendered while idle after start (HelpScreen.prewarm)
            self.set_timer(PREWARM_AFTER, self._settle_after_start, name="prewarm-help")

    def _settle_after_start(self) -> None:
        """Once, while idle after start: the help's table is rendered
        (HelpScreen.prewarm), then what start-up allocated (Textual, Rich,
        the composed dashboard: ~90k objects) is moved out of the garbage
        collector's reach (`gc.freeze`). Those objects live for the whole
        run, yet every full collection walked them again: 50 ms pauses
        every 2-3 s that a key press had to wait behind (the slowest idle
        keys of issue 15). Garbage made before is collected first, so
        nothing collectable is frozen; later objects are collected as usual."""
        self._help_screen().prewarm()
        gc.collect()
        gc.freeze()

    def on_unmount(self) -> None:
        self._stop_logging()

    def _tick(self) -> None:
        self.poll(hold_if_covered=True)

    def poll(self, *, read_stats: bool | None = None, hold_if_covered: bool = False) -> None:
        """Drain the feed once (and read stats when due); one screen update.

        hold_if_covered (the timer's polls): while the help or a dialog
        covers the dashboard, its events wait in `_held` and the dimmed
        dashboard is updated with the stats, once a second (pipeline/held.py
        says why)."""
        if not self.main.ready:
            return  # nothing to show events in yet: leave them in the feed
        now = time.monotonic()
        if read_stats is None:
            read_stats = now - self._stats_at >= STATS_INTERVAL
        if read_stats:
            self._stats_at = now
        batch = self.feed.drain()
        snapshot = self.feed.stats() if read_stats else None
        hold = hold_if_covered and snapshot is None and self._covered()
        if hold or self._held:
            self._held.add(batch)
            if hold:
                return
            batch = self._held.take()
        with self.batch_update():
            self.main.apply(batch, snapshot)

    def _covered(self) -> bool:
        """A modal (help, a dialog) or another screen is on top of the dashboard."""
        stack = self.screen_stack
        return bool(stack) and stack[-1] is not self.main

    def action_help(self) -> None:
        self.push_screen(self._help_screen())

    def _help_screen(self) -> HelpScreen:
        """One help screen for the run, installed so that closing it keeps
        it: composing it and laying out its table again on every `?` was
        most of the key's latency (docs/benchmarks-history.md, "Responsive under
        load"). Its keys are the classes' bindings: fixed for a run."""
        if not self.is_screen_installed("help"):
            self.install_screen(HelpScreen(self.help_sections()), name="help")
        screen = self.get_screen("help")
        assert isinstance(screen, HelpScreen)
        return screen

    def help_sections(self) -> list[Section]:
        return [
            ("dashboard", MainScreen.BINDINGS),
            ("event pane", EventLog.BINDINGS + EventPane.BINDINGS),
            ("stats pane", StatsPane.BINDINGS),
            ("function browser", BrowserScreen.BINDINGS),
            ("dialogs", DIALOG_KEYS + Dialog.BINDINGS),
            ("anywhere", self.BINDINGS + [Binding("ctrl+p", "command_palette", "Command palette")]),
        ]

    # Nothing may reach stdout/stderr while the screen is up: ktui's records
    # go to the log file, or nowhere (not even logging's last-resort stderr).
    def _start_logging(self) -> None:
        logger = logging.getLogger("ktui")
        if self.log_path:
            handler: logging.Handler = logging.FileHandler(self.log_path, encoding="utf-8")
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            logger.setLevel(logging.INFO)
        else:
            handler = logging.NullHandler()
        logger.addHandler(handler)
        self._propagate, logger.propagate = logger.propagate, False
        self._log_handler = handler

    def _stop_logging(self) -> None:
        if self._log_handler is not None:
            logger = logging.getLogger("ktui")
            logger.removeHandler(self._log_handler)
            logger.propagate = self._propagate
            self._log_handler.close()
            self._log_handler = None
