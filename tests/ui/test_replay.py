"""Issue 15: a replay tells the truth about itself. The header says where
and when the recording was made and where the playback is (never this
machine's kprobes/BTF/root marks); p, +, -, E pause, speed up, slow down and
jump to the end, and the end is said on screen. A recording written by the
first recording format still replays (tests/fixtures/format1.ktrec, made by
ktui's first writer: tests/fixtures/make_format1.py); an unknown format is
refused in one line naming the versions."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

from ktui.pipeline.recording import MAGIC
from ktui.pipeline.replay import ReplayFeed
from ktui.record.histogram import HIST_SLOTS
from ktui.widgets.status_line import StatusLine

from .conftest import make_app, settles

FORMAT1 = Path(__file__).parent.parent / "fixtures" / "format1.ktrec"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_format_1_recording_replays_every_event():
    feed = ReplayFeed(str(FORMAT1), speed=0)
    events = []
    while not feed.finished:
        events += feed.drain().events()
    assert len(events) == 21 and not feed.truncated
    names = {s.probe.name for s in feed.statuses().values()}
    assert names == {"vfs_read:c:a3", "vfs_read:r:retval:s64", "do_sys_openat2:c:fname=+0(a2):ustring"}
    by_probe = {e.probe_id: e for e in events}
    assert by_probe[3].values == ("/tmp/f20",) or by_probe[3].values[0].startswith("/tmp/f")
    stats = feed.stats().probes[2]
    assert len(stats.hist) == HIST_SLOTS and sum(stats.hist) == 7  # 64 slots read as 65
    assert feed.playback().ended
    feed.close()


def test_an_unknown_format_is_refused_in_one_line(tmp_path):
    data = FORMAT1.read_bytes()
    head = json.dumps({"version": 99, "kernel": "x"}).encode()
    _, length = struct.unpack_from("<4sI", data, len(MAGIC))
    rest = data[len(MAGIC) + 8 + length:]
    bad = tmp_path / "future.ktrec"
    bad.write_bytes(MAGIC + struct.pack("<4sI", b"HEAD", len(head)) + head + rest)
    run = subprocess.run([sys.executable, "-m", "ktui", "replay", str(bad)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "format 99" in lines[0] and "formats 1, 2, 3" in lines[0] and "Traceback" not in run.stderr


def header(app) -> str:
    return app.main.query_one(StatusLine)._shown.plain


def footer_descriptions(app) -> set[str]:
    return {k.description for k in app.screen.query("FooterKey")}


async def test_header_says_where_and_when_and_the_keys_drive_the_playback():
    clock = Clock()
    feed = ReplayFeed(str(FORMAT1), speed=1.0, clock=clock)
    app = make_app(feed)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        line = header(app)
        assert "format1.ktrec" in line and "kernel 6.18.44-fc-v973" in line
        assert "2026-" in line  # when it was recorded (local time)
        assert "kprobes" not in line and "root" not in line and "✗" not in line
        assert "▶ playing" in line and "×1" in line
        clock.now += 0.45  # 0.45 s of recording: its first batch (6 events 0.1 s apart) is due
        app.poll(read_stats=True)
        await pilot.pause()
        first = feed.playback().position
        assert first == 0.5  # the last event shown
        assert "0.5s" in header(app)
        await pilot.press("plus")
        assert feed.speed == 2.0 and "×2" in header(app)
        await pilot.press("minus", "minus")
        assert feed.speed == 0.5 and "×0.5" in header(app)
        await pilot.press("p")
        assert "PAUSED" in header(app)
        clock.now += 10  # paused: nothing more is played
        app.poll(read_stats=True)
        assert feed.playback().position == first
        await pilot.press("p")  # play on
        await pilot.press("E")  # to the end
        for _ in range(5):
            app.poll(read_stats=True)
        await pilot.pause()
        assert feed.playback().ended
        assert "END" in header(app) and "2.0s" in header(app)  # 21 events 0.1 s apart


async def test_replay_keys_are_in_the_footer_and_help_only_in_a_replay():
    feed = ReplayFeed(str(FORMAT1), speed=1.0, clock=Clock())
    app = make_app(feed)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        assert app.main.check_action("to_end", ()) and app.main.check_action("faster", ())
    live = make_app()
    async with live.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        assert not live.main.check_action("to_end", ())


async def test_a_replay_hides_the_keys_that_cannot_work_there():
    """Issue 15: a recording has no kernel. Add, edit, delete and open fail
    there (ReplayFeed refuses to add or remove a probe): the footer and the
    palette leave them out and the keys do nothing. What works stays: on/off,
    browse (read-only), write (the recorded probes as a probe set), pause."""
    hidden, kept = {"a", "e", "d", "o"}, {"space", "b", "w", "p"}

    def footer(app) -> set[str]:
        return {k.key for k in app.screen.query("FooterKey")}

    feed = ReplayFeed(str(FORMAT1), speed=1.0, clock=Clock())
    app = make_app(feed)
    async with app.run_test(size=(200, 40)) as pilot:
        app.poll(read_stats=True)
        await pilot.pause()
        assert app.main.selected is not None  # edit/delete would apply to it, live
        # the footer recomposes after a refresh: wait for it, then look
        await settles(pilot, lambda: not hidden & footer(app) and kept <= footer(app), "the replay's footer")
        shown = footer(app)
        assert not hidden & shown and kept <= shown, shown
        for key in sorted(hidden):
            await pilot.press(key)
            await pilot.pause()
            assert app.screen is app.main, key  # no dialog opened
        assert len(feed.statuses()) == len(app.main.order) > 0
    live = make_app()
    async with live.run_test(size=(200, 40)) as pilot:
        await pilot.pause()
        await settles(pilot, lambda: hidden | kept <= footer(live), "the live footer")
        assert hidden | kept <= footer(live)


async def test_the_playback_keys_stay_in_a_narrow_replays_footer():
    """At 80x24 (and 60x20) the footer cannot hold every key: a replay keeps
    its playback keys (p, +, -, E) and `s` (the folded stats) before the
    others (the audit of issue 15 found only `+ Faster - Slower` at 80
    columns: no way to see that `p` pauses or `E` jumps to the end)."""
    for size in ((80, 24), (60, 20)):
        feed = ReplayFeed(str(FORMAT1), speed=1.0, clock=Clock())
        app = make_app(feed)
        async with app.run_test(size=size) as pilot:
            app.poll(read_stats=True)
            await pilot.pause()
            await pilot.pause()
            shown = {k.key for k in app.screen.query("FooterKey")}
            wanted = {"p", "plus", "minus", "q", "question_mark"} | ({"E", "s"} if size[0] >= 80 else set())
            assert wanted <= shown, (size, shown)


async def test_a_paused_replay_offers_play_not_follow_in_its_footer_and_event_pane():
    feed = ReplayFeed(str(FORMAT1), speed=1.0, clock=Clock())
    app = make_app(feed)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("p")
        await pilot.pause()
        await settles(pilot, lambda: "Play" in footer_descriptions(app), "Play in the paused footer")
        described = footer_descriptions(app)
        assert "Play" in described and "Follow" not in described, described
        # pausing a replay stops the playback itself: nothing arrives to be
        # "not shown" (the pane's title said "0 not shown (p: follow)")
        title = str(app.main.events.border_title)
        assert "paused" in title and "p: play" in title and "not shown" not in title, title
        await pilot.press("p")
        assert not feed.paused and not app.main.events.paused


async def test_rates_hold_between_recorded_snapshots_and_the_meter_says_the_end():
    """The dashboard reads stats once a second; a replay's stats are the
    recording's snapshots, which change only when the playback reaches the
    next one. A read that finds the same snapshot is no news: before, it
    made every rate unknown ("-" in the table, flickering with the value),
    and after the end the event meter kept its last "N events/s"."""
    clock = Clock()
    feed = ReplayFeed(str(FORMAT1), speed=1.0, clock=clock)
    app = make_app(feed)
    async with app.run_test(size=(120, 40)) as pilot:
        for step in (0.55, 0.5):  # two recorded snapshots reached (at 0.5 s and 1.4 s)
            clock.now += step
            app.poll(read_stats=True)
        clock.now += 0.5
        app.poll(read_stats=True)
        app.poll(read_stats=True)
        await pilot.pause()
        assert app.main.rates and all(r is not None for r in app.main.rates.values())
        before = dict(app.main.rates)
        clock.now += 0.1  # the same snapshot again
        app.poll(read_stats=True)
        assert app.main.rates == before
        await pilot.press("E")
        for _ in range(5):
            app.poll(read_stats=True)
        await pilot.pause()
        assert feed.playback().ended
        assert "events/s" not in str(app.main.events.border_subtitle)
        assert "end" in str(app.main.events.border_subtitle)


async def test_the_probe_table_needs_no_sideways_scrollbar_at_any_size():
    """Columns fitted to the table's width, names given the room left: never
    so wide that a horizontal scrollbar takes a row (a blank line at 80 and
    100 columns when they filled it exactly), at the audit's sizes."""
    for width, height in ((60, 20), (80, 24), (100, 30), (120, 40), (160, 45), (200, 60)):
        app = make_app(ReplayFeed(str(FORMAT1), speed=1.0, clock=Clock()))
        async with app.run_test(size=(width, height)) as pilot:
            app.poll(read_stats=True)
            await pilot.pause()
            table = app.main.table
            assert not table.show_horizontal_scrollbar, width
            assert table.virtual_size.width <= table.scrollable_content_region.width, width
            if width >= 80:  # vfs_read:r:retval:s64 whole, state and numbers beside it
                assert "vfs_read:r:retval:s64" in [str(table.get_cell_at((1, 1)))], width


