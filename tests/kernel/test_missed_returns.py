"""Missed returns are counted: more threads asleep in a function at once
than its kretprobe has instances (maxactive), then woken. The kernel drops
the returns past maxactive; ktui must report exactly how many, on both
engines, and leave no tracefs event behind (not even after a SIGKILL, once
the next ktui starts). These are kretprobes' (`attach: kprobe`: ktui's
default, auto, would take fexit); fexit, which has no instances to run out
of, sees every return of the same workload."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ktui.kernel.maps import bpfsys
from ktui.kernel.attach.kretprobe_events import default_maxactive, find_root
from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset

from .conftest import HELPER, HERE, drain_all, engine_cache, wait_for

THREADS = 12

SET = """
name: missed
probes:
  - spec: eventfd_read:c
    label: entries
  - spec: eventfd_read:r:retval
    label: returns
"""


def ktui_events() -> list[str]:
    text = (find_root() / "kprobe_events").read_text()
    return [line for line in text.splitlines() if "ktui" in line]


@pytest.mark.parametrize("engine,maxactive,attach", [("generic", 4, "kprobe"), ("compiled", 4, "kprobe"),
                                                     ("generic", None, "kprobe"), ("generic", 4, "fentry")])
def test_returns_past_maxactive_are_counted(engine, maxactive, attach, request):
    proc = subprocess.Popen([*HELPER, str(HERE / "blockers.py"), str(THREADS)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        ps = dataclasses.replace(loads_probeset(SET), pid=proc.pid, maxactive=maxactive or 0)
        # the run's shared cache (conftest): its programs compile once per run
        with Session(ps, SessionOptions(engine=engine, cache_dir=engine_cache(engine, request), attach=attach)) as s:
            s.wait_loaded()
            ids = {st.probe.name: i for i, st in s.statuses().items()}
            assert all(st.reason == "" for st in s.statuses().values()), s.statuses()
            os.kill(proc.pid, signal.SIGUSR1)  # the threads go to sleep in eventfd_read
            wait_for(lambda: s.stats().probes[ids["entries"]].hits == THREADS, "every thread inside")
            os.kill(proc.pid, signal.SIGUSR1)  # woken: every read returns 8
            assert proc.stdout.readline() == b"done\n"
            proc.wait(timeout=60)
            s.detach_all()
            events = drain_all(s)
            stats = s.stats().probes
        entries, returns = stats[ids["entries"]], stats[ids["returns"]]
        assert entries.hits == THREADS
        if attach == "fentry":  # fexit: every return seen, none to miss
            assert s.statuses()[ids["returns"]].via == "fexit"
            assert (returns.hits, returns.missed_returns, returns.maxactive) == (THREADS, 0, 0)
            mine = [e for e in events if e.probe_id == ids["returns"]]
            assert len(mine) == THREADS and all(e.values == (8,) for e in mine)
            return
        expected_max = maxactive or default_maxactive(bpfsys.possible_cpus())
        assert returns.maxactive == expected_max
        assert returns.missed_returns > 0
        assert returns.hits + returns.missed_returns == entries.hits
        # all asleep at once: exactly maxactive of them had an instance
        assert returns.missed_returns == THREADS - expected_max
        mine = [e for e in events if e.probe_id == ids["returns"]]
        assert len(mine) == returns.hits and all(e.values == (8,) for e in mine)
        assert ktui_events() == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


KEEP_OPEN = """
import sys, time
from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset
ps = loads_probeset("name: k\\nprobes:\\n  - spec: eventfd_read:r\\n    maxactive: 3\\n")
s = Session(ps, SessionOptions(engine="generic", cache_dir=sys.argv[1], attach="kprobe"))
s.open()
print("open", flush=True)
time.sleep(600)
"""


def test_sigkill_leaves_a_disarmed_event_the_next_start_removes(warm_cache):
    child = subprocess.Popen([sys.executable, "-c", KEEP_OPEN, str(warm_cache)], stdout=subprocess.PIPE,
                             cwd=str(Path(__file__).resolve().parents[2]))
    try:
        assert child.stdout.readline() == b"open\n"
        assert [line for line in ktui_events() if f"ktui_{child.pid}_" in line], ktui_events()
    finally:
        child.kill()
        child.wait()
    left = ktui_events()
    assert any(f"ktui_{child.pid}_" in line for line in left), left  # disarmed, still listed
    ps = loads_probeset("name: next\nprobes:\n  - eventfd_read:c\n")
    with Session(ps, SessionOptions(engine="generic", cache_dir=warm_cache)):
        assert ktui_events() == []
    assert ktui_events() == []
