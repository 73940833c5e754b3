"""Gates, `within: FUNC`, on the host: the language (compact clause, YAML
key, save and load, refusals at their column), the plans (a gate's slot
keeps depths and writes nothing; a gated probe names its gate and never
takes the bare paths, which do not look at it), and that neither is
compiled."""

from __future__ import annotations

import dataclasses

import pytest

from ktui.kernel.codegen.program import never_compiled
from ktui.kernel.generic import abi
from ktui.kernel.generic.engine import GenericEngine, Slot
from ktui.lang.alternatives import table_name
from ktui.lang.model import GateSpan, Kind, Probe, ProbeSetError, SpecError, Target
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_probe_text
from ktui.screens.probe_dialog import dialog_spec
from written_plans import written_plan as _plan


def test_the_compact_clause_anywhere_among_the_clauses():
    probe = parse_probe_text("vfs_read:r:retval count(comm) within(__x64_sys_read) if retval > 0")
    assert (probe.within, str(probe.agg), str(probe.filter)) == ("__x64_sys_read", "count(comm)", "retval > 0")
    assert parse_probe_text("vfs_read:c within(ksys_read)").within == "ksys_read"


@pytest.mark.parametrize("text, col, words", [
    ("vfs_read:c within(tcp_*)", 19, "not a kernel function's name"),
    ("vfs_read:c within()", 19, "1 to"),
    ("vfs_read:c within(a) within(b)", 21, "given twice"),
    ("vfs_read:c within(/bin/bash:main)", 19, "not a kernel function's name"),
])
def test_a_bad_gate_is_refused_at_its_column(text, col, words):
    with pytest.raises(SpecError) as err:
        parse_probe_text(text)
    assert (err.value.col, words in err.value.message) == (col, True), err.value


def test_a_clause_after_the_gate_is_refused_at_its_own_column():
    # the gate's clause is blanked, not cut, so what follows keeps its columns
    with pytest.raises(SpecError) as err:
        parse_probe_text("vfs_read:c within(ksys_read) sum(a1,a2)")
    assert (err.value.col, err.value.message) == (34, "sum(...) takes one fetch")


def test_the_yaml_key_saves_and_loads_back_and_is_located_when_bad():
    ps = loads_probeset("name: g\nprobes:\n  - spec: vfs_read:c\n    within: __x64_sys_read\n")
    assert ps.probes[0].within == "__x64_sys_read"
    assert loads_probeset(dumps_probeset(ps)) == ps
    with pytest.raises(ProbeSetError) as err:
        loads_probeset("name: g\nprobes:\n  - spec: vfs_read:c\n    within: 'a b'\n", source="g.yaml")
    assert str(err.value).startswith("g.yaml:4:")


def test_a_gates_plan_keeps_depths_and_a_gated_probes_names_its_gate(monkeypatch):
    gate = Slot(5, 1, Probe(Target(symbol="__x64_sys_read"), Kind.RETURN), -1, gate=True)
    plan = _plan(gate, monkeypatch)
    assert plan.flags & abi.F_GATE and not plan.flags & (abi.F_BARE | abi.F_EMITS) and plan.gate == 0
    gated = Slot(6, 1, parse_probe_text("vfs_read:c within(__x64_sys_read)"), 2, gated_by=5)
    plan = _plan(gated, monkeypatch)
    assert plan.gate == 6 and not plan.flags & (abi.F_BARE | abi.F_GATE)  # bare: the count-only path skips gates
    assert gated.waits_for_program and gate.waits_for_program


def test_a_gated_probe_is_never_compiled():
    assert never_compiled(parse_probe_text("vfs_read:c within(__x64_sys_read)"))
    assert not never_compiled(dataclasses.replace(parse_probe_text("vfs_read:c"), within=None))


# ---------------------------------------------------------------- a gate between two events

READ_GATE = "syscalls/sys_enter_read:t .. syscalls/sys_exit_read:t"


def test_a_gate_between_two_events_in_the_compact_clause():
    probe = parse_probe_text(f"vfs_read:r:retval count(comm) within({READ_GATE}) if retval > 0")
    gate = probe.within
    assert isinstance(gate, GateSpan)
    assert (gate.start.kind, gate.start.target.tracepoint, gate.end.target.tracepoint) == (
        Kind.TRACEPOINT, "syscalls/sys_enter_read", "syscalls/sys_exit_read")
    assert (str(gate), str(probe.agg), str(probe.filter)) == (READ_GATE, "count(comm)", "retval > 0")
    # any kinds, `..` with or without blanks; a path's own `/../` is no separator
    user = parse_probe_text("vfs_read:c within(/usr/../bin/prog:work:c .. /usr/bin/prog:work:r)").within
    assert (user.start.target.is_user, user.end.kind, user.start.target.path) == (True, Kind.RETURN, "/usr/../bin/prog")
    assert str(parse_probe_text("vfs_read:c within(ksys_read:c..ksys_read:r)").within) == "ksys_read:c .. ksys_read:r"


