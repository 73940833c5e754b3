"""Issue 28's per-probe counters and honesty marks where they leave the
dashboard, without a kernel: NDJSON stats and summary lines (`ktui stream`),
the summary on stderr, and a recording's round trip (an older recording
without them still loads). The dashboard's lines: test_uncounted_lines;
the exporter's side: test_export."""

from __future__ import annotations

import io
import json

from ktui.headless import _print_summary, run_record, run_stream
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline import accounting
from ktui.pipeline.ndjson import NdjsonSink, summary_of
from ktui.pipeline.recording import stats_from_json
from ktui.pipeline.replay import ReplayFeed
from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus, StatsSnapshot
from tests.fakefeed import FakeFeed

RET = parse_spec("vfs_read:r:retval")
CALL = parse_spec("vfs_read:c:a3")
SHAKY = ProbeStats(1, hits=1000, emitted=1000, lost=2, missed_returns=4, maxactive=64, recursion_misses=1,
                   unpaired=12, entries_unstored=5, nest_dropped=3, errnos=((9, 20), (14, 7)), errnos_other=6,
                   errno_check="long", top_comms=(("dd", 900), ("cat", 100)), top_comms_exact=False)


def ndjson_lines(stats: StatsSnapshot, statuses) -> tuple[dict, dict]:
    class Feed:
        def statuses(self):
            return statuses

    out = io.StringIO()
    NdjsonSink(out, Feed()).on_stats(stats)
    return json.loads(out.getvalue()), summary_of(Feed(), stats, 0)


def test_ndjson_stats_and_summary_carry_the_counters_and_marks():
    statuses = {1: ProbeStatus(1, RET, ProbeState.ATTACHED, via="kretprobe")}
    stats_line, summary = ndjson_lines(StatsSnapshot(1.0, {1: SHAKY}), statuses)
    probe = stats_line["probes"][0]
    assert {k: probe[k] for k in ("unpaired", "entries_unstored", "nest_dropped", "errnos_other")} == {
        "unpaired": 12, "entries_unstored": 5, "nest_dropped": 3, "errnos_other": 6}
    assert probe["errno_check"] == "long" and probe["top_comms_exact"] is False
    assert probe["errnos"] == {"EBADF": 20, "EFAULT": 7}  # "other" is its own key, not a fake errno
    total = summary["probes"][0]
    assert {k: total[k] for k in ("unpaired", "entries_unstored", "nest_dropped", "errnos_other")} == {
        "unpaired": 12, "entries_unstored": 5, "nest_dropped": 3, "errnos_other": 6}
    assert stats_line["v"] == summary["v"] == 2


def test_stderr_summary_names_what_was_not_counted(capsys):
    statuses = {1: ProbeStatus(1, RET, ProbeState.ATTACHED)}
    _print_summary(summary_of(type("F", (), {"statuses": lambda self: statuses})(), StatsSnapshot(1.0, {1: SHAKY}), 9))
    err = capsys.readouterr().err
    assert ("returns missed 4 (maxactive 64), returns unpaired 12, entries not stored 5, recursion misses 1, "
            "nested hits dropped 3, errnos outside the table 6") in err
    _print_summary(summary_of(type("F", (), {"statuses": lambda self: statuses})(),
                              StatsSnapshot(1.0, {1: ProbeStats(1, hits=3, emitted=3)}), 3))
    assert capsys.readouterr().err.splitlines()[-1].endswith("hits 3, emitted 3, lost 0")  # quiet when all is well


SHAKY_SET = ProbeSet("shaky", probes=(RET, CALL, parse_spec("do_sys_openat2:r")))


def shaky_feed(ps, options=None) -> FakeFeed:
    return FakeFeed(ps, events_per_drain=900, shaky={RET.name, CALL.name},
                    errno_checks={"do_sys_openat2:r": "off: no BTF"})


def test_a_recording_keeps_them_and_replays_them(tmp_path):
    """`ktui record` on a feed with every new counter nonzero, an estimate
    and an unchecked errno; the replay reads back what was written."""
    path = tmp_path / "r.ktrec"
    feeds = []

    def open_feed(ps, options):
        feeds.append(shaky_feed(ps))
        return feeds[-1]

    assert run_record(SHAKY_SET, None, str(path), 0.02, 0.3, open_feed=open_feed) == 0
    feed = ReplayFeed(str(path), speed=0)
    try:
        while not feed.finished:
            feed.drain()
        replayed = feed.stats().probes
    finally:
        feed.close()
    by_name = {st.probe.name: st.probe_id for st in feed.statuses().values()}
    ret, call, void = (replayed[by_name[p.name]] for p in SHAKY_SET.probes)
    assert ret.unpaired > 0 and ret.entries_unstored > 0 and ret.nest_dropped > 0 and ret.errnos_other > 0
    assert call.nest_dropped > 0 and call.unpaired == 0
    assert not ret.top_comms_exact and ret.hits > accounting.COMM_EXACT  # past the exact hits: an estimate
    assert (ret.errno_check, call.errno_check, void.errno_check) == ("long", "", "off: no BTF")
    # exactly the last snapshot the recorder was given
    live = feeds[0]
    assert ret.unpaired == ret.hits // 16 and live.closed


# A STAT probe as recordings wrote it before issue 28 (no such keys)
OLD_STAT = {"probe_id": 1, "hits": 1000, "lost": 0, "emitted": 1000, "counted_only": 0, "hist": [0] * 65,
            "latency_sum_ns": 0, "errnos": [[9, 2]], "top_comms": [["dd", 1000]], "missed_returns": 0,
            "maxactive": 0, "recursion_misses": 0, "run_ns": 0, "run_count": 0}


def test_an_older_recording_still_loads_with_nothing_claimed():
    old = stats_from_json({"time": 1.0, "probes": {"1": OLD_STAT}}).probes[1]
    assert (old.unpaired, old.entries_unstored, old.nest_dropped, old.errnos_other) == (0, 0, 0, 0)
    assert old.errno_check == ""  # how its errnos were checked is not known: nothing said
    assert old.top_comms_exact  # 1000 hits: no CPU can have passed the exact first 1024
    busy = stats_from_json({"time": 1.0, "probes": {"1": dict(OLD_STAT, hits=5000)}}).probes[1]
    assert not busy.top_comms_exact  # then sampled (at a fixed stride): an estimate


def test_stream_writes_them_and_says_them_on_stderr(capfd):
    assert run_stream(SHAKY_SET, None, 0.02, 0.3, open_feed=shaky_feed) == 0
    captured = capfd.readouterr()  # (the stream watches its stdout's fd)
    lines = [json.loads(line) for line in captured.out.splitlines()]
    stats = [line for line in lines if line["type"] == "stats"][-1]
    summary = lines[-1]
    assert summary["type"] == "summary"
    by_name = {p["probe"]: p for p in stats["probes"]}
    assert by_name[RET.name]["unpaired"] > 0 and by_name[RET.name]["errnos_other"] > 0
    assert by_name["do_sys_openat2:r"]["errno_check"] == "off: no BTF"
    assert by_name["do_sys_openat2:r"]["errnos"] == {}
    ret_total = next(p for p in summary["probes"] if p["probe"] == RET.name)
    assert f"returns unpaired {ret_total['unpaired']}" in captured.err
    assert f"nested hits dropped {ret_total['nest_dropped']}" in captured.err
