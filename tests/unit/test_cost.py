"""Each probe's own cost (issue 13) without a kernel: the prog info
layout, the arithmetic from two snapshots, the session's statistics fd,
NDJSON, recordings, and the table's columns. The kernel's side:
tests/kernel/test_cost.py."""

from __future__ import annotations

import io
import json
import os
import struct

import pytest

from ktui.kernel.maps.bpfsys import PROG_INFO_SIZE, ProgRun, parse_prog_run
from ktui.kernel.maps.runstats import RunTimeStats, probe_runs
from ktui.kernel.session import Session, SessionOptions
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline.format import format_cpu_share
from ktui.pipeline.ndjson import NdjsonSink, summary_of
from ktui.pipeline.rates import ProbeCost, costs, probe_cost
from ktui.pipeline.recording import stats_from_json, stats_to_json
from ktui.record.feed import ProbeStats, StatsSnapshot
from ktui.widgets.probe_table import COLUMNS, TIMED_ONLY, fit_columns
from ktui.widgets.stats_pane import cost_line
from tests.fakefeed import FakeFeed
from tests.fakekernel import FakeLoader


def snap(t: float, timed: bool = True, **fields) -> StatsSnapshot:
    return StatsSnapshot(t, {1: ProbeStats(1, **fields)}, timed=timed)


# ---------------------------------------------------------------- the kernel's struct


def test_run_counters_are_read_where_struct_bpf_prog_info_keeps_them():
    info = bytearray(PROG_INFO_SIZE)
    struct.pack_into("<I", info, 0, 2)  # type: kprobe, nothing to do with the counters
    struct.pack_into("<QQQ", info, 192, 123_456, 789, 5)  # run_time_ns, run_cnt, recursion_misses
    assert parse_prog_run(bytes(info)) == ProgRun(123_456, 789, 5)
    assert PROG_INFO_SIZE == 208 + 8  # up to recursion_misses (5.12), nothing after it


def test_a_return_probe_is_timed_over_both_halves_and_runs_once_per_return():
    ret, entry = ProgRun(9_000, 30, 1), ProgRun(4_000, 31, 2)
    assert probe_runs([ret, entry], timed=True) == {"recursion_misses": 3, "run_ns": 13_000, "run_count": 30}
    # off: the kernel's cumulative counters are not the session's to report
    assert probe_runs([ret, entry], timed=False) == {"recursion_misses": 3}
    assert probe_runs([], timed=True) == {"recursion_misses": 0}


# ---------------------------------------------------------------- arithmetic


def test_cost_is_the_growth_of_run_time_per_run_and_per_second():
    prev = snap(10.0, run_ns=1_000_000, run_count=1_000)
    cur = snap(12.0, run_ns=21_000_000, run_count=11_000)
    cost = probe_cost(prev, cur, 1)
    assert cost.ns_per_hit == pytest.approx(2_000.0)  # 20 ms over 10000 runs
    assert cost.cpu_percent == pytest.approx(1.0)  # 20 ms in 2 s of wall time


def test_no_cost_unless_both_snapshots_were_timed():
    timed = snap(12.0, run_ns=21_000_000, run_count=11_000)
    # off before: its zeros are not a count, and all the time since the
    # program was loaded would look like one interval's
    assert probe_cost(snap(10.0, timed=False), timed, 1) is None
    assert probe_cost(timed, snap(13.0, timed=False), 1) is None
    assert probe_cost(None, timed, 1) is None
    assert probe_cost(timed, timed, 1) is None  # no time between them
    assert costs(snap(10.0, timed=False), timed) == {}


def test_a_probe_that_did_not_run_costs_nothing_per_second_and_has_no_time_per_hit():
    a = snap(10.0, run_ns=500, run_count=2)
    cost = probe_cost(a, snap(11.0, run_ns=500, run_count=2), 1)
    assert cost == ProbeCost(None, 0.0)


def test_counters_that_went_back_count_from_zero():
    """Programs loaded again (a probe re-added) start their counters anew."""
    cost = probe_cost(snap(10.0, run_ns=9_000, run_count=9), snap(11.0, run_ns=3_000, run_count=3), 1)
    assert cost.ns_per_hit == pytest.approx(1_000.0)


