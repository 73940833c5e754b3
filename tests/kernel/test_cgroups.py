"""cgroups on a real kernel. --cgroup: the same workload run inside a test
cgroup (in a child of it: descendants count) and outside it is counted only
inside, exactly, by a tracepoint and a kprobe with a filter; a path that is
no cgroup v2 directory is refused in one line. `cgroup` as a fetch, a count
key and a filter operand: each workload's reads under its own cgroup's
path, and `cgroup == "P"` that cgroup alone (not its child). Every event
carries its task's cgroup (the record header), by either engine; a span's
end carries its start's, though another process in another cgroup ran it."""

from __future__ import annotations

import dataclasses
from collections import Counter
import os
import subprocess
from pathlib import Path

import pytest

from ktui.kernel.attach.cgroup_scope import cgroup2_root
from ktui.kernel.session import Session, SessionOptions
from ktui.lang.model import KtuiError
from ktui.lang.probeset import loads_probeset
from ktui.record.feed import ProbeState

from .conftest import drain_all, engine_cache, ktui_bpf_programs, wait_for

SIZE, INSIDE, OUTSIDE = 4099, 7, 5
SET = f"""
name: scoped
probes:
  - spec: reads=syscalls/sys_enter_read:t
    filter: count == {SIZE}
  - spec: sizes=ksys_read:c:a3
    filter: a3 == {SIZE}
"""


@pytest.fixture
def test_cgroup(tmp_path):
    """A cgroup of the test's own and a child of it, under the machine's
    cgroup v2 mount (one mounted for the test where the guest has none);
    removed after, its processes gone."""
    root = cgroup2_root()
    mounted = None
    if root is None:
        mounted = tmp_path / "cgroup2"
        mounted.mkdir()
        subprocess.run(["mount", "-t", "cgroup2", "none", str(mounted)], check=True)
        root = str(mounted)
    top = Path(root) / f"ktui-test-{os.getpid()}"
    child = top / "inner"
    child.mkdir(parents=True)
    yield top, child
    for d in (child, top):
        for pid in (d / "cgroup.procs").read_text().split():
            (Path(root) / "cgroup.procs").write_text(pid)
        d.rmdir()
    if mounted is not None:
        subprocess.run(["umount", str(mounted)], check=True)


def test_only_the_cgroup_and_its_descendants_count(workload, warm_cache, test_cgroup):
    top, child = test_cgroup
    inside = workload([[["read", SIZE, INSIDE]]])
    (child / "cgroup.procs").write_text(str(inside.pid))
    outside = workload([[["read", SIZE, OUTSIDE]]])
    ps = dataclasses.replace(loads_probeset(SET), cgroup=str(top))
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()),
                 "both probes attached")
        outside.run_phase()
        inside.run_phase()
        names = {pid: st.probe.name for pid, st in s.statuses().items()}
        # (outside ran first: once the inside's hits are in, every hit is)
        wait_for(lambda: all(p.hits >= INSIDE for p in s.stats().probes.values()), f"{INSIDE} hits on each")
        stats = {names[pid]: p for pid, p in s.stats().probes.items()}
    assert {n: (p.hits, p.counted_only) for n, p in stats.items()} == {"reads": (INSIDE, 0), "sizes": (INSIDE, 0)}
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)


@pytest.mark.parametrize("path, words", [
    ("/nonexistent-ktui-cgroup", "no such cgroup"),
    ("/proc", "not in a cgroup v2 hierarchy"),
])
def test_a_path_that_is_no_cgroup_v2_directory_is_refused(path, words, warm_cache):
    ps = dataclasses.replace(loads_probeset(SET), cgroup=path)
    with pytest.raises(KtuiError) as err:
        with Session(ps, SessionOptions(cache_dir=warm_cache)):
            pass
    assert words in str(err.value) and "\n" not in str(err.value)
    assert ktui_bpf_programs() == []


def _own_cgroup(pid: int) -> str:
    """A process's cgroup v2 path as ktui shows it: relative to the mount, `/` for the root."""
    line = next(ln for ln in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if ln.startswith("0::"))
    path = line[3:].strip("/")
    return path or "/"


def test_cgroup_is_fetched_counted_and_compared_by_its_path(workload, warm_cache, test_cgroup):
    top, child = test_cgroup
    root = Path(cgroup2_root() or top.parent)
    in_top = workload([[["read", SIZE, 3]]])
    (top / "cgroup.procs").write_text(str(in_top.pid))
    in_child = workload([[["read", SIZE, 5]]])
    (child / "cgroup.procs").write_text(str(in_child.pid))
    outside = workload([[["read", SIZE, 2]]])
    top_rel, child_rel = str(top.relative_to(root)), str(child.relative_to(root))
    want = {top_rel: 3, child_rel: 5, _own_cgroup(outside.pid): 2}  # (read while they live)
    ps = loads_probeset(f"""
name: by cgroup
probes:
  - spec: where=ksys_read:c:cgroup,a3 count(cgroup)
    filter: a3 == {SIZE}
  - spec: top_only=ksys_read:c
    filter: a3 == {SIZE} && cgroup == "{top_rel}"
  - spec: not_top=ksys_read:c
    filter: a3 == {SIZE} && cgroup != "{top_rel}"
""")
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()),
                 "every probe attached")
        for w in (outside, in_child, in_top):
            w.run_phase()
        names = {pid: st.probe.name for pid, st in s.statuses().items()}
        wait_for(lambda: sum(p.hits for p in s.stats().probes.values()) >= 2 * 10, "every read counted")
        events = drain_all(s)
        stats = {names[pid]: p for pid, p in s.stats().probes.items()}
        events += drain_all(s)
    assert Counter(e.values[0] for e in events) == Counter(want)
    assert all(e.values[1] == SIZE for e in events)
    keys = {key[0]: n for key, n, _ in stats["where"].top_values}
    assert {k: keys.get(k) for k in want} == want
    # (no other process reads exactly SIZE bytes: the workloads' reads are all there is)
    assert {n: p.hits for n, p in stats.items()} == {"where": 10, "top_only": 3, "not_top": 7}


