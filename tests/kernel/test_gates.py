"""Gates on a real kernel: `within(FUNC)` counts a probe's hits only while
its thread is inside FUNC. vfs_read is called inside the read syscall
(__x64_sys_read) and outside it (pread64's): gated by the read syscall, it
counts the reads alone, exactly, whether the gate goes by fentry/fexit or
by kprobe/kretprobe."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset
from ktui.record.feed import ProbeState

from .conftest import drain_all, ktui_bpf_programs, wait_for

SIZE, READS, PREADS = 4111, 7, 4
GATED = f"""
name: gated
probes:
  - spec: inside=vfs_read:c within(__x64_sys_read)
  - spec: everywhere=vfs_read:c
    filter: a3 == {SIZE}
  - spec: rets=vfs_read:r:retval within(__x64_sys_read)
"""


@pytest.mark.parametrize("attach", ["auto", "kprobe"])
def test_a_gate_counts_only_the_calls_inside_its_function(workload, warm_cache, attach):
    w = workload([[["read", SIZE, READS], ["pread", SIZE, PREADS]]])
    ps = dataclasses.replace(loads_probeset(GATED), pid=w.pid)
    with Session(ps, SessionOptions(cache_dir=warm_cache, attach=attach)) as s:
        wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()),
                 "every probe attached (the gate first)")
        w.run_phase()
        names = {pid: st.probe.name for pid, st in s.statuses().items()}
        # the ungated probe sees the preads too: once it has them all, every hit is in
        wait_for(lambda: any(names.get(p) == "everywhere" and st.hits >= READS + PREADS
                             for p, st in s.stats().probes.items()), "every vfs_read counted")
        stats = {names[pid]: p for pid, p in s.stats().probes.items()}
        events = drain_all(s)
    assert set(stats) == {"inside", "everywhere", "rets"}  # the gate is no probe of the table
    assert {n: p.hits for n, p in stats.items()} == {"inside": READS, "everywhere": READS + PREADS, "rets": READS}
    assert Counter(e.values for e in events) == Counter({(SIZE,): READS})
    assert all((p.gate_unkept, p.gate_unpaired) == (0, 0) for p in stats.values())
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)
