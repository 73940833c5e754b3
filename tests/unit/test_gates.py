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
from ktui.lang.model import Kind, Probe, ProbeSetError, SpecError, Target
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_probe_text
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
        parse_probe_text("vfs_read:c within(ksys_read) hist(a1,a2)")
    assert (err.value.col, err.value.message) == (35, "hist(...) takes one fetch")


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
