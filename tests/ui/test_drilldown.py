"""Issue 14's drill-down on the dashboard: with the stats pane focused, the
arrows move a cursor over the lines that stand for events (latency buckets,
errnos, top comms, top values, value buckets); Enter shows only those events
in the event pane and the status line says so; Esc shows every event again.
A counting-only probe says it has no events instead of an empty pane."""

from __future__ import annotations

from ktui.lang.probeset import loads_probeset
from ktui.pipeline.drilldown import BUCKET, CGROUP, COMM, ERRNO, LATENCY, VALUE, Pick
from ktui.record.histogram import slot_bounds
from ktui.widgets.event_log import EventLog
from ktui.widgets.event_pane import EventPane
from ktui.widgets.stats_pane import StatsPane
from ktui.widgets.status_line import StatusLine

from tests.fakefeed import CGROUPS

from .conftest import Notes, make_app, make_feed, polls, settles
from .test_navigation import focus

SET = """name: drill
probes:
  - spec: reads=vfs_read:r:retval,a3 hist(a3) count(comm,a3)
  - spec: counting=vfs_write:c hist(a3) count(comm)
"""
SIZE = (140, 45)


def app_for(**kwargs):
    return make_app(make_feed(loads_probeset(SET), lossy=set(), fail={}, events_per_drain=40), **kwargs)


def header(app) -> str:
    return app.main.query_one(StatusLine)._shown.plain


def shown_events(app):
    return [row.event for row in app.main.query_one(EventLog).window.view]


async def start(pilot, app):
    polls(app, 6)
    await pilot.pause()
    await focus(pilot, StatsPane)
    return app.main.query_one(StatsPane)


async def move_to(pilot, pane: StatsPane, pick: Pick, tries: int = 40) -> None:
    """Down (or up) until the cursor is on `pick`."""
    await pilot.pause()
    for key in ("up", "down"):  # from the top, then down through every line
        for _ in range(tries if key == "down" else 0):
            if pane.cursor_pick == pick:
                return
            await pilot.press(key)
    assert pane.cursor_pick == pick, pane.cursor_pick


async def drill(pilot, app, pick: Pick, view_presses: int = 0):
    pane = await start(pilot, app)
    for _ in range(view_presses):
        await pilot.press("v")
    await move_to(pilot, pane, pick)
    everything = len(shown_events(app))
    await pilot.press("enter")
    await pilot.pause()
    return everything


async def test_a_top_comm_shows_only_its_events_and_esc_shows_all_again():
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        everything = await drill(pilot, app, Pick(COMM, "cat"))
        events = shown_events(app)
        assert 0 < len(events) < everything
        assert {e.comm for e in events} == {"cat"}
        assert "drill-down: reads comm=cat (Esc clears)" in header(app)
        assert "drill-down: comm=cat" in str(app.main.query_one(EventPane).border_title)
        # new events are filtered as they arrive
        polls(app, 3)
        await pilot.pause()
        assert len(shown_events(app)) > len(events) and {e.comm for e in shown_events(app)} == {"cat"}
        await pilot.press("escape")
        await pilot.pause()
        assert "drill-down" not in header(app)
        assert len({e.comm for e in shown_events(app)}) > 1


async def test_a_top_cgroup_shows_only_its_events_and_esc_shows_all_again():
    app = make_app(make_feed(loads_probeset(SET), lossy=set(), fail={}, events_per_drain=40, cgroups=CGROUPS))
    async with app.run_test(size=SIZE) as pilot:
        everything = await drill(pilot, app, Pick(CGROUP, "system.slice/sshd.service"))
        events = shown_events(app)
        assert 0 < len(events) < everything
        assert {e.cgroup for e in events} == {"system.slice/sshd.service"}
        assert "drill-down: reads cgroup=system.slice/sshd.service (Esc clears)" in header(app)
        await pilot.press("escape")
        await pilot.pause()
        assert "drill-down" not in header(app)
        assert len({e.cgroup for e in shown_events(app)}) > 1


async def test_an_errno_shows_the_returns_that_failed_with_it():
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await drill(pilot, app, Pick(ERRNO, 14))
        events = shown_events(app)
        assert events and {e.values[0] for e in events} == {-14}
        assert "retval=-14 (EFAULT)" in header(app)


