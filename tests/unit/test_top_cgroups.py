"""Top cgroups where they leave the engine, without a kernel: the stats
pane's lines (under the top comms, shortened as the event pane shortens,
cut from the start in a narrow pane, exact or an estimate as the comms
are, "not kept" where not counted), NDJSON stats (whole paths; null where
not kept), a recording's round trip, and an older recording without them.
Prometheus: test_export; reading the kernel's map: test_who."""

from __future__ import annotations

import dataclasses
import io
import json

from ktui.lang.spec import parse_spec
from ktui.pipeline.drilldown import CGROUP, Pick, drill_down
from ktui.pipeline.ndjson import NdjsonSink
from ktui.pipeline.recording import stats_from_json, stats_to_json
from ktui.pipeline.top_cgroups import NOT_KEPT, cgroup_lines
from ktui.pipeline.value_views import counter_lines
from ktui.record.feed import Event, ProbeState, ProbeStats, ProbeStatus, StatsSnapshot

CALL = parse_spec("vfs_read:c:a3")
DOCKER = "system.slice/docker-" + "0123456789ab" + "f" * 52 + ".scope"
SESSION = "user.slice/user-1000.slice/user@1000.service/app.slice/session-3.scope"
STATS = ProbeStats(1, hits=100, top_comms=(("dd", 60), ("cat", 40)),
                   top_cgroups=((DOCKER, 70), (SESSION, 20), ("/", 10)))


def texts(lines) -> list[str]:
    return [line[0] for line in lines]


def test_top_cgroups_come_under_the_top_comms_shortened_where_the_path_says_what_it_is():
    lines = texts(counter_lines(CALL, STATS, bar_width=10))
    at = lines.index("top cgroups (exact)")
    assert lines.index("top comms (exact)") < at
    assert lines[at + 1:at + 4] == [
        f"  {'docker:0123456789ab':<{len(SESSION)}} {'70':>8}",
        f"  {SESSION} {'20':>8}",
        f"  {'/':<{len(SESSION)}} {'10':>8}",
    ]


def test_a_narrow_pane_cuts_a_path_from_its_start_and_keeps_the_numbers():
    rows = texts(cgroup_lines(STATS, 6, room=40))[1:]
    assert all(len(row) <= 40 for row in rows)
    assert rows[1].startswith("  …") and "session-3.scope" in rows[1] and rows[1].endswith("20")
    assert rows[0].split() == ["docker:0123456789ab", "70"]


def test_each_cgroup_row_is_a_drill_down_on_the_events_of_that_cgroup():
    rows = cgroup_lines(STATS, 6, room=40)
    assert len(rows[0]) == 2  # the heading stands for nothing
    # the whole path, not the shortened or cut one the row shows
    assert [row[2] for row in rows[1:]] == [Pick(CGROUP, DOCKER), Pick(CGROUP, SESSION), Pick(CGROUP, "/")]
    drill = drill_down(1, CALL, rows[2][2])
    assert drill.describe() == f"drill-down: vfs_read:c:a3 cgroup={SESSION} (Esc clears)"
    assert drill_down(1, CALL, rows[1][2]).what == "cgroup=docker:0123456789ab"

    def event(cgroup: str, probe_id: int = 1) -> Event:
        return Event(probe_id, 0, 0, 7, 7, "dd", None, (4096,), cgroup=cgroup)

    assert drill.matches(event(SESSION))
    assert not drill.matches(event(DOCKER)) and not drill.matches(event(""))
    assert not drill.matches(event(SESSION, probe_id=2))
    assert not drill_down(1, CALL, Pick(CGROUP, "/")).matches(event(SESSION))


def test_an_estimate_is_said_and_what_is_not_kept_is_not_shown_as_none():
    sampled = dataclasses.replace(STATS, top_comms_exact=False)
    assert texts(cgroup_lines(sampled, 6))[0] == "top cgroups ≈ estimate (the same sample)"
    assert texts(cgroup_lines(ProbeStats(1), 6)) == ["top cgroups (exact)", "  none yet"]
    assert texts(cgroup_lines(ProbeStats(1, hits=5, top_cgroups_kept=False), 6)) == [NOT_KEPT]


def ndjson_probe(stats: ProbeStats) -> dict:
    class Feed:
        def statuses(self):
            return {1: ProbeStatus(1, CALL, ProbeState.ATTACHED)}

    out = io.StringIO()
    NdjsonSink(out, Feed()).on_stats(StatsSnapshot(1.0, {1: stats}))
    return json.loads(out.getvalue())["probes"][0]


def test_ndjson_keeps_whole_paths_and_says_null_where_not_kept():
    assert ndjson_probe(STATS)["top_cgroups"] == {DOCKER: 70, SESSION: 20, "/": 10}
    assert ndjson_probe(ProbeStats(1))["top_cgroups"] == {}
    assert ndjson_probe(ProbeStats(1, top_cgroups_kept=False))["top_cgroups"] is None


def test_a_recording_keeps_them_and_an_older_one_still_loads_without():
    snap = StatsSnapshot(2.0, {1: STATS, 2: ProbeStats(2, hits=3, top_cgroups_kept=False)})
    assert stats_from_json(json.loads(json.dumps(stats_to_json(snap)))) == snap
    old = {"time": 1.0, "probes": {"1": {"probe_id": 1, "hits": 4, "lost": 0, "emitted": 4, "hist": [],
                                         "errnos": [], "top_comms": [["dd", 4]]}}}
    probe = stats_from_json(old).probes[1]
    assert probe.top_comms == (("dd", 4),)
    assert (probe.top_cgroups, probe.top_cgroups_kept) == ((), False)  # not counted then: not "none"
