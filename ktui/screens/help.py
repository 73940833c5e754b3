"""Every key, grouped by where it works, built from the bindings themselves
so the help can never drift from what the keys do."""

from __future__ import annotations

from typing import ClassVar, Iterable, Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from ktui.screens.modal import ModalFrame

NOTES = (
    "The table shows one row per probe: ● attached, ○ off, ✗ failed (the reason follows),",
    "◐ loading (attached and counting hits while its program compiles or loads).",
    "rate/s, lost and the sparkline come from in-kernel counters read once a second;",
    "k is the kind: c a call probe (kprobe), r a return probe (kretprobe, with latency), t a tracepoint.",
    "p50/p99 are return latencies; errors counts returns with a negative value (-errno);",
    "both for return probes, since the probe was attached (the stats pane names the errnos).",
    "errors - : this function's errnos are not checked (void, unsigned, no BTF: the pane says).",
    "lost+N: N more hits the kernel saw and could not count (returns missed or unpaired,",
    "nested hits dropped, runs skipped for recursion); the stats pane says which.",
    "⚠ on lost: the kernel is dropping this probe's events. Make it stats-only",
    "(no fetches), add a filter, or set sample / rate_limit in the probe set.",
    "The event pane keeps the newest events only; when more arrive than it holds,",
    "the oldest of a batch are skipped (not decoded) and counted in its bottom line.",
    "ctrl+p opens the command palette: every action is there by name.",
)

Section = tuple[str, Sequence[BindingType]]


def _keys(bindings: Sequence[BindingType]) -> Iterable[Binding]:
    for b in bindings:
        yield b if isinstance(b, Binding) else Binding(*b)


def help_table(sections: Sequence[Section], key_display) -> Table:
    """Keys that run the same action are shown on one line (`d / delete`)."""
    table = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
    table.add_column(style="bold", min_width=14)
    table.add_column()
    for title, bindings in sections:
        table.add_row(Text(title, "bold underline"), "")
        merged: dict[str, tuple[list[str], Binding]] = {}
        for binding in _keys(bindings):
            keys, _ = merged.setdefault(binding.action, ([], binding))
            for key in binding.key.split(","):
                one = Binding(key.strip(), binding.action)
                if "," not in binding.key:
                    one = binding
                shown = key_display(one)
                if shown not in keys:
                    keys.append(shown)
        for keys, first in merged.values():
            table.add_row(" / ".join(keys), first.tooltip or first.description)
        table.add_row("", "")
    return table


class RenderedOnce:
    """A renderable drawn once per width: Textual renders a Static's
    content to measure it, to find its height and to draw it, and a Rich
    Table of every key takes 15-30 ms each time, so the first `?` took
    100-300 ms (issue 15). The segments are kept as they came, so what is
    drawn is exactly the table's own output. (A table ignores the height
    it is offered, so the width alone is the key.)"""

    def __init__(self, renderable: Table) -> None:
        self.renderable = renderable
        self._segments: dict[int, list[Segment]] = {}
        self._measures: dict[int, Measurement] = {}

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        if options.max_width not in self._measures:
            self._measures[options.max_width] = Measurement.get(console, options, self.renderable)
        return self._measures[options.max_width]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.segments(console, options)

    def segments(self, console: Console, options: ConsoleOptions) -> list[Segment]:
        if options.max_width not in self._segments:
            self._segments[options.max_width] = list(console.render(self.renderable, options))
        return self._segments[options.max_width]


class HelpScreen(ModalFrame[None]):
    FRAME_ID = "help"
    SCROLLS = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close", id="help-close"),
        Binding("q,question_mark", "dismiss", "Close", show=False, id="help-close-alt"),
    ]
    DEFAULT_CSS = """
    HelpScreen {
        & > #help { width: 100; height: 90%; }
        & #notes { color: $text-muted; }
    }
    """

    def __init__(self, sections: Sequence[Section]) -> None:
        super().__init__()
        self.sections = sections
        self._table: RenderedOnce | None = None

    def keys_table(self) -> RenderedOnce:
        if self._table is None:
            self._table = RenderedOnce(help_table(self.sections, self.app.get_key_display))
        return self._table

    @staticmethod
    def table_widths(screen_width: int) -> tuple[int, ...]:
        """The widths Textual draws the table at, from the CSS below: the
        frame is 100 cells or 95% of the screen, less its border and
        padding (4); the height is found before the scrollbar (2) shows."""
        inner = min(100, screen_width * 95 // 100) - 4
        return inner, inner - 2

    def prewarm(self) -> None:
        """Render the table now, at the widths it will be drawn at (the app
        calls this while idle after start): the first `?` then costs what
        the later ones do."""
        options = self.app.console_options.update(highlight=False)
        for width in self.table_widths(self.app.size.width):
            self.keys_table().segments(self.app.console, options.update_width(width))

    def on_screen_resume(self) -> None:
        # The app keeps one help screen (composed once, shown again on
        # every `?`): it opens at the top each time, as a new one would.
        self.query_one(f"#{self.FRAME_ID}").scroll_home(animate=False, immediate=True)

    def compose(self) -> ComposeResult:
        with self.frame("ktui keys  (esc: close)"):
            yield Static(self.keys_table(), id="keys")
            yield Static("\n".join(NOTES), id="notes")
