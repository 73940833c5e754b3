"""hist / count / sum: the short form and the YAML keys (errors located,
round-trip on save), the C codegen makes from them, how their maps are
read back (fake bcc tables), and their NDJSON keys. No bcc, no kernel."""

from __future__ import annotations

import ctypes
import json
from types import SimpleNamespace

import pytest

from ktui.kernel.maps.aggmaps import read_aggregates
from ktui.kernel.codegen import generate
from ktui.lang.model import AGG_MAX_KEYS_DEFAULT, ProbeSetError, SpecError
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_probe_text
from ktui.pipeline.ndjson import aggregate_fields
from ktui.record.feed import ProbeStats
from ktui.record.histogram import HIST_SLOTS

from tests.unit.test_statmaps import HashTable, PerCpuTable, hist_row


def test_the_short_form_parses_and_prints_back():
    p = parse_probe_text("vfs_read:r count(comm) sum(retval) if retval >= 0")
    assert [str(k) for k in p.agg.keys] == ["comm"]
    assert str(p.agg.sum) == "retval"
    assert str(p.filter) == "retval >= 0"
    assert str(p.agg) == "count(comm) sum(retval)"
    q = parse_probe_text("vfs_read:c:a1 hist(a3) count(a3, +8(a1):u32) max_keys(8)")
    assert str(q.agg) == "hist(a3) count(a3,+8(a1):u32) max_keys(8)"
    assert parse_probe_text(f"{q.spec_text} {q.agg}") == q
    assert q.fetches and str(q.fetches[0]) == "a1"


@pytest.mark.parametrize("text, col, words", [
    ("vfs_read:c sum(retval)", 12, "only in return probes"),
    ("vfs_read:c hist(comm)", 12, "not an integer"),
    ("vfs_read:c hist(a3", 12, "not closed"),
    ("vfs_read:c count(a9)", 18, "a1..a6"),
    ("vfs_read:c hist(a3) hist(a2)", 21, "twice"),
    ("vfs_read:c count(a1) max_keys(x)", 31, "whole number"),
])
def test_short_form_errors_name_the_column(text, col, words):
    with pytest.raises(SpecError) as err:
        parse_probe_text(text)
    assert err.value.col == col, str(err.value)
    assert words in err.value.message


def test_names_are_taken_in_aggregations_and_print_back():
    p = parse_probe_text("vfs_read:c:a1 count(comm, count) hist(file->f_pos)")
    assert str(p.agg) == "hist(file->f_pos) count(comm,count)"
    assert parse_probe_text(f"{p.spec_text} {p.agg}") == p
    assert p.uses_names  # so it is bound to the kernel's BTF before it runs


def test_with_btf_an_aggregations_names_are_bound_and_run_in_the_generic_program(monkeypatch, tmp_path):
    """Issue 30: `count(comm) sum(retval) hist(count)`, by name, with the
    position and type the kernel's BTF gives; from -e and from a file."""
    from click.testing import CliRunner

    from ktui import cli
    from ktui.kernel.generic import abi
    from ktui.kernel.generic.plan import build_plan
    from ktui.lang.bind import bind_probe
    from ktui.lang.model import Arg, positional
    from tests.unit.namedkernel import kernel_names

    kernel = kernel_names(tmp_path)
    probe = bind_probe(parse_probe_text("vfs_read:r count(comm) sum(retval) hist(count)"), kernel)
    assert positional(probe.agg.hist.expr) == Arg(3)
    plan = build_plan(probe, gen=1)
    assert plan.agg == abi.AGG_HIST | abi.AGG_COUNT | abi.AGG_SUM
    hist = plan.fetch[plan.agg_hist]
    assert (hist.src, hist.reg) == (abi.SRC_ARG, 2)  # a return probe reads the argument saved at entry
    monkeypatch.setattr(cli, "_kernel_names", lambda: kernel)
    r = CliRunner().invoke(cli.main, ["compile", "-e", "vfs_read:c count(count)"])
    assert r.exit_code == 0, r.output
    loaded = loads_probeset("name: x\nprobes:\n  - spec: vfs_read:c\n    count: [comm, count]\n",
                            source="f.yaml", kernel=kernel)
    assert positional(loaded.probes[0].agg.keys[1].expr) == Arg(3)
    with pytest.raises(ProbeSetError) as err:
        loads_probeset("name: x\nprobes:\n  - spec: vfs_read:c hist(nosuch)\n", source="f.yaml", kernel=kernel)
    assert str(err.value).startswith("f.yaml:3:"), str(err.value)
    assert "nosuch" in str(err.value) and "\n" not in str(err.value).strip()


