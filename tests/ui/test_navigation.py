"""Issue 15: everything on the dashboard is reachable by keyboard at any
size: the stats pane takes focus and scrolls, Home/End move the probe
table's cursor, and the footer never shows half a key."""

from __future__ import annotations

import pytest

from ktui.widgets.event_log import EventLog
from ktui.widgets.footer import KtuiFooter, fitting
from ktui.widgets.probe_table import ProbeTable
from ktui.widgets.stats_pane import StatsPane

from .conftest import make_app, polls, settles


async def focus(pilot, kind, tries=6):
    for _ in range(tries):
        if isinstance(pilot.app.focused, kind):
            return
        await pilot.press("tab")
    assert isinstance(pilot.app.focused, kind), pilot.app.focused


@pytest.mark.parametrize("size", [(80, 24), (120, 35)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_stats_pane_takes_focus_and_scrolls_to_top_comms(size):
    app = make_app()
    async with app.run_test(size=size) as pilot:
        polls(app, 6)
        await pilot.pause()
        assert app.main.selected.probe.name.startswith("vfs_read")  # a return probe: histogram and errnos
        if app.main.narrow:
            await pilot.press("s")  # folded away below 120 columns
        await focus(pilot, StatsPane)
        pane = app.main.query_one(StatsPane)
        assert pane.max_scroll_y > 0  # too tall for the pane: the test needs something to scroll to
        await pilot.press("end")
        await settles(pilot, lambda: pane.scroll_y == pane.max_scroll_y, "scrolled to the end")
        await pilot.press("home")
        await settles(pilot, lambda: pane.scroll_y == 0, "scrolled to the top")


async def test_home_and_end_move_the_probe_cursor(app):
    async with app.run_test(size=(120, 40)) as pilot:
        polls(app, 2)
        await pilot.pause()
        table = app.main.query_one(ProbeTable)
        assert table.has_focus
        await pilot.press("end")
        assert table.cursor_row == table.row_count - 1 > 0
        await pilot.press("home")
        assert table.cursor_row == 0


@pytest.mark.parametrize("width", [80, 100, 140])
async def test_footer_shows_whole_keys_with_the_event_pane_focused(width):
    app = make_app()
    async with app.run_test(size=(width, 30)) as pilot:
        polls(app, 2)
        await pilot.pause()
        app.main.query_one(EventLog).focus()
        await pilot.pause()
        await pilot.pause()
        footer = app.main.query_one(KtuiFooter)
        keys = [w for w in footer.children if hasattr(w, "key_display")]
        assert {k.key for k in keys} >= {"q", "question_mark", "space"}
        for key in keys:  # none runs past the edge or under the palette key
            assert key.region.right <= footer.region.right, (key.key, key.region, footer.region)
        palette = [k for k in keys if k.has_class("-command-palette")]
        for key in keys:
            if key not in palette and palette:
                assert key.region.right <= palette[0].region.x, key.key


def test_footer_leaves_out_the_last_keys_but_keeps_quit_and_help():
    assert fitting([5, 5, 5, 5], [False, False, True, True], 20) == [True] * 4
    assert fitting([5, 5, 5, 5], [False, False, True, True], 15) == [True, False, True, True]
    assert fitting([5, 5, 5, 5], [False, False, True, True], 9) == [False, False, True, True]


def test_footer_keeps_the_screens_first_keys_longest():
    # the third and fourth are "first" (places 0 and 1): the others go before them
    first = [None, None, 0, 1, None]
    keep = [False, False, False, False, True]
    assert fitting([5] * 5, keep, 15, first) == [False, False, True, True, True]
    assert fitting([5] * 5, keep, 10, first) == [False, False, True, False, True]
