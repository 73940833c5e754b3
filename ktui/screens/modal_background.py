"""The dimmed screen behind a modal, drawn again only when it changed.

Textual draws a modal screen's translucent background by rendering the
screen below through Rich every time the modal paints: the whole
compositor as one stream of segments, every segment tinted, the stream
split into lines again (`BackgroundScreen` rendered by a `RichVisual`).
At 140x40 that was 20-25 ms of every `?`, the largest part of a key's
latency at idle (issue 15). Here the screen below gives its lines as
strips; the tinted background is kept and drawn again as it was while
the screen below would draw the same (its widgets' places and lines are
equal), and otherwise a line is tinted only when it differs from every
line of the last paint (the event pane moves; the header, table and stats
mostly do not). What is drawn is the same segments, computed the same way
(tests/ui/test_modal_background.py compares them with Textual's)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.color import Color
from textual.css.styles import RulesMap
from textual.renderables.background_screen import BackgroundScreen
from textual.screen import Screen
from textual.strip import Strip
from textual.style import Style
from textual.visual import RenderOptions, Visual

LineKey = tuple[Segment, ...]


class TintedLines:
    """What one modal keeps between paints: the last background it drew,
    with what it was drawn from, and the tinted strip of each line keyed
    by the line's segments (only the last paint's: one screen at most)."""

    def __init__(self) -> None:
        self._lines: dict[tuple[RichStyle, Color, LineKey], Strip] = {}
        self._frame_key: tuple | None = None
        self._frame: list[Strip] = []

    def background(self, screen: Screen, color: Color, base: RichStyle, width: int,
                   height: int | None) -> list[Strip]:
        compositor = screen._compositor
        # What the compositor would draw from: each visible widget's place
        # and lines (its own caches answer for one that did not change).
        # Equal renders draw equal strips, so the key is the content itself
        # and needs no word from the screen below about what it changed.
        renders = tuple((region, clip, tuple(lines))
                        for region, clip, lines in compositor._get_renders(compositor.size.region))
        key = (compositor.size, color, base, width, height, renders)
        if key != self._frame_key:
            strips = compositor.render_strips()
            strips = [strip.crop(0, width) if strip.cell_length > width else strip for strip in strips]
            self._frame = self.tint(strips[:height] if height is not None else strips, color, base)
            self._frame_key = key
        return self._frame

    def tint(self, strips: list[Strip], color: Color, base: RichStyle) -> list[Strip]:
        previous, current = self._lines, {}
        out = []
        for strip in strips:
            key = (base, color, tuple(strip))
            tinted = previous.get(key) or current.get(key)
            if tinted is None:
                tinted = self._tint_line(strip, color, base)
            current[key] = tinted
            out.append(tinted)
        self._lines = current
        return out

    @staticmethod
    def _tint_line(strip: Strip, color: Color, base: RichStyle) -> Strip:
        # The same two steps as Textual's path, line by line: the tint of
        # BackgroundScreen, then the modal's own style over it (what
        # Widget.post_render's _Styled does to every segment).
        segments = BackgroundScreen.process_segments(strip, color)
        if base:
            add = base.__add__
            segments = (Segment(text, add(style), None) for text, style, _control in segments)
        return Strip(segments, strip.cell_length)


class TintedBackground(Visual):
    """The Visual a modal screen renders as its background: the screen
    below's compositor strips, tinted through `lines`."""

    def __init__(self, screen: Screen, color: Color, lines: TintedLines) -> None:
        self.screen = screen
        self.color = color
        self.lines = lines

    def render_strips(self, width: int, height: int | None, style: Style,
                      options: RenderOptions) -> list[Strip]:
        return self.lines.background(self.screen, self.color, style.rich_style, width, height)

    def get_optimal_width(self, rules: RulesMap, container_width: int) -> int:
        return container_width

    def get_height(self, rules: RulesMap, width: int) -> int:
        return self.screen._compositor.size.height