def test_top_cgroups_name_the_test_cgroup_with_exactly_its_hits(workload, warm_cache, test_cgroup):
    """Every probe's hits by cgroup, counted in the kernel in the same key
    as the comm: the same workload run inside the test cgroup and outside
    it; the stats' top cgroups give the test cgroup exactly the inside
    workload's reads, for a probe that only counts (counter.py's own
    program) and for one of the generic program (it fetches), and give
    the outside workload's cgroup at least its own."""
    top, _child = test_cgroup
    root = Path(cgroup2_root() or top.parent)
    inside = workload([[["comm", "ktui-cg-in"], ["read", SIZE, INSIDE]]])
    (top / "cgroup.procs").write_text(str(inside.pid))
    outside = workload([[["read", SIZE, OUTSIDE]]])
    top_rel, outside_rel = str(top.relative_to(root)), _own_cgroup(outside.pid)
    ps = loads_probeset("""
name: top cgroups
probes:
  - spec: counted=vfs_read:c
  - spec: fetched=vfs_read:c:a3
""")
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        s.wait_loaded()
        wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()),
                 "both probes attached")
        names = {pid: st.probe.name for pid, st in s.statuses().items()}
        kinds = {names[slot.probe_id]: slot.counter for slot in s._engine.slots.values()}
        assert kinds == {"counted": True, "fetched": False}  # counter.py's program, the generic one
        outside.run_phase()
        inside.run_phase()
        # the inside workload waits by sigwait, which reads nothing: its
        # reads are the phase's, counted under its comm and cgroup at once
        # (waited for by comm: a wrong cgroup must fail below, not time out)
        wait_for(lambda: all(dict(p.top_comms).get("ktui-cg-in", 0) >= INSIDE
                             for p in s.stats().probes.values()),
                 f"{INSIDE} hits of the inside workload on each probe")
        stats = {names[pid]: p for pid, p in s.stats().probes.items()}
    cgroups = {name: dict(p.top_cgroups) for name, p in stats.items()}
    assert {name: (p.top_comms_exact, p.top_cgroups_kept) for name, p in stats.items()} == {
        "counted": (True, True), "fetched": (True, True)}  # every hit counted, none sampled
    assert {name: c.get(top_rel) for name, c in cgroups.items()} == {"counted": INSIDE, "fetched": INSIDE}, cgroups
    assert all(c.get(outside_rel, 0) >= OUTSIDE for c in cgroups.values()), (outside_rel, cgroups)
    assert all(sum(cgroups[name].values()) <= p.hits for name, p in stats.items())
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)


@pytest.mark.parametrize("engine", ["generic", "compiled"])
def test_every_event_carries_its_tasks_cgroup(workload, test_cgroup, engine, request):
    """A probe that fetches no cgroup: each event's header holds its task's
    cgroup id, named by path, by the generic program and by a compiled one."""
    top, _child = test_cgroup
    root = Path(cgroup2_root() or top.parent)
    inside = workload([[["read", SIZE, INSIDE]]])
    (top / "cgroup.procs").write_text(str(inside.pid))
    outside = workload([[["read", SIZE, OUTSIDE]]])
    want = {inside.pid: str(top.relative_to(root)), outside.pid: _own_cgroup(outside.pid)}
    ps = loads_probeset(f"""
name: header cgroup
probes:
  - spec: sizes=ksys_read:c:a3
    filter: a3 == {SIZE}
""")
    with Session(ps, SessionOptions(engine=engine, cache_dir=engine_cache(engine, request))) as s:
        wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()), "the probe attached")
        outside.run_phase()
        inside.run_phase()
        events = drain_all(s)  # written during the hits: the phases are done
    assert Counter((e.pid, e.cgroup) for e in events) == {
        (inside.pid, want[inside.pid]): INSIDE, (outside.pid, want[outside.pid]): OUTSIDE}, want
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)


SPAN_SIZE = 3011  # a write's size no other process uses


def test_a_spans_end_carries_its_starts_cgroup(workload, warm_cache, test_cgroup):
    """A span joined by a value: started by a write of the workload in the
    test cgroup, ended by a read of the same size by another workload
    outside it. The end's event is the start's task's: its pid, comm and
    cgroup (carried in ktui_who), not the reader's."""
    top, _child = test_cgroup
    root = Path(cgroup2_root() or top.parent)
    writer = workload([[["comm", "ktui-cg-start"], ["write", SPAN_SIZE, 1]]])
    (top / "cgroup.procs").write_text(str(writer.pid))
    reader = workload([[["read", SPAN_SIZE, 1]]])
    assert _own_cgroup(reader.pid) != str(top.relative_to(root))
    ps = loads_probeset(f"""
name: span cgroup
attach: kprobe
probes:
  - spec: sized=vfs_read:c:a3 since(vfs_write:c:a3)
    filter: a3 == {SPAN_SIZE}
""")
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()), "the span attached")
        writer.run_phase()
        reader.run_phase()
        events = drain_all(s)
    assert [(e.values, e.pid, e.comm, e.cgroup) for e in events] == [
        ((SPAN_SIZE,), writer.pid, "ktui-cg-start", str(top.relative_to(root)))]
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)
