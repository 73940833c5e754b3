"""Issue 15: Textual's light and dark themes from the command palette, and
NO_COLOR respected: no colour reaches the terminal when it is set."""

from __future__ import annotations

from textual.color import Color

from ktui.screens.commands import DashboardCommands
from ktui.widgets.probe_table import ProbeTable
from ktui.widgets.status_line import StatusLine

from .conftest import make_app, polls


async def test_light_and_dark_themes_from_the_palette(app):
    async with app.run_test(size=(120, 30)) as pilot:
        found = {hit.display: hit for hit in [h async for h in DashboardCommands(app.main).discover()]}
        found["Light theme"].command()
        await pilot.pause()
        assert app.theme == "textual-light" and not app.current_theme.dark
        found["Dark theme"].command()
        await pilot.pause()
        assert app.theme == "textual-dark" and app.current_theme.dark


def colours(app, widget) -> set:
    """The colours of the widget's lines as they leave for the terminal:
    through the app's output filters (NO_COLOR adds Textual's). `_filters`
    is private to Textual: the list its driver output passes through, the
    one place NO_COLOR acts (8.2.8, pinned in test_textual_pins)."""
    found = set()
    for strip in widget.render_lines(widget.region.reset_offset):
        segments = list(strip)
        for line_filter in app._filters:
            segments = line_filter.apply(segments, Color(0, 0, 0))
        for segment in segments:
            style = segment.style
            if style is None:
                continue
            for color in (style.color, style.bgcolor):
                if color is not None and not color.is_default:
                    triplet = color.get_truecolor()
                    if not triplet.red == triplet.green == triplet.blue:
                        found.add(triplet)
    return found


async def test_no_color_leaves_no_colour(monkeypatch):
    plain_app = make_app()
    async with plain_app.run_test(size=(120, 30)) as pilot:
        polls(plain_app, 2)
        await pilot.pause()
        assert colours(plain_app, plain_app.main.query_one(StatusLine))  # colour without NO_COLOR
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        polls(app, 2)
        await pilot.pause()
        assert app.no_color
        for widget in (app.main.query_one(StatusLine), app.main.query_one(ProbeTable)):
            assert not colours(app, widget), widget
        # what colour said is still said in words and marks
        text = app.main.query_one(StatusLine)._shown.plain
        assert "following" in text and "lost" in text
