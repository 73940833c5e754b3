"""The kernel pipeline against a real kernel: values, counters, filters,
toggling, failures, floods, cleanup. Runs in the VM (scripts/vm.sh)."""

from __future__ import annotations

import dataclasses
import errno
import os
from collections import Counter
from pathlib import Path

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.model import ProbeSet
from ktui.lang.probeset import load_probeset, loads_probeset
from ktui.record.feed import ProbeState

from .conftest import drain_all, kprobe_entries, ktui_bpf_programs

N1, N7, N4096, NBAD = 111, 222, 33, 17
OPEN_PATH = "/tmp/ktui-test-open-target"
SHAPE = [["read", 1, N1], ["read", 7, N7], ["read", 4096, N4096], ["badread", NBAD],
         ["open", OPEN_PATH]]

PROBES = """
name: pipeline
probes:
  - spec: vfs_read:c:a3
    label: size
  - spec: vfs_read:r:retval,n=a3
    label: ret
  - spec: do_sys_openat2:c:fname=+0(a2):ustring
    label: open
  - spec: vfs_read:c:a3
    label: only7
    filter: a3 == 7
  - spec: vfs_read:c
    label: count
  - spec: vfs_raed:c:a1
    label: typo
"""


def probe_set(text: str, pid: int):
    """By kprobe unless the text says: these tests count kprobes in
    debugfs' list (fentry/fexit: test_fentry)."""
    ps = loads_probeset(text)
    return dataclasses.replace(ps, pid=pid, attach=ps.attach or "kprobe")


def by_label(session):
    return {st.probe.name: st.probe_id for st in session.statuses().values()}


@pytest.fixture(params=["ringbuf", "perf"])
def buffer(request):
    return request.param


def test_values_counters_filter_and_failures(workload, buffer, capfd):
    w = workload([SHAPE])
    with Session(probe_set(PROBES, w.pid), SessionOptions(buffer=buffer, perf_pages=64)) as s:
        ids = by_label(s)
        st = s.statuses()
        # A typo fails alone, with a suggestion; every other probe attached.
        assert st[ids["typo"]].state is ProbeState.FAILED
        assert "vfs_read" in st[ids["typo"]].reason
        assert all(x.state is ProbeState.ATTACHED for k, x in st.items() if k != ids["typo"])
        w.run_phase()
        events = drain_all(s)
        stats = s.stats().probes

    per = Counter(e.probe_id for e in events)
    size_events = [e for e in events if e.probe_id == ids["size"]]
    # a3 equals the requested sizes, exactly as many as requested
    assert Counter(e.values[0] for e in size_events) == {1: N1, 7: N7, 4096: N4096, 13: NBAD}
    # retval equals the bytes read; bad reads return -EBADF with their a3 from entry
    rets = Counter((e.values[0], e.values[1]) for e in events if e.probe_id == ids["ret"])
    assert rets == {(1, 1): N1, (7, 7): N7, (4096, 4096): N4096, (-errno.EBADF, 13): NBAD}
    assert all(e.latency_ns and e.latency_ns > 0 for e in events if e.probe_id == ids["ret"])
    # the string fetch reads the file name from user memory
    assert OPEN_PATH in [e.values[0] for e in events if e.probe_id == ids["open"]]
    # in-kernel counters are exact
    total = N1 + N7 + N4096 + NBAD
    assert stats[ids["size"]].hits == total
    assert stats[ids["count"]].hits == total
    assert stats[ids["ret"]].hits == total
    assert sum(stats[ids["ret"]].hist) == total
    assert dict(stats[ids["ret"]].errnos) == {errno.EBADF: NBAD}
    assert stats[ids["ret"]].top_comms[0][1] == total
    # the filter drops in the kernel: exact count, and nothing else arrives
    assert stats[ids["only7"]].hits == N7
    assert per[ids["only7"]] == N7
    assert all(e.values[0] == 7 for e in events if e.probe_id == ids["only7"])
    # a probe without fetches only counts
    assert per[ids["count"]] == 0
    # everything generated was delivered or counted lost
    for name in ("size", "ret", "only7"):
        assert stats[ids[name]].lost == 0
        assert stats[ids[name]].emitted == per[ids[name]]
    # libbcc, clang and ktui printed nothing
    assert capfd.readouterr().err == ""


def test_toggle_detaches_and_resumes(workload):
    phase = [["read", 7, 50]]
    w = workload([phase, phase, phase])
    text = "name: t\nprobes:\n  - spec: vfs_read:c:a3\n  - spec: vfs_read:r:retval\n"
    with Session(probe_set(text, w.pid)) as s:
        before = len(kprobe_entries())
        w.run_phase()
        assert s.stats().probes[0].hits == 50
        s.set_enabled_now(0, False)
        s.set_enabled_now(1, False)
        assert s.statuses()[0].state is ProbeState.OFF
        # really detached: the kernel dropped the kprobes (1 + entry + return)
        assert len(kprobe_entries()) == before - 3
        s.drain()
        w.run_phase()
        assert s.stats().probes[0].hits == 50
        assert s.stats().probes[1].hits == 50
        assert len(s.drain()) == 0
        s.set_enabled_now(0, True)
        s.set_enabled_now(1, True)
        assert len(kprobe_entries()) == before
        w.run_phase()
        assert s.stats().probes[0].hits == 100
        assert s.stats().probes[1].hits == 100
        assert Counter(e.probe_id for e in drain_all(s)) == {0: 50, 1: 50}