async def test_a_replay_without_probes_does_not_offer_to_add_one(tmp_path):
    """A recording whose events never came (the probes only counted while
    their program loaded) holds no probe to show. The stats pane said "Press
    a to add one, o to open a probe set": keys a replay does not have. And
    its empty sparkline drew a row of bars for nothing."""
    data = FORMAT1.read_bytes()
    _, length = struct.unpack_from("<4sI", data, len(MAGIC))
    head_only = tmp_path / "head.ktrec"
    head_only.write_bytes(data[: len(MAGIC) + 8 + length] + struct.pack("<4sI", b"END ", 0))
    app = make_app(ReplayFeed(str(head_only), speed=1.0, clock=Clock()))
    async with app.run_test(size=(120, 30)) as pilot:
        app.poll(read_stats=True)
        await pilot.pause()
        pane = app.main.query_one("StatsPane")
        head = str(pane.query_one("#stats-head").render())
        assert "Press a" not in head and "no probe" in head.lower(), head
        assert not pane.query_one("#rate-spark").display
    live = make_app(make_feed_without_probes())
    async with live.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert "Press a to add one" in str(live.main.query_one("StatsPane").query_one("#stats-head").render())


def make_feed_without_probes():
    from ktui.lang.model import ProbeSet

    from .conftest import make_feed

    return make_feed(ProbeSet(name="empty"))


