"""A wildcard probe in the dashboard: the probe table says how many
functions (events) it matched, `tcp_*:c (120)`; the stats pane's counters
open with `by function: 37 of 120 hit` and its top functions (hits,
share, a return probe's mean latency), and `v` shows more of them, at
80x24 and wide."""

from __future__ import annotations

from ktui.lang.probeset import loads_probeset
from ktui.widgets.stats_pane import StatsPane

from .conftest import make_app, make_feed, polls, settles

SET = """name: wild
probes:
  - spec: tcp_*:r
  - spec: syscalls/sys_enter_*:t
  - spec: vfs_read:c
"""


def text(pane, selector: str) -> str:
    widget = pane.query_one(selector)
    return str(widget.render()) if widget.display else ""


def _app():
    return make_app(make_feed(loads_probeset(SET), lossy=set(), fail={}, events_per_drain=500))


async def _check(size):
    app = _app()
    async with app.run_test(size=size) as pilot:
        polls(app, 4)
        await pilot.pause()
        names = [app.main.table.get_cell(str(i), "name").plain for i in (1, 2, 3)]
        assert names == ["tcp_*:r (120)", "syscalls/sys_enter_*:t (10)", "vfs_read:c"]
        if size[0] < 120:
            await pilot.press("s")  # a narrow window folds the stats pane away: `s` shows it
            await pilot.pause()
        pane = app.main.query_one(StatsPane)

        def fitted() -> bool:
            lines = text(pane, "#stats-body").splitlines()
            width = pane.scrollable_content_region.width
            return bool(lines) and lines[0].startswith("by function") and all(len(line) <= width for line in lines)

        # the body is laid out again once the scrollbar its length brings
        # has come (call_after_refresh): wait for that, then look
        await settles(pilot, fitted, "the breakdown fitted to the pane")
        body = text(pane, "#stats-body")
        lines = body.splitlines()
        assert lines[0] == "by function: 37 of 120 hit", body
        assert lines[1].split() == ["function", "hits", "%", "avg"]
        first = lines[2].split()
        assert first[0] == "tcp_sendmsg" and first[2].endswith("%") and first[3].endswith("us")
        assert "32 more (" in body and "latency  p50" in body  # the top 5, then the rest in one line
        width = pane.scrollable_content_region.width
        # every line fits, the latency histogram's bars too: they were sized
        # before the scrollbar came with the longer body, and wrapped
        assert all(len(line) <= width for line in lines), (width, [l for l in lines if len(l) > width])
        assert "counters | by function" in text(pane, "#stats-tabs")
        await pilot.press("v")
        await pilot.pause()
        view = text(pane, "#stats-values").splitlines()
        assert view[0] == "by function: 37 of 120 hit" and len(view) == 2 + 37
        assert all(len(line) <= width for line in view)
        # a tracepoint pattern: by event, no latency column
        await pilot.press("down")
        await pilot.pause()
        assert "counters | by event" in text(pane, "#stats-tabs")
        view = text(pane, "#stats-values").splitlines()
        assert view[0] == "by event: 10 of 10 hit" and view[1].split() == ["event", "hits", "%"]
        assert view[2].split()[0] == "syscalls/sys_enter_read"
        # a plain probe: no breakdown
        await pilot.press("down")
        await pilot.pause()
        assert "by function" not in text(pane, "#stats-body") and text(pane, "#stats-tabs") == ""


async def test_the_breakdown_at_80x24():
    await _check((80, 24))


async def test_the_breakdown_wide():
    await _check((200, 50))