def test_shares_of_a_cpu_read_as_percent():
    assert format_cpu_share(None) == "-"
    assert format_cpu_share(0.0) == "0%"
    assert format_cpu_share(0.004) == "<0.01%"
    assert format_cpu_share(0.4231) == "0.42%"
    assert format_cpu_share(12.345) == "12.3%"


def test_the_stats_pane_says_what_is_known():
    assert cost_line(None) == "cost: measuring (two stats reads)"
    assert cost_line(ProbeCost(None, 0.0)) == "cost: no runs in the last interval"
    assert cost_line(ProbeCost(1_250.0, 0.42)) == "cost 1.25us/hit  0.42% of a CPU"


# ---------------------------------------------------------------- the table


def test_cost_columns_only_while_timed_and_first_to_give_way():
    plain = [key for key, _, _ in fit_columns(18, 200)]
    assert plain == [key for key, _, _ in COLUMNS if key not in TIMED_ONLY]
    timed = [key for key, _, _ in fit_columns(18, 200, timed=True)]
    assert timed == [key for key, _, _ in COLUMNS]
    gone = []
    for available in range(200, 60, -1):
        shown = [key for key, _, _ in fit_columns(18, available, timed=True)]
        gone += [key for key in timed if key not in shown and key not in gone]
    assert gone[:2] == ["cpu", "cost"]
    at_80 = [key for key, _, _ in fit_columns(18, 76, timed=True)]
    assert at_80 == [key for key, _, _ in fit_columns(18, 76)]  # 80 columns look as before


# ---------------------------------------------------------------- the session


def test_the_session_keeps_the_statistics_on_only_while_asked_and_open(tmp_path):
    loader = FakeLoader()
    ps = ProbeSet("fake", probes=(parse_spec("vfs_read:c"), parse_spec("vfs_read:r:retval")))
    session = Session(ps, SessionOptions(log_path=tmp_path / "log", timing=True), loader=loader)
    with session:
        assert session.timing and loader.timing_fds == 1
        fd = session._timing._fd
        stats = session.stats()
        assert stats.timed
        # the fake's programs: 10 runs, 1000 ns, 1 recursion miss each;
        # a return probe is timed over its entry and return programs
        by_kind = {session.statuses()[i].probe.kind.value: s for i, s in stats.probes.items()}
        assert (by_kind["c"].run_ns, by_kind["c"].run_count, by_kind["c"].recursion_misses) == (1000, 10, 1)
        assert (by_kind["r"].run_ns, by_kind["r"].run_count, by_kind["r"].recursion_misses) == (2000, 10, 2)
        session.set_timing(False)
        off = session.stats()
        assert not off.timed and all(s.run_ns == s.run_count == 0 for s in off.probes.values())
        assert all(s.recursion_misses for s in off.probes.values())  # counted whether timed or not
        with pytest.raises(OSError):
            os.fstat(fd)  # closed when switched off
        session.set_timing(True)
        fd = session._timing._fd
    with pytest.raises(OSError):
        os.fstat(fd)  # and when the session closes
    assert not session.timing


def test_the_statistics_stay_off_by_default(tmp_path):
    loader = FakeLoader()
    ps = ProbeSet("fake", probes=(parse_spec("vfs_read:c"),))
    with Session(ps, SessionOptions(log_path=tmp_path / "log"), loader=loader) as session:
        assert not session.timing and not session.stats().timed
    assert loader.timing_fds == 0


def test_a_kernel_that_refuses_says_so_in_one_line():
    def refuse() -> int:
        raise OSError(22, "enabling BPF run-time statistics: Invalid argument")

    stats = RunTimeStats(refuse)
    with pytest.raises(OSError):
        stats.set(True)
    assert not stats.on


# ---------------------------------------------------------------- NDJSON and recordings


