"""Static.update without the layouts it does not need.

Textual's Static.update lays out the whole screen (`refresh(layout=True)`)
even when the content is the same or keeps its one line. The stats pane
updates five Statics on every stats read, once a second, and each asked for
a layout: ~40 ms of the dashboard at 140x40, the longest wait a key had at
idle (docs/benchmarks-history.md, "Responsive under load"). Here an unchanged
content is not set again, and a content that stays one line within the
widget's width is set without a layout (its height cannot change).
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.widgets import Static


def _fits_one_line(content: object, width: int) -> bool:
    plain = content if isinstance(content, str) else getattr(content, "plain", None)
    return isinstance(plain, str) and "\n" not in plain and 0 < cell_len(plain) <= width


def update_static(static: Static, content: object) -> None:
    before = static.content
    if type(content) is type(before) and content == before:
        return
    width = static.content_region.width
    same_height = _fits_one_line(before, width) and _fits_one_line(content, width)
    static.update(content, layout=not same_height)  # type: ignore[arg-type]
