"""A wildcard probe's hits by member where they leave the dashboard,
without a kernel: NDJSON stats lines, a recording's round trip (an older
recording without them still loads), and Prometheus series."""

from __future__ import annotations

import dataclasses
import io
import json

from prometheus_client import CollectorRegistry, generate_latest

from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline import members
from ktui.pipeline.ndjson import NdjsonSink
from ktui.pipeline.prometheus import ProbeCollector, ProbeView
from ktui.pipeline.recording import Recorder, stats_from_json, stats_to_json
from ktui.pipeline.replay import ReplayFeed
from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus, StatsSnapshot

RET = dataclasses.replace(parse_spec("tcp_*:r"), label="tcp_ret", members=("tcp_close", "tcp_recvmsg", "tcp_sendmsg"))
CALL = parse_spec("syscalls/sys_enter_*:t")
RET_STATS = ProbeStats(1, hits=10, hist=(0,) * 65, latency_sum_ns=10_000, member_count=3,
                       members=(("tcp_sendmsg", 7, 7_700), ("tcp_recvmsg", 3, 2_300)))
TP_STATS = ProbeStats(2, hits=5, member_count=300,
                      members=(("syscalls/sys_enter_read", 4, 0), ("syscalls/sys_enter_write", 1, 0)))
PLAIN = ProbeStats(3, hits=4)


def _statuses():
    return {1: ProbeStatus(1, RET, ProbeState.ATTACHED, via="kretprobe"),
            2: ProbeStatus(2, CALL, ProbeState.ATTACHED, via="tracepoint"),
            3: ProbeStatus(3, parse_spec("vfs_read:c"), ProbeState.ATTACHED, via="kprobe")}


def _ndjson(stats: StatsSnapshot) -> list[dict]:
    class Feed:
        def statuses(self):
            return _statuses()

    out = io.StringIO()
    NdjsonSink(out, Feed()).on_stats(stats)
    return json.loads(out.getvalue())["probes"]


def test_ndjson_stats_lines_carry_every_member_hit():
    ret, tp, plain = _ndjson(StatsSnapshot(1.0, {1: RET_STATS, 2: TP_STATS, 3: PLAIN}))
    assert ret["member_count"] == 3
    assert ret["members"] == [
        {"name": "tcp_sendmsg", "hits": 7, "latency_sum_ns": 7_700, "avg_ns": 1_100},
        {"name": "tcp_recvmsg", "hits": 3, "latency_sum_ns": 2_300, "avg_ns": 766},
    ]
    assert sum(m["hits"] for m in ret["members"]) == ret["hits"]
    assert tp["member_count"] == 300 and tp["members"][0] == {"name": "syscalls/sys_enter_read", "hits": 4}
    assert "members" not in plain and "member_count" not in plain


def test_a_wildcard_not_attached_yet_still_has_the_keys():
    (ret,) = _ndjson(StatsSnapshot(1.0, {1: ProbeStats(1)}))
    assert (ret["member_count"], ret["members"]) == (0, [])


def test_stats_json_round_trip_and_an_older_recording():
    back = stats_from_json(json.loads(json.dumps(stats_to_json(StatsSnapshot(1.0, {1: RET_STATS})))))
    assert back.probes[1] == RET_STATS
    old = stats_to_json(StatsSnapshot(1.0, {3: PLAIN}))
    for key in ("members", "member_count"):
        del old["probes"]["3"][key]
    assert stats_from_json(old).probes[3] == PLAIN  # made before wildcards: not one


def test_replay_reads_the_members_back(tmp_path):
    path = tmp_path / "w.ktrec"
    rec = Recorder(str(path), ProbeSet("w", probes=(RET,)))
    rec.note_probes({1: ProbeStatus(1, RET, ProbeState.ATTACHED, via="kretprobe")})
    rec.on_stats(StatsSnapshot(1.0, {1: RET_STATS}))
    rec.close()
    feed = ReplayFeed(str(path), speed=0)
    try:
        while not feed.finished:
            feed.drain()
        stats = feed.stats().probes
    finally:
        feed.close()
    (replayed,) = stats.values()
    assert replayed.members == RET_STATS.members and replayed.member_count == 3


def test_prometheus_counts_hits_and_latency_by_function():
    views = [ProbeView("tcp_ret", "w", True, RET_STATS), ProbeView("sys", "w", False, TP_STATS),
             ProbeView("reads", "w", False, PLAIN)]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ProbeCollector(lambda: views, clock=lambda: 0.0))
    text = generate_latest(registry).decode()
    assert 'ktui_probe_function_hits_total{function="tcp_sendmsg",probe="tcp_ret",set="w"} 7.0' in text
    assert ('ktui_probe_function_latency_seconds_total{function="tcp_recvmsg",probe="tcp_ret",set="w"} '
            '2.3e-06') in text
    assert 'ktui_probe_function_hits_total{function="syscalls/sys_enter_read",probe="sys",set="w"} 4.0' in text
    assert 'ktui_probe_functions{probe="tcp_ret",set="w"} 3.0' in text
    assert 'ktui_probe_functions{probe="sys",set="w"} 300.0' in text
    assert 'probe="reads"' not in "".join(l for l in text.splitlines() if "function" in l)
    assert "ktui_probe_function_latency_seconds_total{function=\"syscalls" not in text


def test_prometheus_without_wildcards_exposes_no_member_family():
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ProbeCollector(lambda: [ProbeView("reads", "w", False, PLAIN)], clock=lambda: 0.0))
    assert "ktui_probe_function" not in generate_latest(registry).decode()


def test_rows_share_and_average():
    rows = members.rows(RET_STATS, is_return=True, limit=1)
    assert rows == [members.MemberRow("tcp_sendmsg", 7, 0.7, 1_100)]
    assert members.title(RET_STATS, tracepoint=False) == "by function: 2 of 3 hit"
    assert members.title(TP_STATS, tracepoint=True) == "by event: 2 of 300 hit"
    assert members.rows(TP_STATS, is_return=False)[1].avg_ns is None
