"""`latency` in the language (lang.latency), on the host: a filter operand
and a sum(...) value of return probes and span ends, refused elsewhere in
one line with its column; its plan (read where it is compared, summed
after the filter, a span end's after its key); never compiled; a sum of
it shown as a duration by the stats pane, NDJSON and the exporter. The
kernel's side: tests/kernel/test_latency_builtin.py."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ktui.kernel.codegen.program import never_compiled
from ktui.kernel.generic import abi
from ktui.kernel.generic.engine import Slot
from ktui.kernel.generic.plan import build_plan
from ktui.kernel.session.edits import generic_only
from ktui.lang.latency import sums_latency, uses_latency
from ktui.lang.filters import parse_filter
from ktui.lang.model import IntLit, ProbeSetError, SpecError
from ktui.lang.probeset import loads_probeset
from ktui.lang.spec import parse_probe_text, parse_spec_clauses
from ktui.record.feed import ProbeStats
from ktui.screens.probe_dialog import dialog_spec

from written_plans import written_plan as _plan

BLOCK = ("io=blk_mq_end_request:c:rq,dev=rq->part->bd_dev since(blk_mq_start_request:c:rq) "
         "count(dev) sum(latency)")


@pytest.mark.parametrize("text", [
    "vfs_read:r if latency > 1000000",
    "vfs_read:r count(comm) sum(latency)",
    "vfs_read:r:retval count(comm) sum(latency) if latency >= 5 && retval > 0",
    BLOCK + " if latency > 1000000",
    "syscalls/sys_exit_read:t:ret since(syscalls/sys_enter_read:t) sum(latency) if latency > 100",
    "f:r since(g:c) if latency < 10",
])
def test_latency_is_a_filter_operand_and_a_sum_where_a_hit_has_one(text):
    probe = parse_probe_text(text)
    assert probe.timed and uses_latency(probe)
    assert never_compiled(probe) and "generic engine only" in generic_only(probe)
    unlabelled = dataclasses.replace(probe, label=None, filter=None)  # (the dialog's own fields)
    assert parse_spec_clauses(dialog_spec(unlabelled)) == unlabelled  # an edit gives it back


def test_a_probe_that_does_not_read_latency_is_as_it_was():
    for text in ("vfs_read:r count(comm) sum(retval)", 'vfs_read:r:retval if comm == "latency"'):
        probe = parse_probe_text(text)
        assert not uses_latency(probe) and not sums_latency(probe) and not never_compiled(probe)


@pytest.mark.parametrize("text, words, col", [
    ("vfs_read:c if latency > 5", "filter: latency exists only where a hit has one", 15),
    ("vfs_read:c:a3 if a3 > 1 && latency > 5", "filter: latency exists only", 28),
    ("syscalls/sys_exit_read:t:ret if latency > 5", "filter: latency exists only", 33),
    ("blk_mq_end_request:c:rq if latency > 5", "filter: latency exists only", 28),
    ("vfs_read:c count(comm) sum(latency)", "sum: latency exists only where a hit has one", 12),
    ("vfs_read:r:latency", "latency is not fetched: every event of a return probe or a span carries it", 12),
    ("vfs_read:r:t=latency", "latency is not fetched", 12),
    ("vfs_read:r hist(latency)", "hist: latency: a return probe's or a span's latency histogram is kept already", 12),
    ("vfs_read:r count(comm,latency)", "count: latency is no key: every hit's latency differs", 12),
    ("vfs_read:r if latency > \"x\"", "latency is an integer; compare it with a number", 25),
    ("vfs_read:r if latency > -1000000000000000000000", "integer out of 64-bit range", 25),
])
def test_latency_is_refused_in_one_line_at_its_column(text, words, col):
    with pytest.raises(SpecError) as err:
        parse_probe_text(text)
    assert words in err.value.message and "\n" not in str(err.value)
    assert err.value.col == col, err.value


@pytest.mark.parametrize("text, ns", [
    ("latency > 100ms", 100_000_000), ("latency >= 1s", 1_000_000_000), ("latency < 250us", 250_000),
    ("latency != 7ns", 7), ("latency > 18446744073s", 18_446_744_073_000_000_000),
])
def test_a_duration_literal_is_nanoseconds_printed_as_written(text, ns):
    probe = parse_probe_text(f"vfs_read:r if {text}")
    assert str(probe.filter) == text and probe.filter.right == IntLit(ns)  # equal to the plain number
    assert parse_filter(str(probe.filter)) == probe.filter
    assert build_plan(probe, gen=1).cmps[0].imm == ns


@pytest.mark.parametrize("text, words, col", [
    ("vfs_read:r:a3 if a3 > 100ms", "filter: 100ms is a duration: it compares with latency only "
                                    "(compare a3 with a plain number)", 23),
    ("vfs_read:r if 1s == pid", "filter: 1s is a duration: it compares with latency only", 15),
    ("vfs_read:r if latency > -5ms", "filter: a duration is not negative", 25),
    ("vfs_read:r if latency > 5m", 'filter: bad number "5m"', 25),
    ("vfs_read:r if latency > 0x10ms", 'filter: bad number "0x10ms"', 25),
    ("vfs_read:r if latency > 18446744074s", "filter: integer out of 64-bit range", 25),
])
def test_a_bad_duration_is_refused_at_its_column(text, words, col):
    with pytest.raises(SpecError) as err:
        parse_probe_text(text)
    assert words in err.value.message and err.value.col == col, err.value


def test_the_yaml_form_takes_latency_on_a_span_end_and_refuses_it_on_a_call():
    ps = loads_probeset("""
