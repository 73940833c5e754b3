"""A recording names every probe of the session, with its state, even one
that never emitted an event: a counting-only probe, a filter that never
matched, or probes still loading when `ktui record --duration` ended (seen
in `ktui vm record` on a cold cache: the replay showed "probes 0" and none
of the 4,000 hits the recording held)."""

from __future__ import annotations

import struct

from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_probe_text, parse_spec
from ktui.pipeline.recording import MAGIC, Recorder
from ktui.pipeline.replay import ReplayFeed
from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus, StatsSnapshot

from tests.unit.test_recording import make_batch, make_decoder, replay_all


def chunk_kinds(path) -> list[bytes]:
    data = path.read_bytes()
    assert data.startswith(MAGIC)
    pos, kinds = len(MAGIC), []
    while pos < len(data):
        kind, length = struct.unpack_from("<4sI", data, pos)
        kinds.append(kind)
        pos += 8 + length
    return kinds


def statuses(state: ProbeState, *, reason: str = "") -> dict[int, ProbeStatus]:
    specs = ["vfs_read:c:a3", "vfs_read:r:retval:s64 count(comm)"]
    return {10 + i: ProbeStatus(10 + i, parse_probe_text(s), state, reason, "kprobe" if i == 0 else "kretprobe")
            for i, s in enumerate(specs)}


def counted(n: int) -> StatsSnapshot:
    return StatsSnapshot(float(n), {10: ProbeStats(10, hits=n, lost=0, emitted=0, hist=(), errnos=(),
                                                   top_comms=(), counted_only=n),
                                    11: ProbeStats(11, hits=n, lost=0, emitted=0, hist=(), errnos=(),
                                                   top_comms=())})


def test_probes_without_events_replay_with_their_counts_and_states(tmp_path):
    path = tmp_path / "r.ktrec"
    rec = Recorder(str(path), ProbeSet("set", probes=tuple(st.probe for st in statuses(ProbeState.LOADING).values())))
    rec.note_probes(statuses(ProbeState.LOADING))
    rec.on_stats(counted(5))
    rec.note_probes(statuses(ProbeState.LOADING))  # unchanged: no second chunk
    rec.on_stats(counted(9))
    rec.close()
    assert chunk_kinds(path) == [b"HEAD", b"PROB", b"STAT", b"STAT", b"END "]

    feed = ReplayFeed(str(path), speed=0)
    shown = feed.statuses()
    assert [st.probe.spec_text for st in shown.values()] == ["vfs_read:c:a3", "vfs_read:r:retval:s64"]
    assert shown[11].probe.agg is not None  # count(comm) came back with the probe
    assert {st.state for st in shown.values()} == {ProbeState.LOADING}
    assert shown[10].via == "kprobe"
    assert [p.spec_text for p in feed.probeset.probes] == ["vfs_read:c:a3", "vfs_read:r:retval:s64"]
    while not feed.finished:
        feed.drain()
    assert feed.stats().probes[10].hits == 9 and feed.stats().probes[10].counted_only == 9
    feed.close()


def test_a_state_change_is_recorded_and_replayed_in_order(tmp_path):
    path = tmp_path / "r.ktrec"
    dec = make_decoder(ids=(10, 11, 12))
    rec = Recorder(str(path), ProbeSet("set", probes=dec.probes))
    loading = {i: ProbeStatus(i, p, ProbeState.LOADING) for i, p in zip(dec.probe_ids, dec.probes)}
    rec.note_probes(loading)
    rec.on_stats(counted(3))
    attached = {i: ProbeStatus(i, p, ProbeState.ATTACHED, "", "kprobe") for i, p in zip(dec.probe_ids, dec.probes)}
    failed = dict(attached)
    failed[12] = ProbeStatus(12, dec.probes[2], ProbeState.FAILED, "no such function")
    rec.note_probes(failed)
    rec.on_batch(make_batch(dec, 0, 6))
    rec.on_stats(counted(9))
    rec.close()
    assert chunk_kinds(path) == [b"HEAD", b"PROB", b"STAT", b"PROB", b"UNIT", b"EVTS", b"STAT", b"END "]

    feed = ReplayFeed(str(path), speed=0)  # reads up to the first events: the second PROB is in
    assert feed.statuses()[10].state is ProbeState.ATTACHED
    assert feed.statuses()[12].state is ProbeState.FAILED
    assert feed.statuses()[12].reason == "no such function"
    events = []
    while not feed.finished:
        events += feed.drain().events()
    assert len(events) == 6
    # the UNIT that came with the events keeps the recorded states
    assert feed.statuses()[12].state is ProbeState.FAILED
    feed.close()


async def test_a_probe_switched_off_in_the_replay_stays_off_through_later_chunks(tmp_path):
    path = tmp_path / "r.ktrec"
    rec = Recorder(str(path), ProbeSet("set", probes=tuple(st.probe for st in statuses(ProbeState.LOADING).values())))
    rec.note_probes(statuses(ProbeState.LOADING))
    rec.on_stats(counted(1))
    rec.note_probes(statuses(ProbeState.ATTACHED))
    rec.on_stats(counted(2))
    rec.close()
    feed = ReplayFeed(str(path), speed=0)
    off = await feed.set_enabled(10, False)
    assert off.state is ProbeState.OFF and not off.probe.enabled
    while not feed.finished:
        feed.drain()
    assert feed.statuses()[10].state is ProbeState.OFF
    assert feed.statuses()[11].state is ProbeState.ATTACHED
    on = await feed.set_enabled(10, True)
    assert on.state is ProbeState.ATTACHED and on.probe.enabled
    feed.close()


def test_ktui_record_of_probes_that_emit_nothing_replays_them(tmp_path):
    """run_record end to end on a fake feed whose batches are not raw
    records (so no UNIT is ever written): the replay still has the probes."""
    from ktui.headless import run_record
    from tests.fakefeed import FakeFeed

    path = tmp_path / "r.ktrec"
    ps = ProbeSet("x", probes=(parse_spec("vfs_read:c:a3"), parse_spec("vfs_read:r:retval:s64")))
    assert run_record(ps, None, str(path), 0.05, 0.3, open_feed=lambda ps, options: FakeFeed(ps)) == 0
    assert b"UNIT" not in chunk_kinds(path)
    events, feed = replay_all(path)
    assert [st.probe.spec_text for st in feed.statuses().values()] == ["vfs_read:c:a3", "vfs_read:r:retval:s64"]
    assert all(feed.stats().probes[i].hits > 0 for i in feed.statuses())
    feed.close()