async def test_a_latency_bucket_shows_the_returns_that_took_that_long():
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await drill(pilot, app, Pick(LATENCY, 10))
        low, high = slot_bounds(10)
        events = shown_events(app)
        assert events and all(low <= e.latency_ns <= high for e in events)
        assert "reads lat in [512ns, 1.02us)" in header(app)


async def test_a_value_bucket_shows_the_events_whose_value_is_in_it():
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await drill(pilot, app, Pick(BUCKET, 13), view_presses=1)  # value histogram
        events = shown_events(app)
        assert events and {e.values[1] for e in events} == {4096}
        assert "reads a3 in [4096, 8192)" in header(app)


async def test_a_top_value_shows_the_events_with_that_key():
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await drill(pilot, app, Pick(VALUE, ("cat", 4096)), view_presses=2)  # top values
        events = shown_events(app)
        assert events and {(e.comm, e.values[1]) for e in events} == {("cat", 4096)}
        assert "reads comm=cat a3=4096" in header(app)


async def test_a_counting_only_probe_says_it_has_no_events():
    notes = Notes()
    app = app_for()
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        polls(app, 6)
        await pilot.pause()
        await pilot.press("down")  # the counting probe
        assert app.main.selected.probe.name == "counting"
        pane = await start(pilot, app)
        await move_to(pilot, pane, Pick(COMM, "bash"))
        everything = len(shown_events(app))
        await pilot.press("enter")
        await pilot.pause()
        assert notes.any("counting emits no events (counting only")
        assert "drill-down" not in header(app)
        assert len(shown_events(app)) == everything > 0  # the pane was left as it was


async def test_esc_clears_a_typed_filter_first_then_the_drill_down():
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await drill(pilot, app, Pick(COMM, "cat"))
        await pilot.press("slash", *"reads", "enter")
        await pilot.pause()
        log = app.main.query_one(EventLog)
        assert log.window.filter == "reads" and log.window.drill is not None
        await pilot.press("escape")
        await pilot.pause()
        assert log.window.filter == "" and log.window.drill is not None
        await pilot.press("escape")
        await pilot.pause()
        assert log.window.drill is None


async def test_the_keys_are_in_the_footer_and_help():
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        pane = await start(pilot, app)
        assert pane.has_focus

        def footer() -> dict[str, str]:
            return {k.key: k.description for k in app.screen.query("FooterKey")}

        # the footer recomposes after a refresh: wait for what it should show, then look
        await settles(pilot, lambda: footer().get("enter") == "Drill down", "Drill down in the footer")
        assert footer().get("enter") == "Drill down" and "escape" not in footer()
        await pilot.press("enter")
        await pilot.pause()
        await settles(pilot, lambda: footer().get("escape") == "All events", "All events in the footer")
        assert footer().get("escape") == "All events"
        await pilot.press("question_mark")
        await pilot.pause()
        from .conftest import plain

        keys = plain(app.screen.query_one("#keys"))
        assert "stats pane" in keys and "show only the events behind the line under the cursor" in keys
        assert "Clear the drill-down" in keys


async def test_the_cursor_shows_only_while_the_pane_has_focus():
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        pane = await start(pilot, app)
        body = pane.query_one("#stats-body")
        assert any("reverse" in str(span.style) for span in body.content.spans)
        await pilot.press("tab")
        await pilot.pause()
        assert not pane.has_focus
        assert not any("reverse" in str(span.style) for span in body.content.spans)


async def test_another_view_starts_its_cursor_on_its_first_line():
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        pane = await start(pilot, app)
        await move_to(pilot, pane, Pick(COMM, "bash"))
        await pilot.press("v")  # value histogram: its first bucket, not the comm's place
        await pilot.pause()
        assert pane.cursor_pick == Pick(BUCKET, 3)  # 7, the smallest size counted


async def test_deleting_the_drilled_probe_ends_the_drill_down():
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await drill(pilot, app, Pick(COMM, "cat"))
        await pilot.press("tab")  # back to the probe table, on reads
        await pilot.pause()
        assert app.main.selected.probe.name == "reads"
        await pilot.press("d", "y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "reads" not in {s.probe.name for s in app.feed.statuses().values()}
        assert app.main.query_one(EventLog).window.drill is None
        assert "drill-down" not in header(app)
