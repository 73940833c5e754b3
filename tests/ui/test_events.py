"""The event pane: streaming, pause, filter, clear, detail, and floods."""

from __future__ import annotations

from ktui.screens.event_detail import EventDetailScreen
from ktui.screens.main import MainScreen
from ktui.widgets.event_log import EventLog
from ktui.widgets.event_window import BLOCK

from .conftest import SIZE, make_app, make_feed, plain, polls


def lines(app) -> list[str]:
    return app.main.events.log_view.lines()


def title(app) -> str:
    pane = app.main.events
    return f"{pane.border_title} | {pane.border_subtitle}"


async def test_events_stream_formatted_by_type(app):
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 3)
        await pilot.pause()
        shown = lines(app)
        assert len(shown) == 4 * 7  # the poll at start-up and three more
        first = shown[0]
        assert first == "4242.000000 000 bash[1000] vfs_read:r ret=0 count=40503 lat=256ns"
        assert any("ret=-9 (EBADF)" in line for line in shown)
        assert any('fname="tab\\there"' in line for line in shown)  # escaped, never raw
        assert any(line.split()[3] == "openat" and "dfd=-" in line for line in shown)  # s32 signed
        assert app.main.events.log_view.cursor == len(shown) - 1  # following the tail


async def test_symbols_use_the_symbolizer():
    from ktui.lang.model import ProbeSet
    from ktui.lang.spec import parse_spec

    feed = make_feed(ProbeSet(name="s", probes=(parse_spec("kmem_cache_alloc:r:ret=retval:x64,caller=rip:symbol"),)))
    app = make_app(feed)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "caller=sym_0+0x0" in lines(app)[0] and "ret=0x0" in lines(app)[0]


async def test_pause_stops_new_rows_and_follow_resumes(app):
    async with app.run_test(size=SIZE) as pilot:
        before = lines(app)
        await pilot.press("p")
        polls(app, 3)
        await pilot.pause()
        assert lines(app) == before
        assert "paused, 21 not shown" in title(app)
        assert "PAUSED" in app.main.query_one("#status").render().plain
        assert app.main.check_action("follow", ()) and not app.main.check_action("pause", ())
        await pilot.press("p")
        polls(app, 1)
        await pilot.pause()
        assert len(lines(app)) == len(before) + 7
        assert "following" in app.main.query_one("#status").render().plain


async def test_filter_as_you_type_then_escape(app):
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 3)
        await pilot.press("slash")
        await pilot.press(*"OPENAT")  # case does not matter
        await pilot.pause()
        shown = lines(app)
        assert shown and all("openat" in line for line in shown)
        assert "filter: 'openat'" in title(app)
        polls(app, 1)  # new rows are filtered too
        await pilot.pause()
        assert all("openat" in line for line in lines(app)) and len(lines(app)) > len(shown)
        await pilot.press("escape")
        await pilot.pause()
        assert any("vfs_read" in line for line in lines(app))
        assert isinstance(app.focused, EventLog)


async def test_filter_matches_comm_and_values(app):
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 3)
        pane = app.main.events
        pane.open_filter()
        pane.filter_input.value = "sshd["
        await pilot.pause()
        assert lines(app) and all("sshd[" in line for line in lines(app))
        pane.filter_input.value = "EBADF"
        await pilot.pause()
        assert lines(app) and all("(EBADF)" in line for line in lines(app))


async def test_clear_empties_the_pane(app):
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 2)
        await pilot.press("c")
        await pilot.pause()
        assert lines(app) == []
        assert app.main.events.log_view.selected is None
        polls(app, 1)
        assert len(lines(app)) == 7


async def test_enter_opens_the_event_detail(app):
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 2)
        await pilot.press("enter")  # on the probe table: go to its events
        assert isinstance(app.focused, EventLog)
        await pilot.press("up")  # the row before the last: an openat event
        row = app.main.events.log_view.selected
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, EventDetailScreen) and screen.row is row
        fields = plain(screen.query_one("#fields"))
        values = plain(screen.query_one("#values"))
        assert "do_sys_openat2:c:dfd=a1:s32,fname=+0(a2):ustring" in fields
        assert f"{row.event.pid} / {row.event.tid}" in fields
        assert "dfd" in values and "s32" in values and "ustring" in values
        assert "0x" in values  # raw values are shown in hex beside the formatted ones
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_cursor_stays_on_its_row_while_new_rows_arrive(app):
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 2)
        log = app.main.events.log_view
        log.focus()
        await pilot.press("up", "up")
        row = log.selected
        polls(app, 2)
        await pilot.pause()
        assert log.selected is row