async def test_switching_a_replayed_probe_says_its_events_are_hidden():
    """In a replay, on/off only shows or hides a probe's events: nothing is
    detached, and its counts are the recording's (they keep growing). The
    audit saw `off` beside growing hits, and the footer's `space On/off`."""
    from ktui.widgets.probe_table import ProbeTable

    from .conftest import Notes

    notes = Notes()
    feed = ReplayFeed(str(FORMAT1), speed=1.0, clock=Clock())
    app = make_app(feed)
    async with app.run_test(size=(120, 40), message_hook=notes) as pilot:
        app.poll(read_stats=True)
        await pilot.pause()
        await settles(pilot, lambda: "Show/hide" in footer_descriptions(app), "Show/hide in the footer")
        assert "Show/hide" in footer_descriptions(app)
        await pilot.click(ProbeTable, offset=(2, 2))  # the first probe's mark
        await app.workers.wait_for_complete()
        await pilot.pause()
        status = feed.statuses()[app.main.table.probe_ids[0]]
        assert status.state.value == "off" and "hidden" in status.reason
        assert "hidden" in str(app.main.table.get_cell_at((0, 3)))
        assert not notes.messages, notes.messages  # not an error
        await pilot.press("space")
        await app.workers.wait_for_complete()
        assert feed.statuses()[app.main.table.probe_ids[0]].reason == ""


