"""Tracepoint probes in the spec language: `CATEGORY/NAME:t[:FETCH,...]`,
what the grammar and the checks refuse (one line, with its column), and
the round trip through the canonical text and a probe set."""

from __future__ import annotations

import dataclasses

import pytest

from ktui.lang.model import Builtin, Fetch, Kind, Named, Probe, ProbeSetError, SpecError, Target
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_probe_text, parse_spec, parse_target, validate_probe
from tests.unit.spec_errors import spec_error

OPENAT = "syscalls/sys_enter_openat"


# ---------------------------------------------------------------- grammar


def test_a_tracepoint_parses_with_its_fields_by_name():
    probe = parse_spec(f"{OPENAT}:t:filename:ustring,flags")
    assert probe.target == Target(tracepoint=OPENAT)
    assert probe.kind is Kind.TRACEPOINT
    # `flags` is a register word in a kprobe; at a tracepoint it is a field
    assert probe.fetches == (Fetch(Named("filename"), "ustring"), Fetch(Named("flags")))


def test_a_label_goes_before_the_tracepoint():
    probe = parse_spec(f"opens={OPENAT}:t:filename:ustring")
    assert probe.label == "opens" and probe.target.tracepoint == OPENAT


def test_builtins_stay_builtins_and_args_reaches_a_field_of_that_name():
    probe = parse_spec("sched/sched_process_exec:t:filename,args.pid,pid")
    assert [f.expr for f in probe.fetches] == [Named("filename"), Named("pid"), Builtin("pid")]


def test_a_category_may_start_with_a_digit():
    assert parse_target("9p/9p_client_req") == Target(tracepoint="9p/9p_client_req")


def test_filters_and_aggregations_as_for_kprobes():
    probe = parse_probe_text("syscalls/sys_enter_read:t:count if count > 4096")
    assert str(probe.filter) == "count > 4096"
    agg = parse_probe_text("sched/sched_switch:t count(prev_comm)").agg
    assert agg.keys == (Fetch(Named("prev_comm")),)
    assert parse_probe_text(f"{OPENAT}:t if flags > 0").filter is not None


@pytest.mark.parametrize("text", [
    f"{OPENAT}:t",
    f"opens={OPENAT}:t:filename:ustring",
    f"{OPENAT}:t:filename:ustring,flags",
    f"{OPENAT}:t:dfd:s64,+8(filename):u32,f=args.flags:x32,comm,cpu",
    "sched/sched_process_exec:t:filename,args.pid,old_pid",
    "kmem/kmalloc:t:call_site:symbol,bytes_req",
])
def test_str_parses_back_equal(text):
    probe = parse_spec(text)
    again = parse_spec(str(probe))
    assert again == probe and again.label == probe.label
    validate_probe(probe)


def test_a_field_named_like_a_register_prints_as_args():
    probe = parse_spec(f"{OPENAT}:t:flags")
    assert probe.spec_text == f"{OPENAT}:t:args.flags"
    assert parse_spec(probe.spec_text) == probe


@pytest.mark.parametrize("text, col, message", [
    (f"{OPENAT}:c", 27, "a tracepoint (CATEGORY/NAME) takes kind t, got c"),
    (f"{OPENAT}:r:a1", 27, "a tracepoint (CATEGORY/NAME) takes kind t, got r"),
    ("vfs_read:t", 10, "kind t is for a tracepoint CATEGORY/NAME, e.g. syscalls/sys_enter_openat:t"),
    ("0xffffffff81234560:t", 20, "kind t is for a tracepoint"),
    ("vfs_read:x", 10, 'kind must be c, r or t, got "x" (c = call, r = return, t = tracepoint)'),
    (f"{OPENAT}", 26, "expected :t after the target"),
    ("sys.calls/x:t", 4, "a tracepoint's category is letters, digits and _"),
    ("syscalls/:t", 10, "expected the event's name after syscalls/"),
    ("syscalls/sys_enter_openat.isra.0:t", 26, 'a tracepoint is CATEGORY/NAME, names of letters, digits and _'),
    ("syscalls/a/b:t", 11, "a tracepoint is CATEGORY/NAME"),
    (f"{OPENAT}+0x10:t", 26, "a tracepoint has no offset"),
])
def test_grammar_refusals_name_the_column(text, col, message):
    err = spec_error(text)
    assert err.col == col, str(err)
    assert err.message.startswith(message), str(err)


# ---------------------------------------------------------------- checks

FIELDS_BY_NAME = ("a tracepoint's values are its fields by name (e.g. filename, flags): "
                  "a1..a6 and registers are for kernel functions")


