"""What the screens look like, pinned as SVG snapshots (140x40, and
80x24 / 120x40 / 200x60 in TestSizes).

Everything on screen is deterministic: FakeFeed timestamps and values, its
fake clock for rates, no poll timer (refresh_hz=0), notifications cleared,
no cursor blink. Update after a deliberate change with
`pytest tests/ui/test_snapshots.py --snapshot-update` and look at the SVGs.
"""

from __future__ import annotations

import dataclasses

import pytest
from textual.widgets import Input

from ktui.lang.spec import parse_spec
from ktui.pipeline.replay import Playback
from ktui.record.feed import SystemInfo
from ktui.widgets.event_log import EventLog

from .conftest import SIZE, demo_probeset, make_app, make_feed, polls

# Issue 15: the size terminals open at (80x24), a tmux split, a big screen.
SIZES = [(80, 24), (120, 40), (200, 60)]
# A probe whose events are wider than an 80-column pane: its values must
# show, cut with an ellipsis, before the cpu and the timestamp's precision.
WIDE = parse_spec(
    "do_sys_openat2:c:dfd=a1:s32,path=+0(a2):ustring,oflags=a3:x32,omode=a4:u32,how=a4:x64,caller=rip:symbol"
)


def wide_feed(**kwargs):
    demo = demo_probeset()
    return make_feed(dataclasses.replace(demo, probes=(WIDE,) + demo.probes), **kwargs)


class ReplayingFakeFeed:
    """A FakeFeed with a replay's playback facts (ReplayFeed's), fixed so
    the header is the same every run."""

    host, started = "buildbox", "2026-11-30 12:00:00"

    def __init__(self, feed) -> None:
        self._feed = feed

    def __getattr__(self, name):
        return getattr(self._feed, name)

    def playback(self) -> Playback:
        return Playback(position=12.3, speed=2.0, paused=False, ended=False)


async def tail_landed(pilot, app) -> None:
    """The event pane follows its tail again after a layout: let it land,
    or the screen may be taken one row short (a flaky row)."""
    log = app.main.query_one(EventLog)
    for _ in range(50):
        await pilot.pause()
        if log.scroll_y == log.max_scroll_y:
            break


def settle(app):
    """The same state every run: a few polls, no toasts, no blinking cursors."""

    async def run_before(pilot) -> None:
        while app.main.snapshot is None:  # the auto-pilot starts before the first poll
            await pilot.pause(0.01)
        polls(app, 5)
        await pilot.pause()
        await tail_landed(pilot, app)
        app.clear_notifications()

    return run_before


def no_blink(pilot) -> None:
    for field in pilot.app.screen.query(Input):
        field.cursor_blink = False


class TestMainScreen:
    def test_dashboard(self, snap_compare):
        app = make_app()
        assert snap_compare(app, terminal_size=SIZE, run_before=settle(app))

    def test_paused_and_filtered(self, snap_compare):
        app = make_app()

        async def run_before(pilot) -> None:
            await settle(app)(pilot)
            await pilot.press("p", "slash", *"openat", "enter")
            polls(app, 2)
            no_blink(pilot)
            await pilot.pause()

        assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


class TestSizes:
    """The dashboard and a replay at 80x24, 120x40 and 200x60: a one-line
    header, event values, the selected probe's numbers."""

    @pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
    def test_dashboard(self, snap_compare, size):
        app = make_app(wide_feed())
        assert snap_compare(app, terminal_size=size, run_before=settle(app))

    @pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
    def test_replay(self, snap_compare, size):
        info = SystemInfo(kernel="6.1.0-57-amd64", buffer="replay", source="demo.ktrec")
        app = make_app(ReplayingFakeFeed(wide_feed(replay=True, info=info)))
        assert snap_compare(app, terminal_size=size, run_before=settle(app))

    def test_narrow_stats_come_back_under_the_events(self, snap_compare):
        app = make_app(wide_feed())

        async def run_before(pilot) -> None:
            await settle(app)(pilot)
            log = app.main.query_one(EventLog)
            tall = log.size.height
            await pilot.press("s")
            # the stats pane's layout lands, then the log (following its
            # tail) keeps the newest row in view: wait for both, or the
            # screen is taken in between (it flaked under CPU load)
            for _ in range(100):
                await pilot.pause()
                if log.size.height < tall and log.scroll_y == log.max_scroll_y:
                    break
            assert log.size.height < tall and log.scroll_y == log.max_scroll_y

        assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


class TestHelp:
    def test_help(self, snap_compare):
        app = make_app()
        assert snap_compare(app, press=["question_mark"], terminal_size=SIZE, run_before=settle(app))


class TestProbeDialog:
    def test_add_with_spec_error(self, snap_compare):
        app = make_app()

        async def run_before(pilot) -> None:
            await settle(app)(pilot)
            await pilot.press("a", *"vfs_read:x:a1")
            no_blink(pilot)
            await pilot.pause()

        assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


class TestEventDetail:
    def test_detail_of_a_return_event(self, snap_compare):
        app = make_app()

        async def run_before(pilot) -> None:
            await settle(app)(pilot)
            await pilot.press("enter", "up", "enter")  # to the events, one row up, detail
            await pilot.pause()

        assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


class TestConfirm:
    def test_delete_asks_first(self, snap_compare):
        app = make_app()
        assert snap_compare(app, press=["d"], terminal_size=SIZE, run_before=settle(app))


class TestDrillDown:
    """Issue 14: at 80x24, the stats pane opened under the events (`s`),
    Enter on a top comm: the events of that comm only, the status line
    saying so and how to clear it, the cursor on the comm."""

    def test_drill_down_on_a_comm_at_80x24(self, snap_compare):
        from ktui.lang.probeset import loads_probeset
        from ktui.pipeline.drilldown import COMM, Pick

        from .test_drilldown import SET, move_to
        from .test_navigation import focus
        from ktui.widgets.stats_pane import StatsPane

        app = make_app(make_feed(loads_probeset(SET), lossy=set(), fail={}, events_per_drain=40))

        async def run_before(pilot) -> None:
            await settle(app)(pilot)
            await pilot.press("s")
            await focus(pilot, StatsPane)
            await move_to(pilot, app.main.query_one(StatsPane), Pick(COMM, "cat"))
            await pilot.press("enter")
            polls(app, 2)
            await pilot.pause()
            await tail_landed(pilot, app)
            app.clear_notifications()

        assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
