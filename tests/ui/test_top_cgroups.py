"""The stats pane's top cgroups (FakeFeed: a container, a deep session
scope, a unit and the root share every probe's hits): under the top
comms, a container shown as docker:<12 hex>, each row on one line of
the pane (a long path cut from its start, not wrapped), reached by
keyboard at 80x24 and shown whole in a wide window."""

from __future__ import annotations

import pytest

from ktui.widgets.stats_pane import StatsPane

from .conftest import make_app, plain, polls, settles
from .test_navigation import focus

SESSION = "user.slice/user-1000.slice/user@1000.service/app.slice/session-3.scope"


@pytest.mark.parametrize("size", [(80, 24), (120, 35), (240, 50)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_top_cgroups_are_under_the_top_comms_one_row_each(size):
    app = make_app()
    async with app.run_test(size=size) as pilot:
        polls(app, 6)
        await pilot.pause()
        if app.main.narrow:
            await pilot.press("s")  # folded away below 120 columns
        await focus(pilot, StatsPane)
        pane = app.main.query_one(StatsPane)
        body = pane.query_one("#stats-body")
        # the body is laid out again for the scrollbar its length brings
        # (call_after_refresh): wait until its rows fit the pane, then look
        await settles(pilot, lambda: body.virtual_region.height == len(pane._lines) and all(
            len(line[0]) <= pane.scrollable_content_region.width for line in pane._lines), "the rows fitted")
        text = plain(body)
        assert text.index("top comms") < text.index("top cgroups (exact)")
        assert "docker:0123456789ab" in text and "system.slice/sshd.service" in text
        # a pane too narrow for the whole path keeps its end, which names it
        room = pane.scrollable_content_region.width
        assert (SESSION in text) is (room >= 2 + len(SESSION) + 1 + 8), room
        assert "session-3.scope" in text
        if size == (80, 24):
            assert SESSION not in text
        # no row wrapped: the body is as tall as its lines
        assert body.virtual_region.height == len(pane._lines)
        await pilot.press("end")
        await pilot.pause()
        # the last cgroup row is on screen (once the pane has scrolled)
        last = body.virtual_region.y + len(pane._lines) - 1
        await settles(pilot, lambda: pane.scroll_y <= last < pane.scroll_y + pane.scrollable_content_region.height,
                      "the last row scrolled into view")
        assert pane.scroll_y <= last < pane.scroll_y + pane.scrollable_content_region.height
        assert pane._lines[-1][0].split()[0] == "/"