def test_flood_is_counted_as_lost_per_probe(workload, buffer, capfd):
    n = 20000
    w = workload([[["read", 1, n]]])
    text = "name: f\nprobes:\n  - spec: vfs_read:c:a3\n  - spec: vfs_read:c\n"
    # the smallest buffers, never drained during the flood
    opts = SessionOptions(buffer=buffer, ringbuf_pages=1, perf_pages=1)
    with Session(probe_set(text, w.pid), opts) as s:
        w.run_phase()
        delivered = len(s.drain())
        st = s.stats().probes[0]
    assert st.hits == n
    assert st.lost > 0
    assert delivered == st.emitted
    assert delivered + st.lost == n
    assert capfd.readouterr().err == ""


def test_added_probe_compiles_alone_and_removed_probe_detaches(workload):
    phase = [["read", 7, 20]]
    w = workload([phase, phase])
    with Session(probe_set("name: a\nprobes:\n  - spec: vfs_read:c\n", w.pid)) as s:
        before = len(kprobe_entries())
        from ktui.lang.spec import parse_spec
        status = s.add_probe_now(parse_spec("vfs_read:c:a3"))
        assert status.state is ProbeState.ATTACHED
        w.run_phase()
        events = drain_all(s)
        # the added probe's set filter (pid) applies too: exactly the workload's reads
        assert [e.values[0] for e in events] == [7] * 20
        s.remove_probe_now(status.probe_id)
        assert len(kprobe_entries()) == before
        w.run_phase()
        assert s.stats().probes[0].hits == 40


def test_close_leaves_nothing_behind(workload):
    before_kp, before_progs = len(kprobe_entries()), ktui_bpf_programs()
    assert before_progs == []
    w = workload([[["read", 1, 10]]])
    s = Session(probe_set(PROBES, w.pid))
    s.open()
    assert len(kprobe_entries()) > before_kp
    assert ktui_bpf_programs()
    s.close()
    s.close()  # twice is fine
    assert len(kprobe_entries()) == before_kp
    assert ktui_bpf_programs() == []


SHIPPED = sorted(Path("probesets").glob("*.yaml"))


@pytest.fixture(scope="module")
def shipped_statuses(request) -> dict[str, list]:
    """The shipped sets' probes, opened in one session (one program load,
    one attach and detach of them all under emulation, not one per set):
    each set's probe statuses, by file name. A probe the kernel refuses
    fails alone, as in a session of its own set. Only the sets whose tests
    run (a set left out on this kernel would fail each of its probes
    slowly, with suggestions, for no test). memory.yaml runs on 6.12 too:
    its allocations are read at tracepoints, which kept their names when
    the allocator's functions became *_noprof (6.10)."""
    chosen = {item.callspec.params["path"] for item in request.session.items
              if item.originalname == "test_shipped_probe_sets_compile_and_attach"}
    sets = {path.name: load_probeset(path) for path in SHIPPED if path in chosen}
    for name, ps in sets.items():  # what would not survive the merge
        assert (ps.pid, ps.comm, ps.maxactive, ps.attach) == (None, None, 0, ""), f"{name}: set-wide options"
    # labels are unique in a set, not across sets: each takes its set's name.
    # The default set attaches as `make run` starts it (auto: by fentry
    # where it can), unless the kernel matrix asks for kprobes
    # (scripts/test-kernel.sh); the others by kprobe. Each fentry copy is
    # verified on its own (seconds each under emulation: 47 s for all the
    # sets against 16 s), and auto falls back to a kprobe where the kernel
    # refuses one: which functions exist is what this test proves.
    merged = ProbeSet(name="shipped", probes=tuple(
        dataclasses.replace(p, label=f"{ps.name}/{p.name}", attach="" if name == "default.yaml" else "kprobe")
        for name, ps in sets.items() for p in ps.probes),
        attach=os.environ.get("KTUI_TEST_SHIPPED_ATTACH", ""))
    with Session(merged) as s:
        statuses = [s.statuses()[i] for i in sorted(s.statuses())]  # ids in the order of the probes
    by_set, start = {}, 0
    for name, ps in sets.items():
        by_set[name] = statuses[start:start + len(ps.probes)]
        start += len(ps.probes)
    return by_set


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_probe_sets_compile_and_attach(path, shipped_statuses):
    mine = shipped_statuses[path.name]
    ps = load_probeset(path)
    assert [st.probe.name for st in mine] == [f"{ps.name}/{p.name}" for p in ps.probes]
    failed = {st.probe.name: st.reason for st in mine if st.state is not ProbeState.ATTACHED}
    assert failed == {}
