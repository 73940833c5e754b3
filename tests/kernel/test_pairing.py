"""Every return pairs with its own call, on a busy machine: threads whose
ids collide modulo any table size, recursion, and nested hits. What cannot
be paired is counted as unpaired, never dropped quietly (issue #28)."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset

from .conftest import HERE, engine_cache

COLLIDE = """
name: collide
probes:
  - spec: eventfd_read:c
    label: calls
  - spec: eventfd_read:r:retval
    label: returns
"""
SLEEP_NS = 200_000_000  # the sleeper is inside at least this long (collide.py's sleep)


def wait_for(check, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.parametrize("engine,attach", [("generic", "kprobe"), ("generic", "fentry"), ("compiled", "kprobe")])
def test_threads_whose_ids_collide_each_get_their_own_return(engine, attach, request):
    """A thread asleep inside eventfd_read while another, whose id is the
    first's plus 4096 (then plus 16384), goes in and out: four returns, each
    paired with its own entry, the sleepers' latencies as long as their
    sleep. A table of entries indexed by thread id modulo its size loses
    the sleepers' returns."""
    moduli = ["4096", "16384"]
    proc = subprocess.Popen([sys.executable, str(HERE / "collide.py"), *moduli], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        ps = dataclasses.replace(loads_probeset(COLLIDE), pid=proc.pid)
        with Session(ps, SessionOptions(engine=engine, cache_dir=engine_cache(engine, request), attach=attach)) as s:
            s.wait_loaded()
            ids = {st.probe.name: i for i, st in s.statuses().items()}
            assert all(st.reason == "" for st in s.statuses().values()), s.statuses()
            want_via = "fexit" if attach == "fentry" else "kretprobe"
            assert s.statuses()[ids["returns"]].via == want_via
            os.kill(proc.pid, signal.SIGUSR1)
            line = proc.stdout.readline().decode()  # the workload ends (EOF) if it cannot make its pairs
            assert line.startswith("pairs "), (line, proc.wait(timeout=60))
            pairs = [tuple(int(t) for t in p.split(":")) for p in line.split()[1:]]
            assert [b - a for a, b in pairs] == [int(m) for m in moduli]
            os.kill(proc.pid, signal.SIGUSR1)  # the sleepers wake
            assert proc.stdout.readline() == b"done\n"
            proc.wait(timeout=60)
            events = []
            wait_for(lambda: s.stats().probes[ids["returns"]].hits + s.stats().probes[ids["returns"]].unpaired >= 4,
                     "the four returns")
            for _ in range(3):
                events += s.drain().events()
            stats = s.stats().probes
        calls, returns = stats[ids["calls"]], stats[ids["returns"]]
        assert calls.hits == 4
        assert (returns.hits, returns.unpaired, returns.entries_unstored, returns.nest_dropped) == (4, 0, 0, 0)
        mine = sorted((e.tid, e.latency_ns) for e in events if e.probe_id == ids["returns"])
        tids = sorted(t for pair in pairs for t in pair)
        assert [t for t, _ in mine] == tids
        sleepers = {a for a, _ in pairs}
        for tid, latency in mine:
            if tid in sleepers:
                assert latency >= SLEEP_NS, (tid, latency)
        assert sum(returns.hist) == 4
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


RECURSE = """
name: recurse
probes:
  - spec: ep_loop_check_proc:c:depth=a2
    label: calls
  - spec: ep_loop_check_proc:r:retval,depth=a2
    label: returns
"""

# Four epoll instances, each added to the next: adding the k-th (which
# holds k - 1 nested ones) makes the kernel's loop check recurse k deep
# (ep_loop_check_proc calls itself for every epoll inside). 1 + 2 + 3 calls.
NEST_EPOLLS = """
import select, signal
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
eps = [select.epoll() for _ in range(4)]
print("ready", flush=True)
signal.sigwait({signal.SIGUSR1})
for inner, outer in zip(eps, eps[1:]):
    outer.register(inner.fileno(), select.EPOLLIN)
print("done", flush=True)
signal.sigwait({signal.SIGUSR1})
"""


@pytest.mark.parametrize("engine,attach", [("generic", "kprobe"), ("generic", "fentry")])
def test_a_recursive_function_is_counted_exactly(engine, attach, warm_cache):
    """Every nested call's return pairs with its own entry: six returns of
    ep_loop_check_proc, each with the depth its own call was entered with,
    an outer call taking at least as long as the ones inside it. Kept by
    thread alone, an inner entry overwrote its caller's and the callers'
    returns were lost."""
    proc = subprocess.Popen([sys.executable, "-c", NEST_EPOLLS], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        ps = dataclasses.replace(loads_probeset(RECURSE), pid=proc.pid)
        with Session(ps, SessionOptions(engine=engine, cache_dir=warm_cache, attach=attach)) as s:
            s.wait_loaded()
            ids = {st.probe.name: i for i, st in s.statuses().items()}
            assert all(st.reason == "" for st in s.statuses().values()), s.statuses()
            os.kill(proc.pid, signal.SIGUSR1)
            assert proc.stdout.readline() == b"done\n"
            wait_for(lambda: s.stats().probes[ids["returns"]].hits + s.stats().probes[ids["returns"]].unpaired >= 6,
                     "six returns")
            s.detach_all()
            events = []
            for _ in range(3):
                events += s.drain().events()
            stats = s.stats().probes
            os.kill(proc.pid, signal.SIGUSR1)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    calls, returns = stats[ids["calls"]], stats[ids["returns"]]
    assert calls.hits == 6
    assert (returns.hits, returns.unpaired, returns.entries_unstored) == (6, 0, 0)
    assert returns.errnos == ()  # it returns how deep the epolls nest below: never negative
    rets = [e for e in events if e.probe_id == ids["returns"]]
    # (retval, depth at entry) in the order they returned, the innermost
    # first: each call returns one more than the call inside it
    assert [e.values for e in rets] == [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (2, 0)]
    lat = [e.latency_ns for e in rets]
    assert lat[2] >= lat[1] and lat[5] >= lat[4] >= lat[3], lat
