"""A probe that is loading says so (issue 13): a kprobe counts through its
dispatcher while the program loads, an fentry/fexit probe is not in the
kernel until its own copy is loaded and counts nothing. The NDJSON lines
carry the state, the exporter's attached gauge and the stats pane tell the
two apart."""

from __future__ import annotations

import io
import json

from ktui.lang.spec import parse_spec
from ktui.pipeline.ndjson import NdjsonSink, summary_of
from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus, StatsSnapshot
from ktui.widgets.stats_pane import ProbeView, _head

CALL = parse_spec("vfs_read:c:a3")


class Statuses:
    """The little of a Feed the NDJSON sink and summary read."""

    def __init__(self, *statuses: ProbeStatus) -> None:
        self._statuses = {st.probe_id: st for st in statuses}

    def statuses(self):
        return dict(self._statuses)


def test_counting_is_attached_or_loading_on_a_kprobe():
    def counting(state, via=""):
        return ProbeStatus(0, CALL, state, via=via).counting

    assert counting(ProbeState.ATTACHED, "fentry") and counting(ProbeState.ATTACHED, "kprobe")
    assert counting(ProbeState.LOADING, "kprobe") and counting(ProbeState.LOADING, "kretprobe")
    assert not counting(ProbeState.LOADING, "fentry") and not counting(ProbeState.LOADING, "fexit")
    for state in (ProbeState.OFF, ProbeState.FAILED, ProbeState.PENDING):
        assert not counting(state)


def test_ndjson_stats_and_summary_say_loading():
    feed = Statuses(ProbeStatus(0, CALL, ProbeState.LOADING, via="fentry"),
                    ProbeStatus(1, CALL, ProbeState.LOADING, via="kprobe"),
                    ProbeStatus(2, CALL, ProbeState.ATTACHED, via="fentry"))
    snap = StatsSnapshot(1.0, {0: ProbeStats(0), 1: ProbeStats(1, hits=5, counted_only=5),
                               2: ProbeStats(2, hits=3, emitted=3)})
    out = io.StringIO()
    NdjsonSink(out, feed).on_stats(snap)
    line = json.loads(out.getvalue())
    assert [(p["state"], p["via"]) for p in line["probes"]] == [
        ("loading", "fentry"), ("loading", "kprobe"), ("attached", "fentry")]
    summary = summary_of(feed, snap, 3)
    assert [p["state"] for p in summary["probes"]] == ["loading", "loading", "attached"]


def test_the_stats_pane_says_a_loading_fentry_probe_counts_nothing():
    def head(via):
        return _head(ProbeView(ProbeStatus(0, CALL, ProbeState.LOADING, via=via), ProbeStats(0), None, ())).plain

    assert "fexit: not in the kernel until its program is loaded; counts nothing yet" in head("fexit")
    assert "counts nothing" not in head("kprobe")


def test_the_exporters_attached_gauge_is_0_for_a_waiting_fentry_probe():
    from ktui.exporter import Exporter
    from ktui.lang.model import ProbeSet

    class Session(Statuses):
        def stats(self, detail=True):
            return StatsSnapshot(1.0, {0: ProbeStats(0), 1: ProbeStats(1, hits=5, counted_only=5)})

    session = Session(ProbeStatus(0, parse_spec("a=vfs_read:c"), ProbeState.LOADING, via="fentry"),
                      ProbeStatus(1, parse_spec("b=vfs_read:c"), ProbeState.LOADING, via="kprobe"))
    views = Exporter(session, (ProbeSet("s", probes=()), {}), lambda: None).views()
    assert {v.name: v.attached for v in views} == {"a": False, "b": True}