@pytest.mark.parametrize("text, col, words", [
    ("vfs_read:c within(a:c .. b:c .. c:c)", 30, "one `..`"),
    ("vfs_read:c within(a:c .. )", 23, "end is missing"),
    ("vfs_read:c within( .. b:c)", 20, "start is missing"),
    ("vfs_read:c within(a:c .. b:q)", 28, "within: kind must be"),  # at the end's own column
    ("vfs_read:c within(a:q .. b:c)", 21, "within: kind must be"),
    ("vfs_read:c within(a:c .. b:c:a1)", 12, "a probe alone"),
    ("vfs_read:c within(tcp_*:c .. b:c)", 12, "a pattern"),
    ("vfs_read:c within(a:c .. a:c)", 12, "one event"),
    ("vfs_read:c within(x=a:c .. b:r)", 12, "has a label"),
    ("vfs_read:c within(a:c .. b:r) within(f)", 30, "given twice"),
])
def test_a_bad_gate_between_two_events_is_refused_at_its_column(text, col, words):
    with pytest.raises(SpecError) as err:
        parse_probe_text(text)
    assert (err.value.col, words in err.value.message) == (col, True), err.value


def test_the_yaml_mapping_saves_and_loads_back_and_the_dialog_keeps_it():
    text = ("name: g\nprobes:\n  - spec: vfs_read:c\n    within: {from: 'syscalls/sys_enter_read:t', "
            "to: syscalls/sys_exit_read:t}\n  - spec: u=vfs_read:c within(/bin/prog:work:c .. /bin/prog:work:r)\n")
    ps = loads_probeset(text)
    assert [str(p.within) for p in ps.probes] == [READ_GATE, "/bin/prog:work:c .. /bin/prog:work:r"]
    saved = dumps_probeset(ps)
    assert "    from: syscalls/sys_enter_read:t\n    to: syscalls/sys_exit_read:t\n" in saved
    assert loads_probeset(saved) == ps
    # the edit dialog's text parses back to the same gate
    assert parse_probe_text(dialog_spec(ps.probes[0])) == ps.probes[0]
    assert table_name(ps.probes[0]) == f"vfs_read:c within {READ_GATE}"


@pytest.mark.parametrize("within, place, words", [
    ("{from: a:c}", "4:13", "missing 'to'"),
    ("{from: a:c, to: b:q}", "4:31", "within.to: kind must be"),
    ("{from: a:c, to: a:c}", "4:13", "one event"),
    ("{from: a:c, to: b:c, x: 1}", "4:34", "unknown key 'x'"),
    ("[a]", "4:13", "not a list"),
    ("{from: a:c, to: 'b:c:a1'}", "4:13", "a probe alone"),
    ("{from: 3, to: b:c}", "4:20", "within.from: expected a string"),
])
def test_a_bad_yaml_gate_is_one_located_line(within, place, words):
    with pytest.raises(ProbeSetError) as err:
        loads_probeset(f"name: g\nprobes:\n  - spec: vfs_read:c\n    within: {within}\n", source="g.yaml")
    assert str(err.value).startswith(f"g.yaml:{place}:") and words in str(err.value), err.value
    assert "\n" not in str(err.value)


def test_a_probe_gated_between_two_events_is_never_compiled_nor_a_span():
    assert never_compiled(parse_probe_text(f"vfs_read:c within({READ_GATE})"))
    with pytest.raises(SpecError, match="a span is not gated"):
        parse_probe_text(f"syscalls/sys_exit_read:t within({READ_GATE}) since(syscalls/sys_enter_read:t)")


def test_the_plans_of_a_gate_between_two_events_key_both_ends_by_its_start(monkeypatch):
    gate = parse_probe_text(f"vfs_read:c within({READ_GATE})").within
    start = Slot(7, 1, gate.start, -1, gate=True, gate_side="start", gate_key=7)
    end = Slot(9, 1, gate.end, -2, gate=True, gate_side="end", gate_key=7)
    plans = [_plan(start, monkeypatch), _plan(end, monkeypatch)]
    assert [(p.gate, bool(p.flags & abi.F_GATE_END)) for p in plans] == [(8, False), (8, True)]
    assert all(p.flags & abi.F_GATE and not p.flags & (abi.F_BARE | abi.F_EMITS) for p in plans)
    assert start.waits_for_program and end.waits_for_program