SET = """name: agg
probes:
  - spec: vfs_read:r
    count: [comm]
    sum: retval
    filter: retval >= 0
  - spec: sizes=vfs_read:c hist(a3) count(a3) max_keys(8)
  - spec: vfs_read:c
    count: comm, a3
"""


def test_yaml_keys_and_the_short_form_load_and_save_back_equal():
    ps = loads_probeset(SET)
    first, second, third = ps.probes
    assert str(first.agg) == "count(comm) sum(retval)"
    assert str(second.agg) == "hist(a3) count(a3) max_keys(8)"
    assert [str(k) for k in third.agg.keys] == ["comm", "a3"]
    assert third.agg.max_keys == AGG_MAX_KEYS_DEFAULT
    text = dumps_probeset(ps)
    assert "hist: a3" in text and "max_keys: 8" in text
    assert loads_probeset(text).probes == ps.probes


@pytest.mark.parametrize("body, where, words", [
    ("  - spec: vfs_read:c\n    sum: retval\n", "f.yaml:4:10", "sum: retval exists only in return probes"),
    ("  - spec: vfs_read:c\n    hist: a3:string\n", "f.yaml:4:11", "hist: a3:string is not an integer"),
    ("  - spec: vfs_read:c\n    count: [a1, a1]\n", "f.yaml:4:12", "count: a1 is given twice"),
    ("  - spec: vfs_read:c\n    count: [a1, +(]\n", "f.yaml:4:", "count:"),
    ("  - spec: vfs_read:c\n    max_keys: 0\n", "f.yaml:4:15", "max_keys"),
])
def test_yaml_errors_are_located(body, where, words):
    with pytest.raises(ProbeSetError) as err:
        loads_probeset("name: x\nprobes:\n" + body, source="f.yaml")
    assert str(err.value).startswith(where), str(err.value)
    assert words in str(err.value)


def test_codegen_makes_one_map_per_counting_probe_and_checks_the_signs():
    prog = generate([parse_probe_text("vfs_read:r count(comm) sum(retval)"),
                     parse_probe_text("vfs_read:c hist(a3) count(a3) max_keys(8)"),
                     parse_probe_text("vfs_write:c")])
    text = prog.text
    assert "BPF_HASH(ktui_agg0, struct ktui_agg0_key, struct ktui_agg_val, 10240);" in text
    assert "BPF_HASH(ktui_agg1, struct ktui_agg1_key, struct ktui_agg_val, 8);" in text
    assert "ktui_agg2" not in text
    assert "BPF_PERCPU_ARRAY(ktui_vhist, struct ktui_hist, KTUI_NPROBES);" in text
    # retval is signed: a -errno is not summed; a3 is unsigned: always in the histogram
    assert "__sync_fetch_and_add(&av->sum, ((s64)t1 >= 0 ? t1 : 0));" in text
    assert "    if (1) {" in text
    assert text.count("ktui_bump(ktui_agg_dropped.lookup(&probe));") == 2
    # comm read into the key itself when the probe had not read it
    assert "bpf_get_current_comm(&ak.k0, sizeof(ak.k0));" in text


def test_a_probe_without_aggregations_compiles_as_before():
    assert "ktui_agg" not in generate([parse_probe_text("vfs_read:c:a3")]).text


class AggVal(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint64), ("sum", ctypes.c_uint64)]


class Key(ctypes.Structure):
    _fields_ = [("k1", ctypes.c_int64), ("k0", ctypes.c_char * 16)]