async def test_at_the_end_the_playback_keys_leave_the_footer():
    """Once every event is shown, pausing, a speed or a jump to the end
    change nothing: the footer stops offering them (it offered `E To end`
    and `p Pause` under a header saying END)."""
    feed = ReplayFeed(str(FORMAT1), speed=1.0, clock=Clock())
    app = make_app(feed)
    async with app.run_test(size=(120, 40)) as pilot:
        app.poll(read_stats=True)
        await pilot.pause()
        await settles(pilot, lambda: {"To end", "Pause", "Faster"} <= footer_descriptions(app), "playback keys")
        playing = footer_descriptions(app)
        assert {"To end", "Pause", "Faster"} <= playing
        await pilot.press("E")
        for _ in range(5):
            app.poll(read_stats=True)
        await pilot.pause()
        await pilot.pause()
        assert feed.playback().ended
        await settles(pilot, lambda: not {"To end", "Pause", "Play", "Faster", "Slower"} & footer_descriptions(app),
                      "the playback keys gone from the footer")
        ended = footer_descriptions(app)
        assert not {"To end", "Pause", "Play", "Faster", "Slower"} & ended, ended
        assert "Quit" in ended


def test_a_directory_missing_or_empty_file_is_one_line_exit_1(tmp_path):
    """What is not a recording is invalid input (exit 1), one line naming
    it; a directory was click's `RECORDING: File '...' is a directory.`
    with exit 2, a missing file exit 1."""
    empty = tmp_path / "empty.ktrec"
    empty.write_bytes(b"")
    for path, said in ((tmp_path, "directory"), (tmp_path / "missing.ktrec", "No such file"),
                       (empty, "empty file")):
        run = subprocess.run([sys.executable, "-m", "ktui", "replay", str(path)], capture_output=True,
                             text=True, timeout=60)
        assert run.returncode == 1, (path, run.stderr)
        assert run.stderr.count("\n") == 1 and run.stderr.startswith(f"ktui: {path}: "), run.stderr
        assert said in run.stderr, run.stderr
async def test_a_recording_whose_probes_only_counted_shows_them_and_their_hits(tmp_path):
    """`ktui vm record --duration 30` on a cold cache: every probe counted
    while its program loaded, none emitted an event. The replay showed
    "probes 0" (and a live dashboard's "press a to add one"); now the table
    has each probe in its recorded state and the stats pane its hits."""
    from ktui.lang.model import ProbeSet
    from ktui.lang.spec import parse_spec
    from ktui.pipeline.recording import Recorder
    from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus, StatsSnapshot
    from ktui.widgets.probe_table import ProbeTable
    from ktui.widgets.stats_pane import StatsPane

    from .conftest import plain

    path = tmp_path / "cold.ktrec"
    probes = (parse_spec("vfs_read:c:a3"), parse_spec("do_sys_openat2:r:retval:s64"))
    rec = Recorder(str(path), ProbeSet("cold", probes=probes))
    rec.note_probes({7 + i: ProbeStatus(7 + i, p, ProbeState.LOADING, "", "kprobe") for i, p in enumerate(probes)})
    rec.on_stats(StatsSnapshot(1.0, {7 + i: ProbeStats(7 + i, hits=1170 + i, lost=0, emitted=0, hist=(),
                                                       errnos=(), top_comms=(), counted_only=1170 + i)
                                     for i in range(2)}))
    rec.close()
    app = make_app(ReplayFeed(str(path), speed=0))
    async with app.run_test(size=(80, 24)) as pilot:
        app.poll(read_stats=True)
        await pilot.pause()
        table = app.screen.query_one(ProbeTable)
        assert table.row_count == 2
        await pilot.press("s")
        await pilot.pause()
        head = plain(app.screen.query_one("#stats-head"))
        assert "vfs_read:c:a3" in head and "loading" in head and "hits 1170" in head