@pytest.mark.parametrize("text, col, word", [
    (f"{OPENAT}:t:a2", 29, "a2"),
    (f"{OPENAT}:t:arg2:ustring", 29, "arg2"),
    (f"{OPENAT}:t:filename,rdi", 38, "rdi"),
    (f"{OPENAT}:t:retval", 29, "retval"),
    (f"{OPENAT}:t:x=+8(rsi):u32", 34, "rsi"),
    (f"{OPENAT}:t:eflags", 29, "eflags"),
    (f"{OPENAT}:t:eax", 29, "eax"),
])
def test_arguments_registers_and_retval_are_refused(text, col, word):
    err = spec_error(text)
    assert (err.col, err.message) == (col, f"{word}: {FIELDS_BY_NAME}")


def test_the_same_in_an_aggregation_and_a_filter():
    err = spec_error(f"{OPENAT}:t hist(a3)")
    assert err.message == f"a3: {FIELDS_BY_NAME}" and err.col == 34
    err = spec_error(f"{OPENAT}:t:filename if a1 > 3")
    assert err.message.startswith(f"filter: a1: {FIELDS_BY_NAME}") and err.col == 41
    err = spec_error(f"{OPENAT}:t:filename if rdi > 3")
    assert err.message == f"filter: rdi: {FIELDS_BY_NAME} (a field named like a register: args.NAME)"


def test_a_member_of_a_field_is_refused_at_its_step():
    err = spec_error(f"{OPENAT}:t:filename->x")
    assert err.col == 37  # the `->`
    assert err.message.startswith("filename->x: a tracepoint's field has no members to name")
    assert "+OFFSET(filename)" in err.message
    err = spec_error(f"{OPENAT}:t:filename if filename->x > 1")
    assert err.message.startswith("filter: filename->x: a tracepoint's field has no members")


def test_validate_refuses_what_a_return_probe_or_a_kprobe_has():
    probe = parse_spec(f"{OPENAT}:t:filename:ustring")
    for change, words in (({"errno": "on"}, "errno: only a return probe"),
                          ({"maxactive": 16}, "maxactive: only a return probe"),
                          ({"attach": "fentry"}, "attach: fentry is for kernel functions"),
                          ({"attach": "kprobe"}, "attach: kprobe is for kernel functions")):
        with pytest.raises(SpecError, match=words):
            validate_probe(dataclasses.replace(probe, **change))
    validate_probe(dataclasses.replace(probe, attach="auto"))


def test_a_hand_built_tracepoint_probe_must_be_canonical():
    validate_probe(Probe(Target(tracepoint=OPENAT), Kind.TRACEPOINT, (Fetch(Named("flags")),)))
    with pytest.raises(SpecError, match="kind t is for a tracepoint"):
        validate_probe(Probe(Target("vfs_read"), Kind.TRACEPOINT))


# ---------------------------------------------------------------- probe sets


def load_error(text: str) -> ProbeSetError:
    with pytest.raises(ProbeSetError) as info:
        loads_probeset(text, source="set.yaml")
    return info.value


def test_a_tracepoint_probe_loads_and_saves_back_equal():
    text = f"""\
name: tp
attach: fentry
probes:
  - spec: opens={OPENAT}:t:filename:ustring,flags
    filter: flags > 0
  - spec: syscalls/sys_enter_read:t
    label: reads
    count: comm
    sum: count
  - spec: syscalls/sys_exit_read:t:ret
    hist: ret
  - sched/sched_switch:t:prev_comm,args.prev_pid
"""
    ps = loads_probeset(text)
    assert [p.kind for p in ps.probes] == [Kind.TRACEPOINT] * 4
    assert ps.probes[1].agg.sum == Fetch(Named("count"))
    assert str(ps.probes[0].filter) == "flags > 0"
    again = loads_probeset(dumps_probeset(ps))
    assert again == ps and [p.label for p in again.probes] == [p.label for p in ps.probes]


@pytest.mark.parametrize("key, line_text, col, words", [
    ("attach", "    attach: kprobe", 5, "attach: kprobe is for kernel functions"),
    ("attach", "    attach: fentry", 5, "attach: fentry is for kernel functions"),
    ("maxactive", "    maxactive: 16", 5, "maxactive: only a return probe (:r) has one"),
    ("errno", "    errno: on", 5, "errno: only a return probe (:r) has errnos"),
    ("hist", "    hist: a1", 11, f"a1: {FIELDS_BY_NAME}"),
    ("count", "    count: [comm, rdi]", 19, f"rdi: {FIELDS_BY_NAME}"),
])
def test_probe_set_refusals_are_located(key, line_text, col, words):
    err = load_error(f"name: tp\nprobes:\n  - spec: {OPENAT}:t\n{line_text}\n")
    assert (err.line, err.col) == (4, col), str(err)
    assert words in err.message, str(err)
    assert str(err).startswith("set.yaml:4:")


def test_a_spec_error_in_a_probe_set_is_located_in_the_spec():
    err = load_error(f"name: tp\nprobes:\n  - spec: {OPENAT}:t:a1\n")
    assert (err.line, err.col) == (3, 11 + len(OPENAT) + 3), str(err)
    assert FIELDS_BY_NAME in err.message
