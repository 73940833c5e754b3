"""Issue 15: no stray bar characters at the right edge of the event and
histogram rows, or through the help: scrollbar thumbs are whole cells of
colour, never eighth-block glyphs that outlive the colour on a poor
terminal (ktui/widgets/scrollbars.py)."""

from __future__ import annotations

from ktui.screens.help import HelpScreen
from ktui.widgets.event_log import EventLog
from ktui.widgets.probe_table import ProbeTable
from ktui.widgets.stats_pane import StatsPane

from .conftest import make_app, polls

GLYPHS = set("▁▂▃▄▅▆▇▉▊▋▌▍▎▏")


def drawn(app, widget) -> str:
    """The characters the widget's vertical scrollbar draws now."""
    bar = widget.vertical_scrollbar
    assert bar.window_virtual_size > bar.window_size > 0, widget  # a thumb to draw
    height = widget.scrollable_content_region.height
    options = app.console.options.update_dimensions(bar.size.width or 2, height)
    return "".join(segment.text for segment in app.console.render(bar.render(), options))


async def test_scrollbar_thumbs_draw_no_glyphs_at_80x24():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        polls(app, 40)
        await pilot.press("s")  # the stats pane under the events, scrolling
        await pilot.pause()
        log, stats = app.main.query_one(EventLog), app.main.query_one(StatsPane)
        for widget in (log, stats):
            for y in range(0, int(widget.max_scroll_y) + 1, 3):  # thumbs at many offsets
                widget.scroll_to(y=y, animate=False, immediate=True)
                await pilot.pause()
                assert not GLYPHS & set(drawn(app, widget)), (widget, y)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("#help")
        assert not GLYPHS & set(drawn(app, box))


async def test_probe_table_scrollbar_too():
    app = make_app()
    async with app.run_test(size=(80, 14)) as pilot:  # too short for every probe row
        polls(app, 2)
        await pilot.pause()
        table = app.main.query_one(ProbeTable)
        assert not GLYPHS & set(drawn(app, table))
