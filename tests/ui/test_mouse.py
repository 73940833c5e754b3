"""Issue 15: the mouse, where Textual gives it: a click selects a probe, a
click on its mark switches it (really: the feed detaches it, as space
does), the wheel scrolls the event pane and stays where it was put."""

from __future__ import annotations

from textual import events

from ktui.record.feed import ProbeState
from ktui.widgets.event_log import EventLog
from ktui.widgets.probe_table import ProbeTable

from .conftest import make_app, polls

ROWS_TOP = 2  # the table's border and header row


def probe_id(app, name: str) -> int:
    return next(i for i, s in app.main.statuses.items() if s.probe.name == name)


async def test_click_selects_a_row_and_a_click_on_its_mark_switches_it(app):
    async with app.run_test(size=(140, 40)) as pilot:
        polls(app, 2)
        await pilot.pause()
        table = app.main.query_one(ProbeTable)
        openat = probe_id(app, "openat")
        row = table.probe_ids.index(openat)
        await pilot.click(ProbeTable, offset=(12, ROWS_TOP + row))  # on its name
        await pilot.pause()
        assert table.selected_id == openat
        assert app.feed.statuses()[openat].state is ProbeState.ATTACHED  # selecting did not switch it
        await pilot.click(ProbeTable, offset=(2, ROWS_TOP + row))  # on its mark
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.feed.statuses()[openat].state is ProbeState.OFF  # the feed switched it off
        assert table.selected_id == openat and table.has_focus  # no jump to the events
        batch = app.feed.drain()
        assert openat not in batch.probe_counts()  # it really stopped
        await pilot.click(ProbeTable, offset=(2, ROWS_TOP + row))
        await app.workers.wait_for_complete()
        assert app.feed.statuses()[openat].state is ProbeState.ATTACHED


def wheel(log: EventLog, cls) -> None:
    log.post_message(cls(log, 5, 3, 0, 0, 0, False, False, False))


async def test_wheel_scrolls_the_events_and_new_events_do_not_pull_it_back(app):
    async with app.run_test(size=(140, 40)) as pilot:
        polls(app, 30)
        await pilot.pause()
        log = app.main.query_one(EventLog)
        assert log.max_scroll_y > 10
        end = log.scroll_y
        assert end == log.max_scroll_y  # following the tail
        for _ in range(3):
            wheel(log, events.MouseScrollUp)
        await pilot.pause()
        assert log.scroll_y == end - 9
        polls(app, 5)  # new events arrive: the rows being read stay put
        await pilot.pause()
        assert log.scroll_y < log.max_scroll_y
        row = log.selected
        assert row is not None and log.scroll_y <= log.cursor < log.scroll_y + log.scrollable_content_region.height
        for _ in range(40):
            wheel(log, events.MouseScrollDown)
        await pilot.pause()
        polls(app, 3)  # back at the bottom: following again
        await pilot.pause()
        assert log.scroll_y == log.max_scroll_y
        assert log.cursor == len(log.window) - 1
