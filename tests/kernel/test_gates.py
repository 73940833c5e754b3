"""Gates on a real kernel: `within(FUNC)` counts a probe's hits only while
its thread is inside FUNC. vfs_read is called inside the read syscall
(__x64_sys_read) and outside it (pread64's): gated by the read syscall, it
counts the reads alone, exactly, whether the gate goes by fentry/fexit or
by kprobe/kretprobe. A gate between two events, `within(START .. END)`,
counts only between them: tracepoints, a kprobe to a tracepoint, nested
(its depth), and a user function's return to a libc call."""

from __future__ import annotations

import dataclasses
import subprocess
from collections import Counter

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset
from ktui.record.feed import ProbeState

from .conftest import HERE, BuiltTarget, drain_all, ktui_bpf_programs, wait_for

SIZE, READS, PREADS = 4111, 7, 4
CALLS = 5  # uprobe_target's calls a round
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
GATED = f"""
name: gated
probes:
  - spec: inside=vfs_read:c within(__x64_sys_read)
  - spec: everywhere=vfs_read:c
    filter: a3 == {SIZE}
  - spec: rets=vfs_read:r:retval within(__x64_sys_read)
"""


def _counted(s: Session, run, reference: str, hits: int) -> dict:
    """Once every probe of `s` is attached (a gate's slots first), `run()`
    the workload and wait until probe `reference`, which counts every call
    the workload makes, has `hits`: then every hit is in. Each probe's
    stats by name."""
    wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()),
             "every probe attached (the gates first)")
    run()
    names = {pid: st.probe.name for pid, st in s.statuses().items()}
    wait_for(lambda: any(names.get(p) == reference and st.hits >= hits for p, st in s.stats().probes.items()),
             f"every call counted by {reference}")
    return {names[pid]: p for pid, p in s.stats().probes.items()}


@pytest.mark.parametrize("attach", ["auto", "kprobe"])
def test_a_gate_counts_only_the_calls_inside_its_function(workload, warm_cache, attach):
    w = workload([[["read", SIZE, READS], ["pread", SIZE, PREADS]]])
    ps = dataclasses.replace(loads_probeset(GATED), pid=w.pid)
    with Session(ps, SessionOptions(cache_dir=warm_cache, attach=attach)) as s:
        # the ungated probe sees the preads too: once it has them all, every hit is in
        stats = _counted(s, w.run_phase, "everywhere", READS + PREADS)
        events = drain_all(s)
    assert set(stats) == {"inside", "everywhere", "rets"}  # the gate is no probe of the table
    assert {n: p.hits for n, p in stats.items()} == {"inside": READS, "everywhere": READS + PREADS, "rets": READS}
    assert Counter(e.values for e in events) == Counter({(SIZE,): READS})
    assert all((p.gate_unkept, p.gate_unpaired) == (0, 0) for p in stats.values())
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)


# A gate between two events, `within(START .. END)`: a slot on each, of any
# kind. From the read syscall's entry tracepoint to its exit's, vfs_read
# counts the reads and none of the preads; from a kprobe on its entry to
# the exit's tracepoint, the same. From the read's entry to pread64's exit
# the depth counts: 3 reads put the thread 3 deep, so the first 3 preads'
# vfs_reads are inside and the 4th's is not, and the 4th pread's exit finds
# no depth left (unpaired). A gate that only opened and closed would count
# 3 + 1; an END that did not close would count every pread.
BETWEEN = """
name: between
probes:
  - spec: inside=vfs_read:c within({gate})
  - spec: everywhere=vfs_read:c
    filter: a3 == {size}
  - spec: rets=vfs_read:r:retval
    within: {{from: "{start}", to: "{end}"}}
"""
NESTED_READS = 3


@pytest.mark.parametrize("start, end, reads, preads, inside, unpaired", [
    ("syscalls/sys_enter_read:t", "syscalls/sys_exit_read:t", READS, PREADS, READS, 0),
    ("__x64_sys_read:c", "syscalls/sys_exit_read:t", READS, PREADS, READS, 0),
    ("syscalls/sys_enter_read:t", "syscalls/sys_exit_pread64:t", NESTED_READS, NESTED_READS + 1,
     2 * NESTED_READS, 1),
], ids=["tracepoints", "kprobe-to-tracepoint", "nested"])
def test_a_gate_between_two_events_counts_only_between_them(workload, warm_cache, start, end, reads, preads,
                                                            inside, unpaired):
    w = workload([[["read", SIZE, reads], ["pread", SIZE, preads]]])
    text = BETWEEN.format(gate=f"{start} .. {end}", size=SIZE, start=start, end=end)
    ps = dataclasses.replace(loads_probeset(text), pid=w.pid)
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        stats = _counted(s, w.run_phase, "everywhere", reads + preads)
        events = drain_all(s)
    assert set(stats) == {"inside", "everywhere", "rets"}  # the gate's ends are no probes of the table
    assert {n: p.hits for n, p in stats.items()} == {"inside": inside, "everywhere": reads + preads,
                                                     "rets": inside}
    assert Counter(e.values for e in events) == Counter({(SIZE,): inside})
    assert {n: (p.gate_unkept, p.gate_unpaired) for n, p in stats.items() if n != "everywhere"} == {
        "inside": (0, unpaired), "rets": (0, unpaired)}
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)


def test_a_gate_between_a_user_functions_return_and_a_libc_call(warm_cache, tmp_path):
    """Each round of uprobe_target calls ktui_add, then ktui_greet, then
    malloc, CALLS times: gated from ktui_add's return (a uretprobe START,
    whose entry half must do nothing) to malloc's call, ktui_greet is inside
    every time and ktui_add never (an entry half that opened would leave the
    thread one deeper each time round, and count ktui_add from the second)."""
    binary = tmp_path / "uprobe_target"
    subprocess.run(["gcc", "-O0", "-pie", "-fPIE", "-o", str(binary), str(HERE / "uprobe_target.c")], check=True)
    target = BuiltTarget(binary, str(CALLS))
    try:
        gate = f"{binary}:ktui_add:r .. {LIBC}:malloc:c"
        ps = loads_probeset(f"""
name: user-gate
probes:
  - spec: greets={binary}:ktui_greet:c within({gate})
  - spec: adds={binary}:ktui_add:c within({gate})
  - spec: allocs={LIBC}:malloc:c
    filter: a1 == 12345
""")
        ps = dataclasses.replace(ps, pid=target.pid)
        with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
            stats = _counted(s, target.round, "allocs", CALLS)
    finally:
        target.close()
    assert {n: p.hits for n, p in stats.items()} == {"greets": CALLS, "adds": 0, "allocs": CALLS}
    assert stats["greets"].gate_unkept == 0
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)
