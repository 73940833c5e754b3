"""Hits that nest on one CPU never mix up each other's numbers (issue #28).

fentry/fexit programs are not kept from nesting the way kprobe programs
are: a timer interrupt (and the softirqs run as it exits) can run another
probe's program in the middle of a hit. Each hit must work in a scratch
area of its own, or the clash is counted (nest_dropped); an event never
carries values another hit wrote."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset

SIZE = 13  # the workload's read size: every one of its events says so
# The reader reads for at least MIN_SECONDS (about 1,250 ticks on its CPU,
# each a chance to land inside a hit), and on until its reads and the
# tick's hits on its CPU are enough to judge (a loaded host runs the VM
# slower): 20 s every time was 15 s more than a quiet run needs.
MIN_SECONDS = 5.0
MAX_SECONDS = 120.0
ENOUGH_READS = 1000

# A process reading in a loop on CPU 0, its program made long (several
# fetches, a string) so the timer's hits land inside it often; hits of the
# tick (hardirq) and of the timer and RCU softirqs on the same CPU, each
# with fetches of its own into the same payload places.
READER = """
import os, signal, sys
os.sched_setaffinity(0, {0})
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
fd = os.open("/dev/zero", os.O_RDONLY)
print("ready", flush=True)
signal.sigwait({signal.SIGUSR1})
while True:
    os.read(fd, %d)
""" % SIZE


def probes(pid: int) -> str:
    return f"""
name: nesting
attach: fentry
probes:
  - spec: reads=vfs_read:c:a3,a1,pos=+0(a4):s64,name=file->f_path.dentry->d_name.name:string,cpu
    filter: pid == {pid}
  - spec: tick=update_process_times:c:a1,cpu
  - spec: timers=run_timer_softirq:c:a1,cpu
  - spec: rcu=rcu_core:c:a1,cpu
"""


def enough(events, ids: dict) -> bool:
    """More than ENOUGH_READS of the reader's reads, and a tick on its CPU."""
    reads = sum(1 for e in events if e.probe_id == ids["reads"])
    return reads > ENOUGH_READS and any(e.probe_id == ids["tick"] and e.values[-1] == 0 for e in events)


def test_hits_nested_in_a_hit_on_one_cpu_keep_their_own_values(warm_cache):
    reader = subprocess.Popen([sys.executable, "-c", READER], stdout=subprocess.PIPE)
    try:
        assert reader.stdout.readline() == b"ready\n"
        ps = loads_probeset(probes(reader.pid))
        with Session(ps, SessionOptions(engine="generic", cache_dir=warm_cache, attach="fentry")) as s:
            s.wait_loaded()
            statuses = s.statuses()
            ids = {st.probe.name: i for i, st in statuses.items()}
            assert {st.probe.name: st.via for st in statuses.values() if st.reason == ""}.get("reads") == "fentry", \
                statuses
            attached = {st.probe.name for st in statuses.values() if st.via == "fentry"}
            assert "tick" in attached and ({"timers", "rcu"} & attached), statuses
            os.kill(reader.pid, signal.SIGUSR1)
            events = []
            started = time.monotonic()
            while time.monotonic() < started + MAX_SECONDS:
                events += s.drain().events()
                if time.monotonic() >= started + MIN_SECONDS and enough(events, ids):
                    break
                time.sleep(0.05)
            reader.kill()
            reader.wait()
            s.detach_all()
            for _ in range(3):
                events += s.drain().events()
            stats = s.stats().probes
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    reads = [e for e in events if e.probe_id == ids["reads"]]
    assert len(reads) > 1000, len(reads)
    files = {e.values[1] for e in reads}
    wrong = [e for e in reads
             if e.values[0] != SIZE or e.pid != reader.pid or e.values[3] != "zero" or len(files) != 1]
    assert wrong == [], (len(wrong), wrong[:5])
    # the interrupt's probes ran on the reader's CPU while it read
    nested_kinds = [name for name in ("tick", "timers", "rcu") if name in ids]
    cpu0 = {name: sum(1 for e in events if e.probe_id == ids[name] and e.values[-1] == 0) for name in nested_kinds}
    assert cpu0["tick"] > 0, cpu0
    for name, probe_id in ids.items():
        st = stats[probe_id]
        # every hit is written, lost, or counted as dropped for want of a scratch area
        assert st.hits == st.emitted + st.lost + st.counted_only, (name, st)
