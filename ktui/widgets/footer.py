"""Textual's Footer without its slow leak, and without half a key.

Footer.compose binds every FooterKey to the footer's `compact` reactive
(data_bind), and Textual drops the watchers of removed nodes only when that
reactive changes, which it never does here. The footer recomposes on every
screen switch and bindings change, so each one left ~7 dead FooterKeys
alive: 661 after 90 help open/close cycles in the bench's 100k events/s
flood, and RSS grew with them.

So after each recompose the footer changes `compact` and changes it back:
the first change makes Textual prune the watchers whose node is closing, as
it does on any change, and the second restores the value before anything is
drawn. Only public API: the `compact` reactive. (The watcher list itself is
private to Textual; tests/ui/test_footer.py counts the live keys.)

Textual's footer also lays its keys out in a row and cuts the row at the
screen's edge, mid-label (issue 15: `? Hel` at 80 columns with the event
pane focused). Here the keys that do not fit whole are left out instead,
the last ones first, except quit and help, which always stay, and the keys
the screen names in `footer_first` (a replay's playback keys: at 80
columns they were the ones left out), which go last, the last named first.

And it recomposes only when what it shows would change: Textual's footer
recomposes (7 keys unmounted, 7 mounted, a layout) on every bindings signal,
so each open and close of the help or a dialog rebuilt the dashboard's
footer, under the modal, for the same keys (docs/benchmarks-history.md,
"Responsive under load").
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer

ALWAYS = ("q", "question_mark")  # quit and help: how to get out, how to learn the rest
# Cells a key takes beyond its key and description, from Footer's CSS
# (8.2.8, pinned in tests/ui/test_textual_pins.py): one cell of padding each
# side of the key and one after the description; the command palette's key
# docked right adds its padding and its border.
KEY_EXTRA, PALETTE_EXTRA = 3, 2


def fitting(widths: list[int], keep: list[bool], available: int,
            first: list[int | None] | None = None) -> list[bool]:
    """Which keys to show: all when they fit, else leave out the last ones
    that are not kept until the rest fit. `first`: a key's place among the
    keys to keep as long as possible (None: not one of them); those are left
    out only after every other key, the highest place first."""
    ranks = first or [None] * len(widths)
    others = [i for i in reversed(range(len(widths))) if ranks[i] is None]
    preferred = sorted((i for i in range(len(widths)) if ranks[i] is not None), key=lambda i: -ranks[i])
    shown = [True] * len(widths)
    for i in others + preferred:
        if sum(w for w, s in zip(widths, shown) if s) <= available:
            break
        if not keep[i]:
            shown[i] = False
    return shown


class KtuiFooter(Footer):
    def __init__(self) -> None:
        super().__init__()
        self._fitted_width = 0
        self._composed: tuple | None = None  # what the keys were composed from

    def _shows(self) -> tuple:
        """Everything compose() reads, as one comparable value."""
        if not self._bindings_ready:
            return ()
        keys = tuple((b.key, self.app.get_key_display(b), b.description, b.action, b.group, enabled, tooltip)
                     for _, b, enabled, tooltip in self.screen.active_bindings.values() if b.show)
        return (self.size.width, self.compact, self.show_command_palette, keys,
                tuple(getattr(self.screen, "footer_first", ())))

    def compose(self) -> ComposeResult:
        self._composed = self._shows()
        widgets = list(super().compose())
        # FooterKey lives in a private Textual module: known by its fields.
        if not all(hasattr(w, "key_display") and hasattr(w, "description") for w in widgets):
            yield from widgets  # binding groups (not used by ktui): as Textual draws them
            return
        self._fitted_width = width = self.size.width
        keys = [w for w in widgets if not w.has_class("-command-palette")]
        palette = [w for w in widgets if w.has_class("-command-palette")]
        if width:
            width -= sum(_cells(w) + PALETTE_EXTRA for w in palette)
        first = tuple(getattr(self.screen, "footer_first", ()))
        ranks = [first.index(w.key) if w.key in first else None for w in keys]
        shown = fitting([_cells(w) for w in keys], [w.key in ALWAYS for w in keys], width, ranks) if width else []
        yield from (w for w, show in zip(keys, shown or [True] * len(keys)) if show)
        yield from palette

    def on_resize(self) -> None:
        if self.size.width != self._fitted_width:
            self.call_after_refresh(self.recompose)

    async def recompose(self) -> None:
        if self.is_attached and self._composed is not None and self._shows() == self._composed:
            return  # the same keys: nothing to rebuild
        await super().recompose()
        compact = self.compact
        self.compact = not compact
        self.compact = compact


def _cells(key: Widget) -> int:
    return cell_len(key.key_display) + cell_len(key.description) + KEY_EXTRA  # type: ignore[attr-defined]
