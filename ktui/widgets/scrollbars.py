"""Scrollbars drawn in whole cells.

Textual draws a scrollbar thumb's ends with eighth-block glyphs (▁▂▃▅▆ on a
vertical bar, ▉▊▋▌▍▎▏ on a horizontal one) for sub-cell precision. Where
colours are few (a VM's console, tmux on TERM=linux, NO_COLOR) the thumb's
colour is lost and only those glyphs remain: stray bar characters at the
right edge of event and histogram rows, showing through the help and the
command palette (issue 15). A thumb of whole cells is only colour (blank
cells in reverse), so nothing is left over when the colour goes.

Set per scrollbar (Textual's `ScrollBar.renderer` documents both ways);
setting it on the class would change every Textual app in the process.
"""

from __future__ import annotations

from textual.scrollbar import ScrollBarRender
from textual.widget import Widget


class WholeCellScrollBarRender(ScrollBarRender):
    VERTICAL_BARS = [" "] * 8
    HORIZONTAL_BARS = [" "] * 8


def whole_cell_scrollbars(*widgets: Widget) -> None:
    """Give these widgets' scrollbars whole-cell thumbs (a widget that
    cannot scroll is left alone: asking for its bars would create them)."""
    for widget in widgets:
        if widget.styles.overflow_y in ("auto", "scroll"):
            widget.vertical_scrollbar.renderer = WholeCellScrollBarRender
        if widget.styles.overflow_x in ("auto", "scroll"):
            widget.horizontal_scrollbar.renderer = WholeCellScrollBarRender