async def test_flood_keeps_the_window_bounded_and_counts_skipped():
    feed = make_feed(events_per_drain=100_000)
    app = make_app(feed, window=2000)
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 4)
        await pilot.pause()
        pane = app.main.events
        assert len(pane.log_view.window) == 2000
        # Only the blocks of rows drawn became Events: the last screenful
        # of the last batch (issue 15: all 2000 of every batch were decoded,
        # ~9 ms a poll, for the ~30 rows on screen).
        assert 0 < feed.decoded <= 2 * BLOCK + SIZE[1]
        # The rest of the window is still there, decoded when scrolled to.
        newest = pane.log_view.window.view[-1].event.ts_ns
        oldest = pane.log_view.window.view[0].event
        assert oldest.ts_ns <= newest and feed.decoded <= 3 * BLOCK + SIZE[1]
        assert pane.skipped == 5 * 98_000
        # per second over the last stats interval (1 s, 2 polls), not the total
        assert "showing 4000 of 200.0k events/s, 196.0k skipped/s" in title(app)
        polls(app, 4)
        await pilot.pause()
        assert "showing 4000 of 200.0k events/s, 196.0k skipped/s" in title(app)
        # 400k events fed, bounded work: the decoded count above is the
        # measure (no wall-clock bound, which a loaded machine would break)


async def test_window_limit_also_bounds_the_filtered_view():
    feed = make_feed(events_per_drain=3000)
    app = make_app(feed, window=500)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.main.events
        pane.open_filter()
        pane.filter_input.value = "openat"
        await pilot.pause()
        polls(app, 3)
        await pilot.pause()
        assert 0 < len(pane.log_view.window) <= 500
        assert len(pane.log_view.window.rows) == 500


async def test_paused_with_a_filter_says_the_count_is_unfiltered(app):
    """Issue 15: `10709 not shown` with a filter counted every event, not
    the matching ones (events that arrive while paused are not decoded)."""
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 2)
        await pilot.press("p")
        polls(app, 3)
        await pilot.pause()
        assert "21 not shown (p: follow)" in title(app)  # no filter: every event is what would show
        await pilot.press("slash", *"openat", "enter")
        await pilot.pause()
        assert "21 not shown (unfiltered) (p: follow)" in title(app)


async def test_under_the_help_the_timer_holds_events_and_the_stats_read_shows_them():
    """Issue 15: each repaint of the dashboard under a modal re-renders the
    whole screen as the modal's background. While covered, the timer's polls
    drain and hold; the stats read (once a second) and the first poll after
    the dashboard is back apply everything held, no event uncounted."""
    feed = make_feed(events_per_drain=700)
    app = make_app(feed, window=500)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.main.events
        await pilot.press("question_mark")
        seen, skipped, drained = pane.log_view.window._next_seq, pane.skipped, feed._seq
        for _ in range(3):
            app.poll(read_stats=False, hold_if_covered=True)
        assert feed._seq == drained + 3 * 700  # drained...
        assert pane.log_view.window._next_seq == seen  # ...held, not drawn behind the help
        app.poll(read_stats=True, hold_if_covered=True)  # the stats read applies them
        assert pane.skipped == skipped + 4 * 700 - 500  # every event counted
        newest = pane.log_view.window.view[-1].event
        assert newest == feed.make_event(*feed_probe(feed, newest.probe_id), feed._seq - 1)
        app.poll(read_stats=False, hold_if_covered=True)
        await pilot.press("escape")
        app.poll(read_stats=False, hold_if_covered=True)  # back on top: held and new, drawn
        assert pane.skipped == skipped + 6 * 700 - 2 * 500
        assert not app._held


def feed_probe(feed, probe_id):
    return probe_id, feed.statuses()[probe_id].probe


def test_the_detail_names_the_mechanism_the_probe_runs_on():
    """Issue #29: the probe table said `attached fentry` while the detail
    said `kind call (kprobe)`. The kind row says what it runs on, as the
    table does, and names no mechanism before one is known."""
    from rich.console import Console

    from ktui.record.feed import Event, ProbeState, ProbeStatus
    from ktui.lang.spec import parse_spec
    from ktui.screens.event_detail import detail_tables
    from ktui.widgets.event_window import EventRow

    def kind_row(probe, state, via):
        row = EventRow(1, Event(0, 1, 0, 7, 7, "dd", None, (5,)), probe)
        fields, _values = detail_tables(row, ProbeStatus(0, probe, state, via=via), None)
        console = Console(width=100, color_system=None)
        with console.capture() as out:
            console.print(fields)
        return next(line.split(None, 1)[1].strip() for line in out.get().splitlines()
                    if line.startswith("kind"))

    call, ret = parse_spec("vfs_read:c:a3"), parse_spec("vfs_read:r:retval")
    assert kind_row(call, ProbeState.ATTACHED, "fentry") == "call (fentry)"
    assert kind_row(ret, ProbeState.ATTACHED, "fexit") == "return (fexit)"
    assert kind_row(call, ProbeState.ATTACHED, "kprobe") == "call (kprobe)"
    assert kind_row(ret, ProbeState.ATTACHED, "kretprobe") == "return (kretprobe)"
    assert kind_row(call, ProbeState.PENDING, "") == "call (not attached yet)"
    assert kind_row(call, ProbeState.OFF, "") == "call (not attached)"
    assert kind_row(call, ProbeState.ATTACHED, "") == "call"  # a feed that does not say
