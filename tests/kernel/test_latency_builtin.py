"""`latency` in the probe language on a real kernel (lang.latency): a
return probe's (since its call) and a span's (since its start), in a
filter and as sum(latency) by comm.

The workload makes FAST reads of /dev/zero under one comm, then SLOW reads
of a pipe under another, each blocked for about PAUSE s (a thread of the
workload writes the bytes after sleeping that long; the read begins a
little after the thread's sleep does, so a read may take less than PAUSE,
by that little). So a filter `latency > THRESHOLD` (a third of PAUSE: a
read of /dev/zero takes microseconds, well under that even emulated)
passes exactly the SLOW reads, and count(comm) sum(latency) holds, for
each comm, exactly the sum of the latency_ns of the same probe's events
(both are the same kernel value of the same hit). The threshold is
written in ns and as a duration (`100ms`).

Each on the kprobe and the fentry/fexit variant of the program (a return
probe) and on the tracepoint variant (a span from sys_enter_read to
sys_exit_read, joined by the thread): the latency is known before the
filter in the return half and after the span's start is taken alike.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset
from ktui.record.feed import ProbeState

from .conftest import drain_all, wait_for

FAST, SLOW, SIZE = 20, 3, 7
PAUSE = 0.3  # s each slow read waits, at least
THRESHOLD = 100_000_000  # ns
THRESHOLD_TEXT = "100ms"  # the same, as a duration
FAST_COMM, SLOW_COMM = "lat_fast", "lat_slow"
SPAN = "syscalls/sys_exit_read:t:ret since(syscalls/sys_enter_read:t)"

PROBES = f"""
name: latency
probes:
  - spec: slow_k=ksys_read:r:retval
    filter: latency > {THRESHOLD}
    attach: kprobe
  - spec: slow_f=ksys_read:r:retval
    filter: latency > {THRESHOLD_TEXT}
    attach: fentry
  - spec: per_k=ksys_read:r:retval count(comm) sum(latency)
    attach: kprobe
  - spec: per_f=ksys_read:r:retval count(comm) sum(latency)
    attach: fentry
  - spec: slow_span={SPAN} count(comm) sum(latency)
    filter: latency > {THRESHOLD_TEXT}
  - spec: per_span={SPAN} count(comm) sum(latency)
"""
SLOW_PROBES = ("slow_k", "slow_f", "slow_span")
PER_PROBES = ("per_k", "per_f", "per_span")


def _by_name(session):
    names = {pid: st.probe.name for pid, st in session.statuses().items()}
    return {names[pid]: p for pid, p in session.stats().probes.items() if pid in names}


def test_latency_filters_and_sums_by_comm(workload, warm_cache):
    w = workload([[["comm", FAST_COMM], ["read", SIZE, FAST], ["comm", SLOW_COMM],
                   ["slowread", SIZE, SLOW, PAUSE]]])
    ps = dataclasses.replace(loads_probeset(PROBES), pid=w.pid)
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()),
                 "every probe attached")
        vias = {st.probe.name: st.via for st in s.statuses().values()}
        w.run_phase()
        wait_for(lambda: all(_by_name(s).get(n) is not None and _by_name(s)[n].hits >= FAST + SLOW
                             for n in PER_PROBES), "every read counted by the probes that sum")
        wait_for(lambda: all(_by_name(s)[n].hits >= SLOW for n in SLOW_PROBES), "the slow reads passed")
        stats = _by_name(s)
        events = drain_all(s)
        ids = {st.probe.name: pid for pid, st in s.statuses().items()}
    assert (vias["slow_k"], vias["slow_f"]) == ("kretprobe", "fexit"), vias
    for name in SLOW_PROBES:
        st = stats[name]
        # exactly the slow reads pass (a hit is counted once its filter passed)
        assert st.hits == SLOW, (name, st.hits)
        # ... and only they are in its latency histogram (what passed the filter)
        assert sum(st.hist) == SLOW, (name, st.hist)
        mine = [e for e in events if e.probe_id == ids[name]]
        assert len(mine) == SLOW, name
        # what the filter passed, as each event says it
        assert all(e.latency_ns > THRESHOLD and e.comm == SLOW_COMM for e in mine), \
            (name, [(e.latency_ns, e.comm) for e in mine])
    assert stats["slow_span"].top_values[0][0] == (SLOW_COMM,)
    assert stats["slow_span"].top_values[0][1] == SLOW
    for name in PER_PROBES:
        st = stats[name]
        mine = [e for e in events if e.probe_id == ids[name]]
        assert len(mine) == FAST + SLOW, name
        per_comm: dict = defaultdict(lambda: [0, 0])
        for e in mine:
            per_comm[e.comm][0] += 1
            per_comm[e.comm][1] += e.latency_ns
        # the sum is each comm's events' latencies, exactly: the same kernel values
        assert {key[0]: (count, total) for key, count, total in st.top_values} == \
            {comm: tuple(v) for comm, v in per_comm.items()}, name
        assert {comm: v[0] for comm, v in per_comm.items()} == {FAST_COMM: FAST, SLOW_COMM: SLOW}, name
        # ranked by the sum: the slow comm first
        assert st.top_values[0][0] == (SLOW_COMM,), name
        assert per_comm[SLOW_COMM][1] > SLOW * THRESHOLD and per_comm[FAST_COMM][1] < FAST * THRESHOLD
        # the histogram's sum is every hit's latency, the key sums' total
        assert st.latency_sum_ns == sum(total for _, _, total in st.top_values), name


def test_latency_is_refused_where_a_hit_has_none():
    from ktui.lang.model import SpecError
    from ktui.lang.spec import parse_probe_text

    with pytest.raises(SpecError, match="latency exists only"):
        parse_probe_text("ksys_read:c if latency > 5")
