"""Missed returns on the host: the maxactive key, the session's bookkeeping
of tracefs kretprobe events (made once per return probe, removed after its
fds close, one kprobe_profile read per stats read), and how they are shown."""

from __future__ import annotations

import io
import json

import pytest

from ktui.kernel.attach.kretprobe_events import parse_events, parse_profile
from ktui.kernel.session import Session, SessionOptions
from ktui.lang.model import ProbeSetError
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.pipeline.ndjson import NdjsonSink
from ktui.pipeline.recording import stats_from_json, stats_to_json
from ktui.record.feed import ProbeStats, StatsSnapshot
from ktui.pipeline.accounting import loss_lines
from tests.fakekernel import FakeLoader

SET = "name: m\nmaxactive: 64\nprobes:\n  - vfs_read:r\n  - spec: vfs_write:r\n    maxactive: 4\n  - vfs_read:c\n"


def test_maxactive_key_per_set_and_probe_round_trips():
    ps = loads_probeset(SET)
    assert [p.maxactive for p in ps.probes] == [64, 4, 0]
    assert loads_probeset(dumps_probeset(ps)) == ps


@pytest.mark.parametrize("text,where,fragment", [
    ("name: x\nprobes:\n  - spec: vfs_read:c\n    maxactive: 4\n", "f.yaml:4:5:", "only a return probe"),
    ("name: x\nmaxactive: 0\nprobes: [vfs_read:r]\n", "f.yaml:2:12:", "maxactive: 0 is out of range (1..4096)"),
    ("name: x\nprobes:\n  - spec: vfs_read:r\n    maxactive: 4097\n", "f.yaml:4:16:", "out of range"),
])
def test_bad_maxactive_is_one_located_line(text, where, fragment):
    with pytest.raises(ProbeSetError) as err:
        loads_probeset(text, "f.yaml")
    assert str(err.value).startswith(where) and fragment in str(err.value) and "\n" not in str(err.value)


def open_session(loader):
    s = Session(loads_probeset(SET), SessionOptions(engine="compiled"), loader=loader)
    s.open()
    return s


def test_session_makes_one_event_per_return_probe_and_counts_misses():
    loader = FakeLoader()
    s = open_session(loader)
    try:
        events = loader.returns.events
        assert sorted(events.values()) == [("vfs_read", 64), ("vfs_write", 4)]
        names = {st.probe.spec_text: i for i, st in s.statuses().items()}
        ev_write = next(n for n, v in events.items() if v[0] == "vfs_write")
        loader.returns.missed[ev_write] = 7
        before = loader.returns.counted
        stats = s.stats().probes
        assert loader.returns.counted == before + 1  # one profile read for all
        assert stats[names["vfs_write:r"]].missed_returns == 7
        assert stats[names["vfs_write:r"]].maxactive == 4
        assert stats[names["vfs_read:c"]].maxactive == 0
        # off: its event leaves the kernel (off means gone); on: a new
        # event, and the misses of the old one still count
        s.set_enabled_now(names["vfs_write:r"], False)
        assert ev_write in loader.returns.removed and ev_write not in loader.returns.events
        assert s.stats().probes[names["vfs_write:r"]].missed_returns == 7
        s.set_enabled_now(names["vfs_write:r"], True)
        assert len(loader.returns.events) == 2
        ev_new = next(n for n, v in loader.returns.events.items() if v[0] == "vfs_write")
        loader.returns.missed[ev_new] = 2
        assert s.stats().probes[names["vfs_write:r"]].missed_returns == 9
        s.remove_probe_now(names["vfs_write:r"])
        assert ev_new in loader.returns.removed and ev_new not in loader.returns.events
    finally:
        s.close()
    assert loader.returns.events == {} and loader.attached == {}


def test_without_tracefs_maxactive_fails_the_probe_with_a_reason():
    loader = FakeLoader(tracefs=False)
    s = open_session(loader)
    try:
        reasons = {st.probe.spec_text: st.reason for st in s.statuses().values()}
        assert "tracefs" in reasons["vfs_write:r"] and reasons["vfs_read:c"] == ""
    finally:
        s.close()


def test_profile_and_events_parsing():
    text = "  ktui_7_0                     12       8\n  other_1   1  0\n  ktui_70_1  1 2\n"
    assert parse_profile(text, "ktui_7_") == {"ktui_7_0": (12, 8)}
    assert parse_events("r4:ktui/ktui_7_0 eventfd_read\np:kprobes/x vfs_read\n") == [
        ("ktui", "ktui_7_0"), ("kprobes", "x")]


def test_shown_in_stats_pane_ndjson_and_recording():
    s = ProbeStats(3, hits=4, missed_returns=8, maxactive=4)
    assert ("  8 returns missed (maxactive 4): raise maxactive: in the probe set", "yellow bold") in loss_lines(s, True)
    assert loss_lines(ProbeStats(3), True) == []
    snap = StatsSnapshot(1.0, {3: s})
    assert stats_from_json(json.loads(json.dumps(stats_to_json(snap)))) == snap

    class Feed:
        def statuses(self):
            return {}

    out = io.StringIO()
    NdjsonSink(out, Feed()).on_stats(snap)
    line = json.loads(out.getvalue())
    assert line["probes"][0]["missed_returns"] == 8 and line["probes"][0]["maxactive"] == 4
