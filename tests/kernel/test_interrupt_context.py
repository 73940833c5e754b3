"""Every event says the context its hit ran in (issue 28): a hit in an
interrupt shows the interrupted task's pid and comm, so without the mark a
softirq's work reads as the workload's.

By each way a probe runs (the generic engine by kprobe and by fentry, the
compiled engine): the workload's reads are `task`; the tick's
update_process_times (hardirq) is `hardirq`; the timer and RCU softirqs'
handlers are `softirq`. A kprobe inside vfs_read, with the kernel's
optimizer off, is hit by int3, whose handler enters the kernel as an NMI
would: its events must still say `task` (the program takes int3's own NMI
count off, kernel/symbols/interrupt_context.py). A real NMI cannot be made
under emulation (no PMU): that case is the unit tests'."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset
from tests.kernel.conftest import drain_all, engine_cache, kprobe_entries, wait_for

SIZE = 21
READS = 200
OPTIMIZE = Path("/proc/sys/debug/kprobes-optimization")
KPROBE_EVENTS = (Path("/sys/kernel/tracing/kprobe_events"), Path("/sys/kernel/debug/tracing/kprobe_events"))


@pytest.fixture
def int3_kprobes():
    """Kprobes inside a function stay int3 ones (the optimizer would turn
    them into jumps after a while)."""
    before = OPTIMIZE.read_text().strip()
    OPTIMIZE.write_text("0")
    yield
    OPTIMIZE.write_text(before)


def inside_vfs_read() -> int:
    """An offset into vfs_read that starts an instruction, just past its
    ftrace call (5 bytes; after a 4-byte endbr64 where the kernel has IBT):
    the first one the kernel takes for a kprobe."""
    events = next((p for p in KPROBE_EVENTS if p.exists()), None)
    assert events is not None, f"no kprobe_events in {KPROBE_EVENTS}"
    refused = []
    for offset in range(5, 17):
        # os.open: Python's "a" mode seeks to the end first, which tracefs refuses
        fd = os.open(events, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, f"p:ktui_test_inside vfs_read+{offset}\n".encode())
        except OSError as exc:  # EILSEQ: not an instruction boundary
            refused.append(f"+{offset}: {exc.strerror}")
            continue
        else:
            os.write(fd, b"-:ktui_test_inside\n")
            return offset
        finally:
            os.close(fd)
    pytest.fail(f"no offset into vfs_read that the kernel takes for a kprobe: {refused}")


def probeset(pid: int, attach: str) -> str:
    inside = f"""
  - spec: inside=vfs_read+{inside_vfs_read()}:c:cpu
    filter: pid == {pid}""" if attach == "kprobe" else ""
    return f"""
name: contexts
attach: {attach}
probes:
  - spec: reads=vfs_read:c:a3
    filter: pid == {pid}
  - spec: tick=update_process_times:c:cpu
  - spec: timers=run_timer_softirq:c:cpu
  - spec: rcu=rcu_core_si:c:cpu{inside}
"""


@pytest.mark.parametrize("engine,attach", [("generic", "kprobe"), ("generic", "fentry"), ("compiled", "kprobe")],
                         ids=["generic-kprobe", "generic-fentry", "compiled-kprobe"])
def test_each_event_says_the_context_its_hit_ran_in(engine, attach, workload, int3_kprobes, request):
    w = workload([[["read", SIZE, READS]]])
    ps = loads_probeset(probeset(w.pid, attach))
    options = SessionOptions(engine=engine, cache_dir=engine_cache(engine, request), attach=attach)
    with Session(ps, options) as s:
        s.wait_loaded()
        statuses = s.statuses()
        ids = {st.probe.name: i for i, st in statuses.items()}
        assert all(st.via == attach for st in statuses.values()), statuses
        events: list = []
        w.run_phase()

        def interrupts_seen() -> bool:
            events.extend(s.drain().events())
            seen = {name: sum(1 for e in events if e.probe_id == ids[name]) for name in ("tick", "timers", "rcu")}
            return seen["tick"] >= 5 and seen["timers"] + seen["rcu"] >= 2

        wait_for(interrupts_seen, "hits of the tick and of the softirqs", 180, every=0.5)
        registered = [line for line in kprobe_entries() if "vfs_read" in line]
        s.detach_all()
        events += drain_all(s)
        stats = s.stats().probes
    by_probe = {name: [e for e in events if e.probe_id == i] for name, i in ids.items()}
    contexts = {name: sorted({e.context for e in mine}) for name, mine in by_probe.items() if mine}
    reads = by_probe["reads"]
    assert len(reads) == READS and {(e.pid, e.values) for e in reads} == {(w.pid, (SIZE,))}
    expected = {"reads": ["task"], "tick": ["hardirq"], "timers": ["softirq"], "rcu": ["softirq"]}
    if attach == "kprobe":
        assert len(by_probe["inside"]) == READS, (len(by_probe["inside"]), stats[ids["inside"]], registered)
        expected["inside"] = ["task"]  # hit by int3, which counts as an NMI: taken off
    assert contexts == {name: ctx for name, ctx in expected.items() if name in contexts}, contexts
    # the CPU beside the context is the CPU: every tick fetch agrees with its header
    assert all(e.values == (e.cpu,) for name in ("tick", "timers", "rcu") for e in by_probe[name])
