"""Spans, `END since(START)`, on the host: the language (the compact clause,
the YAML key, save and load, an edit's text, refusals at their column),
the plans of both ends (the key read first, the start writing nothing),
what the stats, NDJSON and the exporter say of one, and that a span is
never compiled. The kernel's side: tests/kernel/test_spans.py."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ktui.kernel.codegen.program import never_compiled
from ktui.kernel.generic import abi
from ktui.kernel.generic.engine import Slot
from ktui.lang.model import Kind, ProbeSetError, RetVal, SpecError
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spans import start_values, start_with_values
from ktui.lang.spec import parse_probe_text, parse_spec_clauses
from ktui.pipeline.accounting import loss_lines
from ktui.record.feed import ProbeStats
from ktui.screens.probe_dialog import dialog_spec

from written_plans import written_plan as _plan

BLOCK = "io=blk_mq_end_request:c:rq,dev=rq->part->bd_dev since(blk_mq_start_request:c:rq) count(dev)"


def test_the_compact_clause_gives_the_end_its_start():
    probe = parse_probe_text(BLOCK + " if dev == 7340032")
    assert (probe.label, probe.spec_text, str(probe.agg), str(probe.filter)) == (
        "io", "blk_mq_end_request:c:rq,dev=rq->part->bd_dev", "count(dev)", "dev == 7340032")
    assert (probe.since.spec_text, probe.since.kind, probe.timed) == ("blk_mq_start_request:c:rq", Kind.CALL, True)
    thread = parse_probe_text("syscalls/sys_exit_read:t:ret since(syscalls/sys_enter_read:t)")
    assert (thread.since.target.tracepoint, thread.since.fetches) == ("syscalls/sys_enter_read", ())
    # a start's own parentheses (+OFF(...)) end inside the clause
    assert parse_probe_text("f:c:a1 since(g:c:+8(a1))").since.spec_text == "g:c:+8(a1)"
    assert not parse_probe_text("vfs_read:c:a3").timed and parse_probe_text("vfs_read:r").timed
    # either end a return: its key may be the return value
    both = parse_probe_text("f:r:retval since(g:r:retval)")
    assert (both.kind, both.since.kind, both.since.fetches[0].expr) == (Kind.RETURN, Kind.RETURN, RetVal())


@pytest.mark.parametrize("text, col, words", [
    ("vfs_read:c since(vfs_*:c)", 12, "is a pattern"),
    ("vfs_read:c:a1 since(vfs_write:c:a1,a2)", 15, "its end's first 2 fetch(es)"),
    ("f:c:a1,a2,a3,a4,a5 since(g:c:a1,a2,a3,a4,a5)", 20, "at most 4"),
    ("f:c:a1 since(g:c:comm)", 8, "not comm"),
    ("f:c:a1:string since(g:c:a1)", 15, "not a string"),
    ("f:c since(g:c) since(h:c)", 16, "given twice"),
    ("f:c since(g:c", 5, "no closing parenthesis"),
    ("f:c since( )", 11, "names the span's start"),
    ("f:c since(g:x)", 13, "since: "),  # the start's own error, at its column in the whole text
    ("f:c within(g) since(h:c)", 15, "a span's end has within"),
])
def test_a_bad_span_is_refused_at_its_column(text, col, words):
    with pytest.raises(SpecError) as err:
        parse_probe_text(text)
    assert (err.value.col, words in err.value.message, "\n" in err.value.message) == (col, True, False), err.value


def test_the_yaml_key_saves_and_loads_back_and_is_located_when_bad():
    text = "name: s\nprobes:\n  - spec: blk_mq_end_request:c:rq\n    since: blk_mq_start_request:c:rq\n"
    ps = loads_probeset(text)
    assert ps.probes[0].since.spec_text == "blk_mq_start_request:c:rq"
    assert "since: blk_mq_start_request:c:rq" in dumps_probeset(ps)
    assert loads_probeset(dumps_probeset(ps)) == ps
    with pytest.raises(ProbeSetError) as err:  # the start's own error, inside the value
        loads_probeset(text.replace("start_request:c:rq", "start_request:x:rq"), source="s.yaml")
    assert str(err.value).startswith("s.yaml:4:33:"), err.value
    with pytest.raises(ProbeSetError) as err:  # the two ends together: at the key
        loads_probeset(text.replace("end_request:c:rq", "end_request:c"), source="s.yaml")
    assert str(err.value).startswith("s.yaml:4:5:") and "its end's first 1" in str(err.value)


@pytest.mark.parametrize("text", [BLOCK, "vfs_read:r count(comm) within(ksys_read)", "f:c since(g:c) hist(a1)",
                                  "f:c:n=start.a3 since(g:c) sum(start.a4) hist(start.+8(a1):u32)"])
def test_an_edit_starts_from_text_that_gives_the_probe_back(text):
    probe = dataclasses.replace(parse_spec_clauses(text), label=None)  # (the dialog's own field)
    assert parse_spec_clauses(dialog_spec(probe)) == probe  # its gate and span kept (an edit lost the gate)


def test_the_start_reads_its_key_first_and_writes_nothing_and_the_end_reads_its_key_before_the_lookup(monkeypatch):
    end = Slot(7, 3, parse_probe_text("f:c:a1,a2,a3 since(g:c:a2,a1)"), 4)
    start = Slot(9, 1, end.probe.since, -2, span_end=end)
    plan = _plan(start, monkeypatch)
    assert plan.flags & abi.F_SPAN_START and not plan.flags & (abi.F_BARE | abi.F_EMITS | abi.F_SPAN_END)
    assert (plan.span, plan.span_gen, plan.span_nkeys, plan.fetch_before, plan.fetch_after) == (8, 3, 2, 0b11, 0)
    plan = _plan(end, monkeypatch)
    assert plan.flags & (abi.F_SPAN_END | abi.F_EMITS | abi.F_TIME) and not plan.flags & abi.F_BARE
    assert (plan.span, plan.span_gen, plan.span_nkeys) == (8, 3, 2)
    assert (plan.fetch_before & 0b11, plan.fetch_after & 0b11, plan.fetch_after & 0b100) == (0b11, 0, 0b100)
    # a span joined by the thread: no key fetch; neither end ever the bare or counter path
    bare = Slot(2, 1, parse_probe_text("f:c since(g:c)"), 5)
    plan = _plan(bare, monkeypatch)
    assert (plan.span_nkeys, plan.flags & abi.F_BARE) == (0, 0)
    assert bare.waits_for_program and start.waits_for_program and bare.in_span and start.in_span


def test_with_events_off_a_span_still_gathers_what_its_keys_and_values_read(monkeypatch):
    """`ktui export` writes no events: an end's and a start's fetches are
    then read by no pass when build_plan derives the plan's flags, and only
    the span made of them reads its key and values: the registers must
    still be gathered for them, or the key would be read from nothing."""
    end = Slot(7, 3, parse_probe_text("f:c:a1,a2,a3 since(g:c:a2,a1,a4)"), 4)
    start = Slot(9, 1, end.probe.since, -2, span_end=end)
    plan = _plan(start, monkeypatch, events=False)
    assert plan.flags & abi.F_REGS and not plan.flags & (abi.F_BARE | abi.F_EMITS)
    assert plan.fetch_before == 0b111
    plan = _plan(end, monkeypatch, events=False)
    assert plan.flags & (abi.F_SPAN_END | abi.F_REGS) == abi.F_SPAN_END | abi.F_REGS
    assert not plan.flags & (abi.F_BARE | abi.F_EMITS)
    assert (plan.fetch_before & 0b11, plan.fetch_after) == (0b11, 0)  # its key; a3 only an event held


def test_a_span_is_never_compiled():
    assert never_compiled(parse_probe_text("f:c since(g:c)"))


def test_the_stats_say_what_a_span_could_not_count():
    s = ProbeStats(1, hits=90, span_unmatched=4, span_starts=100, span_unkept=1, span_replaced=2, span_matched=95)
    assert s.span_waiting == 2
    text = "\n".join(line for line, _ in loss_lines(s, False, span=True))
    assert "100 starts, 2 waiting for their end" in text
    assert "4 ends with no start waiting" in text and "1 starts not kept" in text and "2 starts replaced" in text
    quiet = ProbeStats(1, hits=5, span_starts=5, span_matched=5)
    assert [line for line, _ in loss_lines(quiet, False, span=True)] == ["5 starts, 0 waiting for their end"]
    assert ProbeStats(1, span_starts=3, span_matched=4).span_waiting == 0  # read one after another: never below 0


def test_ndjson_and_the_exporter_carry_a_spans_counters_and_latency():
    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    from ktui.pipeline.ndjson import uncounted_fields
    from ktui.pipeline.prometheus import ProbeView, ProbeCollector

    s = ProbeStats(1, hits=3, span_unmatched=1, span_starts=5, span_matched=3, span_replaced=1, hist=(0,) * 10 + (3,),
                   latency_sum_ns=3000)
    fields = uncounted_fields(s)
    assert (fields["span_starts"], fields["span_waiting"], fields["span_unmatched"], fields["unpaired"]) == (5, 1, 1, 0)
    assert "span_starts" not in uncounted_fields(ProbeStats(1, hits=3))
    json.dumps(fields)
    views = [ProbeView("io", "s", False, s, timed=True, span=True), ProbeView("plain", "s", False, ProbeStats(2, hits=1))]
    registry = CollectorRegistry()
    registry.register(ProbeCollector(lambda: views))
    text = generate_latest(registry).decode()
    assert 'ktui_probe_span_starts_total{probe="io",set="s"} 5.0' in text
    assert 'ktui_probe_span_waiting{probe="io",set="s"} 1.0' in text
    assert 'ktui_probe_span_unmatched_ends_total{probe="io",set="s"} 1.0' in text
    assert 'ktui_probe_latency_seconds_count{probe="io",set="s"} 3.0' in text
    assert 'probe="plain"' not in "\n".join(l for l in text.splitlines() if "span" in l or "latency" in l)


# ---------------------------------------------------------------- values of the start at the end (start.X)

VALUES = ("asked=syscalls/sys_exit_read:t:ret,start.count since(syscalls/sys_enter_read:t) count(comm) "
          "sum(start.count) if start.count > 4096 && start.fd == 3")


def test_an_end_reads_its_starts_values_in_its_fetches_filter_and_aggregations():
    probe = parse_probe_text(VALUES)
    assert [f.name for f in probe.fetches] == ["ret", "start.count"]
    assert (str(probe.agg), str(probe.filter)) == ("count(comm) sum(start.count)", "start.count > 4096 && start.fd == 3")
    # each distinct value once, in order: fetches, aggregations, then the filter's own names
    assert [str(f) for f in start_values(probe)] == ["count", "fd"]
    assert start_with_values(probe).spec_text == "syscalls/sys_enter_read:t:count,fd"
    # read as the start's kind reads it: a tracepoint's `flags` is its field
    flags = parse_probe_text("f:c since(syscalls/sys_enter_openat:t) sum(start.flags)")
    assert str(start_values(flags)[0]) == "args.flags" and str(flags.agg.sum) == "start.flags"
    # a parameter named start with a member is args.start (start.x is a start's value)
    named = parse_probe_text("f:c:args.start.x")
    assert (str(named.fetches[0]), parse_probe_text(str(named)) == named) == ("args.start.x", True)
    # it prints back to what parses again to the same probe
    assert parse_probe_text(f"{probe} {probe.agg} since({probe.since.spec_text}) if {probe.filter}") == probe


@pytest.mark.parametrize("text, col, words", [
    ("syscalls/sys_exit_read:t:ret,start.count", 30, "this probe has no since"),
    ("syscalls/sys_exit_read:t:ret sum(start.count)", 34, "this probe has no since"),
    ("syscalls/sys_exit_read:t:ret if start.count > 1", 33, "filter: start.X is a value read at a span's start"),
    ("f:c since(syscalls/sys_enter_read:t) sum(start.pid)", 5, "pid, tid, comm and cgroup are its start's"),
    ("f:c since(syscalls/sys_enter_read:t) sum(start.a3)", 5, "start.a3: a3: a tracepoint's values are its fields"),
    ("f:r:retval since(g:c) sum(start.retval)", 12, "start.retval: retval exists only in return probes"),
    ("f:c:start.a1,start.a2,start.a3,start.a4 since(g:c) sum(start.a5)", 41, "at most 4 values"),
    ("f:c:start.a3:u32 since(g:c) sum(start.a3)", 18, "read as two types"),
    ("f:c:start.a2:string since(g:c)", 21, "carries integers to its end, not text"),
    ("f:c:+8(start.a1) since(g:c)", 8, "not an address at its end"),
    ("f:c:start.a1 since(g:c:a1)", 14, "the key is read at the end"),
    ("f:c:start. since(g:c)", 11, "expected a value of the span's start"),
])
def test_a_bad_start_value_is_refused_at_its_column(text, col, words):
    with pytest.raises(SpecError) as err:
        parse_probe_text(text)
    assert (err.value.col, words in err.value.message, "\n" in err.value.message) == (col, True, False), err.value


def test_start_values_save_and_load_back_and_are_located_when_bad():
    text = ("name: s\nprobes:\n  - spec: syscalls/sys_exit_read:t:ret,start.count\n"
            "    since: syscalls/sys_enter_read:t\n    sum: start.count\n    filter: start.fd == 3\n")
    ps = loads_probeset(text)
    assert str(ps.probes[0].agg.sum) == "start.count" and str(ps.probes[0].filter) == "start.fd == 3"
    assert loads_probeset(dumps_probeset(ps)) == ps
    with pytest.raises(ProbeSetError) as err:  # no since: at the spec that reads one
        loads_probeset(text.replace("    since: syscalls/sys_enter_read:t\n", ""), source="s.yaml")
    assert str(err.value).startswith("s.yaml:3:11:") and "no since" in str(err.value), err.value
    with pytest.raises(ProbeSetError) as err:  # a value the start cannot read: at its since:
        loads_probeset(text.replace("sum: start.count", "sum: start.a1"), source="s.yaml")
    assert str(err.value).startswith("s.yaml:4:5:") and "start.a1: a1" in str(err.value), err.value


def test_the_start_stores_its_values_after_its_key_and_the_end_takes_them(monkeypatch):
    end = Slot(7, 3, parse_probe_text("f:c:a1,a2,start.a3 since(g:c:a2) sum(start.a4) "
                                      "if start.a5 > 3 && start.a3 < 9"), 4)
    start = Slot(9, 1, start_with_values(end.probe), -2, span_end=end)
    assert start.probe.spec_text == "g:c:a2,a3,a4,a5"
    plan = _plan(start, monkeypatch)
    assert (plan.span_nkeys, plan.span_nvals, plan.fetch_before) == (1, 3, 0b1111)
    monkeypatch.undo()
    plan = _plan(end, monkeypatch)
    fetches = [(plan.fetch[i].src, plan.fetch[i].reg) for i in range(plan.nfetch)]
    # its own fetch of start.a3 (value 0), start.a4 for the sum (value 1): never before the lookup
    assert fetches[2:] == [(abi.SRC_START, 0), (abi.SRC_START, 1)]
    assert (plan.fetch_before & 0b1100, plan.fetch_agg, plan.fetch_after & 0b100, plan.agg_sum) == (0, 0b1000, 0b100, 3)
    # the filter reads them where it runs, after the end took its start (start.a5: value 2)
    assert [(c.lsrc, c.lreg) for c in plan.cmps[:plan.ncmps]] == [(abi.SRC_START, 2), (abi.SRC_START, 0)]
    # a span with no start values: nothing stored but its key
    monkeypatch.undo()
    plain = Slot(5, 1, parse_probe_text("f:c:a1 since(g:c:a1)"), 6)
    plan = _plan(Slot(6, 1, start_with_values(plain.probe), -3, span_end=plain), monkeypatch)
    assert (plan.span_nkeys, plan.span_nvals) == (1, 0)


def test_start_values_are_bound_as_the_start_reads_them_and_kept_by_a_recording():
    from ktui.lang.bind import bind_probe, fetch_types, with_fetch_types
    from ktui.lang.model import positional
    from tests.unit.tracefs import FormatsKernel

    probe = bind_probe(parse_probe_text(VALUES), FormatsKernel("6.12"), text=VALUES)
    value = probe.fetches[1]
    assert (value.name, value.effective_type, value.ctype) == ("start.count", "u64", "size_t")
    assert probe.bindings["start.fd"].carried.effective_type == "u32"  # the filter's own value: unsigned int fd
    # the start reads its values at its own record's offsets, after its key (none: the thread)
    assert [str(positional(f.expr)) for f in start_with_values(probe).fetches] == ["+32(record)", "+16(record)"]
    # a start's int is signed at the end: in its events, filter and sums, and in a replay
    text = "syscalls/sys_exit_openat:t:ret,start.dfd since(syscalls/sys_enter_openat:t)"
    opens = bind_probe(parse_probe_text(text), FormatsKernel("6.12"), text=text)
    assert fetch_types(opens) == [[ "s64", "long"], ["s32", "int"]]
    replayed = with_fetch_types(parse_probe_text(text), fetch_types(opens))
    assert [f.effective_type for f in replayed.fetches] == ["s64", "s32"]
    # text, known to be text once bound: refused in one line
    with pytest.raises(SpecError) as err:
        bind_probe(parse_probe_text("sched/sched_switch:t since(sched/sched_wakeup:t) count(start.args.comm)"),
                   FormatsKernel("6.12"))
    assert err.value.message.startswith("since: start.args.comm is text (char[16])"), err.value


def test_a_keyed_histograms_start_value_key_is_bound_as_the_start_reads_it():
    """hist(VALUE, start.X): its key is typed as the start reads X (a
    signed int stays signed), as count's keys are."""
    from ktui.lang.bind import bind_probe
    from tests.unit.tracefs import FormatsKernel

    text = "syscalls/sys_exit_openat:t since(syscalls/sys_enter_openat:t) hist(latency, start.dfd)"
    probe = bind_probe(parse_probe_text(text), FormatsKernel("6.12"), text=text)
    assert probe.agg.hist_keys[0].effective_type == "s32"
