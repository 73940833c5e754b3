"""Overload controls against a real kernel: per-probe sampling and rate
limiting in the BPF program, and a set bigger than the process may hold
(each probe is a perf fd: past RLIMIT_NOFILE the extra probes fail alone)."""

from __future__ import annotations

import math
import os
import resource
import time

from ktui.kernel.session import Session
from ktui.record.feed import ProbeState

from .conftest import drain_all, kprobe_entries
from .test_pipeline import by_label, probe_set


def pin_to_one_cpu(pid: int) -> None:
    # sampling and rate limits count per CPU: one CPU makes the counts exact
    os.sched_setaffinity(pid, {0})


def test_sample_emits_one_event_in_n_and_counts_every_hit(workload):
    n = 1000
    w = workload([[["read", 3, n]]])
    pin_to_one_cpu(w.pid)
    text = """
name: sampled
probes:
  - spec: vfs_read:c:a3
    label: every10
    sample: 10
  - spec: vfs_read:c:a3
    label: all
"""
    with Session(probe_set(text, w.pid)) as s:
        ids = by_label(s)
        w.run_phase()
        events = drain_all(s)
        stats = s.stats().probes
    per_probe = {pid_: [e for e in events if e.probe_id == pid_] for pid_ in ids.values()}
    assert stats[ids["every10"]].hits == n
    assert len(per_probe[ids["every10"]]) == n // 10  # the 1st, 11th, 21st... read
    assert stats[ids["every10"]].lost == 0  # sampled out is not lost
    assert len(per_probe[ids["all"]]) == n
    assert all(e.values[0] == 3 for e in per_probe[ids["every10"]])


def test_rate_limit_caps_events_per_second_and_counts_every_hit(workload):
    n, limit = 3000, 40
    w = workload([[["read", 5, n]]])
    pin_to_one_cpu(w.pid)
    text = f"""
name: limited
probes:
  - spec: vfs_read:c:a3
    label: capped
    rate_limit: {limit}
"""
    with Session(probe_set(text, w.pid)) as s:
        started = time.monotonic()
        w.run_phase()
        took = time.monotonic() - started
        events = drain_all(s)
        st = s.stats().probes[by_label(s)["capped"]]
    assert st.hits == n
    # one-second windows: the phase can touch ceil(took) + 1 of them, each
    # admitting at most `limit` events; and the first window admits `limit`.
    assert limit <= len(events) <= limit * (math.ceil(took) + 1) < n
    assert st.lost == 0


def test_probes_past_the_fd_limit_fail_alone_and_the_rest_count(workload):
    """Each probe holds a perf fd (a return probe two). With the process's
    fd limit lowered so only a few fit, the others are marked failed with
    the reason, and the attached ones keep counting."""
    n_probes, reads = 12, 30
    w = workload([[["read", 2, reads]]])
    text = "name: many\nattach: kprobe\nprobes:\n" + "".join(
        f"  - spec: vfs_read:c\n    label: p{i}\n    enabled: false\n" for i in range(n_probes))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with Session(probe_set(text, w.pid)) as s:
        before = len(kprobe_entries())
        in_use = len(os.listdir("/proc/self/fd"))
        try:
            # room for a few probes: each needs its program's fd and a perf fd
            resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 8, hard))
            statuses = [s.set_enabled_now(i, True) for i in sorted(s.statuses())]
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        attached = [st for st in statuses if st.state is ProbeState.ATTACHED]
        failed = [st for st in statuses if st.state is ProbeState.FAILED]
        assert attached and failed, [(st.probe.name, st.state, st.reason) for st in statuses]
        assert len(attached) + len(failed) == n_probes
        assert all("too many open files" in st.reason for st in failed), failed[0].reason
        assert all("ulimit -n" in st.reason for st in failed)
        assert len(kprobe_entries()) == before + len(attached)
        w.run_phase()
        stats = s.stats().probes
        assert all(stats[st.probe_id].hits == reads for st in attached)
        assert all(stats[st.probe_id].hits == 0 for st in failed)
    assert len(kprobe_entries()) == before
