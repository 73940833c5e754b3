"""The event pane's cgroup column: each event's task's cgroup after its
comm[pid], shown where it says something at the price it costs. At 80
columns the values keep their cells while every row came from one cgroup;
once rows come from several, the column is kept (narrowed if it must be).
A wide pane shows it whole. The `/` filter finds the shown form and the
whole path; the event detail shows the whole path."""

from __future__ import annotations

from ktui.screens.event_detail import EventDetailScreen
from ktui.widgets.event_log import EventLog

from .conftest import make_app, make_feed, plain, polls

DOCKER = "system.slice/docker-" + "0123456789ab" + "cd" * 26 + ".scope"
SESSION = "user.slice/user-1000.slice/session-3.scope"
NARROW, WIDE = (80, 24), (200, 50)


def rows(app) -> list[str]:
    """The pane's lines as drawn (cut to its width), not the full text."""
    log = app.main.events.log_view
    return [log.render_line(y).text.rstrip() for y in range(log.scrollable_content_region.height)]


def cgroup_app(*cgroups):
    return make_app(make_feed(cgroups=cgroups))


async def test_one_cgroup_is_not_shown_at_80_columns_but_is_in_a_wide_pane():
    for size, shown in ((NARROW, False), (WIDE, True)):
        app = cgroup_app(SESSION)
        async with app.run_test(size=size) as pilot:
            polls(app, 3)
            await pilot.pause()
            drawn = [r for r in rows(app) if r]
            assert drawn, size
            assert all(("session-3.scope" in r) is shown for r in drawn), (size, drawn)
            if shown:  # whole, or losing its start: its end says which
                assert all(" bash[" not in r or "session-3.scope bash" not in r for r in drawn)
            assert any("count=" in r for r in drawn)  # the values are there either way


async def test_several_cgroups_are_shown_at_80_columns_with_the_values():
    app = cgroup_app(DOCKER, SESSION)
    async with app.run_test(size=NARROW) as pilot:
        polls(app, 3)
        await pilot.pause()
        drawn = [r for r in rows(app) if r]
        assert any("docker:" in r for r in drawn) and any("-3.scope" in r for r in drawn), drawn
        assert any("count=" in r for r in drawn)  # the values keep room
        assert any("…ion-3.scope " in r for r in drawn)  # a long path loses its start
        assert all(len(r) <= NARROW[0] for r in drawn)


async def test_a_wide_pane_shows_a_container_as_runtime_and_id():
    app = cgroup_app(DOCKER, SESSION)
    async with app.run_test(size=WIDE) as pilot:
        polls(app, 3)
        await pilot.pause()
        drawn = [r for r in rows(app) if r]
        assert any(" docker:0123456789ab " in r for r in drawn), drawn
        assert any(f" {SESSION} " in r for r in drawn)  # a path whole, where there is room


async def test_the_filter_finds_the_shown_form_and_the_whole_path():
    app = cgroup_app(DOCKER, SESSION)
    async with app.run_test(size=WIDE) as pilot:
        polls(app, 3)
        pane, log = app.main.events, app.main.events.log_view
        pane.open_filter()
        pane.filter_input.value = "docker:0123"
        await pilot.pause()
        assert log.window.view and all(r.event.cgroup == DOCKER for r in log.window.view)
        pane.filter_input.value = "system.slice"  # in the path only, not in the shown form
        await pilot.pause()
        assert log.window.view and all(r.event.cgroup == DOCKER for r in log.window.view)
        pane.filter_input.value = "user-1000"
        await pilot.pause()
        assert log.window.view and all(r.event.cgroup == SESSION for r in log.window.view)


async def test_the_event_detail_shows_the_whole_path_and_its_short_form():
    app = cgroup_app(DOCKER)
    async with app.run_test(size=WIDE) as pilot:
        polls(app, 2)
        await pilot.press("enter")
        assert isinstance(app.focused, EventLog)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, EventDetailScreen)
        fields = plain(app.screen.query_one("#fields"))
        assert DOCKER in fields and "(docker:0123456789ab)" in fields