def test_ndjson_stats_carry_recursion_misses_always_and_the_cost_while_timed():
    feed = FakeFeed(ProbeSet("s", probes=(parse_spec("vfs_read:c"),)))
    (probe_id,) = feed.statuses()
    out = io.StringIO()
    sink = NdjsonSink(out, feed)
    feed.drain()
    sink.on_stats(feed.stats())
    feed.set_timing(True)
    for _ in range(2):
        feed.drain()
        sink.on_stats(feed.stats())
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    untimed, first, second = (line["probes"][0] for line in lines)
    keys = list(untimed)
    assert {"lost", "missed_returns", "recursion_misses"} <= set(keys) and "cost" not in untimed
    assert first["cost"]["ns_per_hit"] is None  # one timed read: nothing to compare with
    assert second["cost"]["ns_per_hit"] == 250.0  # the fake: 250 ns a hit
    assert second["cost"]["cpu_percent"] == pytest.approx(100 * 250 * 6 / 1e9)  # 6 hits in 1 s
    assert second["cost"]["run_count"] == second["hits"]
    summary = summary_of(feed, feed.stats(), 0)["probes"][0]
    assert summary["run_count"] == summary["hits"] and "recursion_misses" in summary


def test_a_timed_recording_keeps_its_cost():
    stats = StatsSnapshot(3.0, {1: ProbeStats(1, hits=5, run_ns=500, run_count=5, recursion_misses=2)}, timed=True)
    assert stats_from_json(json.loads(json.dumps(stats_to_json(stats)))) == stats
    # a recording made before these fields: untimed, zeros (and its top cgroups not kept)
    old = {"time": 1.0, "probes": {"1": {"probe_id": 1, "hits": 1, "lost": 0, "emitted": 1, "hist": [],
                                         "errnos": [], "top_comms": []}}}
    assert stats_from_json(old) == StatsSnapshot(1.0, {1: ProbeStats(1, hits=1, emitted=1, top_cgroups_kept=False)})


# ---------------------------------------------------------------- fentry/fexit


def test_a_tracing_probes_recursion_misses_are_its_own_copies(monkeypatch):
    """An fentry/fexit probe runs in its own copies of the tracing variant
    (its dispatcher programs stay idle): the trampoline counts the runs it
    skipped on those copies (bpf_prog_info.recursion_misses, 5.12+), so
    that is where they are read, both halves of a return probe."""
    from ktui.kernel.maps import bpfsys
    from ktui.kernel.generic.engine import GenericEngine, Slot

    runs = {10: ProgRun(0, 0, 100), 11: ProgRun(0, 0, 200),  # dispatcher programs
            20: ProgRun(500, 5, 3), 21: ProgRun(700, 5, 4)}  # tracing copies: fexit, its fentry half
    monkeypatch.setattr(bpfsys, "prog_run", lambda fd: runs[fd])
    fexit = Slot(0, 1, parse_spec("vfs_read:r:retval"), 7, 0, progs=[10, 11], btf_id=42, nargs=4,
                 tprogs=[20, 21])
    assert fexit.via == "fexit"
    assert GenericEngine._runs(fexit, timed=False) == {"recursion_misses": 7}
    assert GenericEngine._runs(fexit, timed=True) == {"recursion_misses": 7, "run_ns": 1200, "run_count": 5}
    by_kprobe = Slot(1, 1, parse_spec("vfs_read:r:retval"), 8, 1, progs=[10, 11])
    assert by_kprobe.via == "kretprobe"
    assert GenericEngine._runs(by_kprobe, timed=False) == {"recursion_misses": 300}
    waiting = Slot(2, 1, parse_spec("vfs_read:c"), 9, None, progs=[10], btf_id=42, nargs=4)
    assert GenericEngine._runs(waiting, timed=False) == {"recursion_misses": 0}  # no copy loaded yet


def test_a_tracing_probes_recursion_misses_show_beside_lost():
    from ktui.record.feed import ProbeState, ProbeStatus
    from ktui.widgets.probe_table import ProbeLine, row_cells
    from ktui.pipeline.accounting import loss_lines

    probe = parse_spec("vfs_read:c")
    stats = ProbeStats(0, hits=10, lost=2, recursion_misses=3)
    line = ProbeLine(ProbeStatus(0, probe, ProbeState.ATTACHED, via="fentry"), stats)
    cells = [c.plain for c in row_cells(line)]
    assert "2+3" in cells and "attached fentry" in cells
    assert ("  3 runs missed (recursion)", "yellow") in loss_lines(stats, is_return=False)