name: l
probes:
  - spec: io=blk_mq_end_request:c:rq since(blk_mq_start_request:c:rq)
    count: comm
    sum: latency
    filter: latency > 1000
  - spec: reads=vfs_read:r
    sum: latency
""")
    assert [sums_latency(p) for p in ps.probes] == [True, True]
    with pytest.raises(ProbeSetError) as err:
        loads_probeset("name: l\nprobes:\n  - spec: vfs_read:c\n    sum: latency\n")
    assert "sum: latency exists only where a hit has one" in str(err.value) and ":4:" in str(err.value)
    with pytest.raises(ProbeSetError) as err:
        loads_probeset("name: l\nprobes:\n  - spec: vfs_read:c\n    filter: latency > 3\n")
    assert "filter: latency exists only" in str(err.value) and ":4:" in str(err.value)


def test_the_plan_compares_latency_where_the_filter_runs_and_sums_it_after():
    plan = build_plan(parse_probe_text("vfs_read:r:a3 count(comm) sum(latency) if latency > 1000000"), gen=1)
    assert plan.ncmps == 1
    c = plan.cmps[0]
    # read from the hit itself, not a fetch of it made before the filter
    assert (c.lsrc, c.rsrc, c.imm, c.sign, abi.CMP_OPS[c.op]) == (abi.SRC_LATENCY, abi.SRC_CONST, 1000000, 0, ">")
    summed = plan.fetch[plan.agg_sum]
    assert (summed.src, summed.kind, summed.width, summed.nderef) == (abi.SRC_LATENCY, abi.K_UINT, 8, 0)
    assert plan.agg == abi.AGG_COUNT | abi.AGG_SUM and plan.agg_comm and not plan.agg_signed
    assert plan.fetch_agg == 1 << plan.agg_sum and not plan.fetch_before
    assert not plan.flags & abi.F_BARE and plan.flags & abi.F_TIME


def test_a_span_ends_latency_is_summed_after_its_key_is_read(monkeypatch):
    end = Slot(7, 3, parse_probe_text("f:c:a1 since(g:c:a1) count(comm) sum(latency) if latency > 5"), 4)
    plan = _plan(end, monkeypatch)
    assert plan.flags & abi.F_SPAN_END and plan.span_nkeys == 1
    assert plan.fetch[plan.agg_sum].src == abi.SRC_LATENCY
    # the key before the start is looked up; the latency only once it is known (after the filter)
    assert plan.fetch_before == 0b1 and plan.fetch_agg & (1 << plan.agg_sum)
    assert not plan.fetch_before & (1 << plan.agg_sum)
    assert plan.cmps[0].lsrc == abi.SRC_LATENCY


def test_the_abi_gives_the_program_its_source():
    assert "#define SRC_LATENCY 14" in abi.c_declarations()


STATS = ProbeStats(0, hits=23, top_values=((("lat_slow",), 3, 912_345_678), (("lat_fast",), 20, 2_345_678)),
                   value_keys=2, value_sum=914_691_356)


def test_the_stats_pane_shows_a_sum_of_latency_as_a_duration_and_its_mean():
    from ktui.pipeline.value_views import top_value_lines

    lines = [line[0] for line in top_value_lines(parse_probe_text("vfs_read:r count(comm) sum(latency)"), STATS, 60)]
    assert lines[0] == "by comm: hits, sum(latency), its mean"
    assert "912ms avg 304ms" in lines[3] and "lat_slow" in lines[3]
    assert "2.35ms avg 117us" in lines[4]
    plain = [line[0] for line in top_value_lines(parse_probe_text("vfs_read:r count(comm) sum(retval)"), STATS, 60)]
    assert "912.3M" in plain[3] and "avg" not in plain[3]


def test_ndjson_and_the_exporter_say_a_sum_of_latency_is_time():
    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    from ktui.pipeline.ndjson import aggregate_fields
    from ktui.pipeline.prometheus import ProbeCollector, ProbeView, value_shape

    timed = parse_probe_text("vfs_read:r count(comm) sum(latency)")
    sized = parse_probe_text("vfs_read:r count(comm) sum(retval)")
    fields = aggregate_fields(timed, STATS)
    assert fields["sum_unit"] == "ns" and fields["top_values"][0]["sum"] == 912_345_678
    assert "sum_unit" not in aggregate_fields(sized, STATS)
    json.dumps(fields)
    views = [ProbeView("t", "s", True, STATS, **value_shape(timed)), ProbeView("b", "s", True, STATS, **value_shape(sized))]
    registry = CollectorRegistry()
    registry.register(ProbeCollector(lambda: views))
    text = generate_latest(registry).decode()
    assert 'ktui_probe_key_latency_seconds_total{comm="lat_slow",probe="t",set="s"} 0.912345678' in text
    assert 'ktui_probe_key_sum_total{comm="lat_slow",probe="b",set="s"} 9.12345678e+08' in text
    assert 'ktui_probe_key_sum_total{comm="lat_slow",probe="t"' not in text
    assert 'ktui_probe_key_latency_seconds_total{comm="lat_slow",probe="b"' not in text