def test_maps_read_back_as_top_values_by_sum_merging_stale_comm_tails():
    probe = parse_probe_text("vfs_read:r count(comm,retval) sum(retval)")
    rows = [
        (Key(5, b"dd"), AggVal(2, 10)),
        (Key(5, b"dd\0x"), AggVal(1, 5)),  # the same comm with a stale tail
        (Key(-9, b"cat"), AggVal(7, 0)),
        (Key(100, b"cat"), AggVal(1, 100)),
    ]
    lost = [(Key(7, b"sh"), None), (Key(7, b"sh\0y"), None), (Key(8, b"sh"), None)]
    tables = {b"ktui_agg3": HashTable(rows), b"ktui_agg_dropped": PerCpuTable({3: [1, 0, 2]}),
              b"ktui_agg3_lost": HashTable(lost), b"ktui_agg_lost_full": PerCpuTable({3: [0, 1, 0]})}
    got = read_aggregates(tables, probe, 3)
    assert got["values_dropped"] == 3
    assert got["keys_dropped"] == 2  # ("sh", 7) with and without a stale tail is one key
    assert got["keys_dropped_unknown"] == 1
    assert got["value_keys"] == 3
    assert got["value_sum"] == 100 + 15 + 0  # every key's sum: the top values' shares are of it
    assert got["top_values"] == ((("cat", 100), 1, 100), (("dd", 5), 3, 15), (("cat", -9), 7, 0))


def test_value_histogram_is_one_lookup():
    probe = parse_probe_text("vfs_read:c hist(a3)")
    hist = PerCpuTable({0: hist_row([{3: 1}, {3: 2, 13: 1}, {}])})
    got = read_aggregates({b"ktui_vhist": hist, b"ktui_agg_dropped": PerCpuTable({0: [0, 0, 0]}),
                           b"ktui_vhist_sum": PerCpuTable({0: [7 + 14, 8200, 0]})}, probe, 0)
    assert hist.lookups == 1
    assert got["value_hist"] == tuple(3 if k == 3 else 1 if k == 13 else 0 for k in range(HIST_SLOTS))
    assert got["value_hist_sum"] == 7 + 14 + 8200  # the values' exact sum, over the CPUs
    assert "top_values" not in got


def test_ndjson_keys():
    probe = parse_probe_text("vfs_read:r hist(retval) count(comm) sum(retval)")
    stats = ProbeStats(0, value_hist=(0, 1) + (0,) * 63, top_values=((("dd",), 3, 12),),
                       value_keys=1, values_dropped=2, keys_dropped=1, keys_dropped_unknown=1)
    out = aggregate_fields(probe, stats)
    assert json.loads(json.dumps(out)) == {
        "values_dropped": 2, "keys_dropped": 1, "keys_dropped_unknown": 1,
        "value_hist": [0, 1] + [0] * 63, "value_hist_sum": 0, "value_keys": 1,
        "top_values": [{"key": {"comm": "dd"}, "count": 3, "sum": 12}]}
    total = aggregate_fields(parse_probe_text("vfs_read:r sum(retval)"),
                             ProbeStats(0, top_values=(((), 4, 9),)))
    assert total["top_values"] == [{"key": {}, "count": 4, "sum": 9}]


def test_a_recording_keeps_the_aggregations():
    from ktui.pipeline.recording import stats_from_json, stats_to_json
    from ktui.record.feed import StatsSnapshot

    stats = ProbeStats(3, hits=9, value_hist=(0, 2) + (0,) * 63, value_hist_sum=2, top_values=((("dd", 7), 2, 14),),
                       value_keys=1, value_sum=14, values_dropped=1, keys_dropped=1, keys_dropped_unknown=3, stacks=(((0xffff1, 0xffff2), 9),),
                       stack_count=1, stacks_dropped=2)
    back = stats_from_json(json.loads(json.dumps(stats_to_json(StatsSnapshot(1.0, {3: stats})))))
    assert back.probes[3] == stats
