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

from .conftest import make_app

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
    assert "format 99" in lines[0] and "formats 1, 2" in lines[0] and "Traceback" not in run.stderr


def header(app) -> str:
    return app.main.query_one(StatusLine)._shown.plain


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
        assert hidden | kept <= footer(live)


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


async def test_a_replay_without_probes_does_not_offer_keys_it_refuses(tmp_path):
    from ktui.lang.model import ProbeSet
    from ktui.pipeline.recording import Recorder

    from .conftest import plain

    path = tmp_path / "empty.ktrec"
    Recorder(str(path), ProbeSet("nothing")).close()
    app = make_app(ReplayFeed(str(path), speed=0))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        head = plain(app.screen.query_one("#stats-head"))
        assert "holds no probe" in head and "Press a" not in head
