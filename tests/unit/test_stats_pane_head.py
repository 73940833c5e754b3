"""The stats pane's head says how many hits were only counted (the probe
counted while its program loaded), so hits > emitted + lost is explained
on screen as in the stream's summary."""

from __future__ import annotations

from ktui.lang.spec import parse_spec
from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus
from ktui.widgets.stats_pane import ProbeView, _head


def head(stats: ProbeStats) -> str:
    status = ProbeStatus(0, parse_spec("vfs_read:c:a3"), ProbeState.ATTACHED)
    return _head(ProbeView(status, stats, 1.0, ())).plain


def test_hits_counted_while_loading_are_named():
    text = head(ProbeStats(0, hits=1500, emitted=300, counted_only=1200))
    assert text.splitlines()[-1] == "1200 hits counted while its program loaded (no events)"


def test_nothing_said_when_every_hit_could_be_an_event():
    assert "counted while" not in head(ProbeStats(0, hits=300, emitted=300))
