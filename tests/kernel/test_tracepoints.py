"""Tracepoints on a real kernel: fields by name from the event's format
file, exact values (a user string at sys_enter, a __data_loc string, an
int stored in 8 bytes), filters on fields no event carries, in-kernel
aggregations, and nothing left attached after ktui ends."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from collections import Counter

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset

from .conftest import LineReader, drain_all, ktui_bpf_programs, wait_for

KTUI = [sys.executable, "-m", "ktui"]
OPEN_PATH = "/tmp/ktui-tracepoint-open-target"
SIZE, READS, OPENS = 4097, 7, 5
AT_FDCWD = -100
TRUE = "/usr/bin/true"

SYSCALLS = f"""
name: tracepoints
probes:
  - spec: opens=syscalls/sys_enter_openat:t:filename:ustring,flags,dfd
    filter: filename == "{OPEN_PATH}"
  - spec: reads=syscalls/sys_enter_read:t
    filter: count == {SIZE}
  - spec: bytes=syscalls/sys_enter_read:t count(comm) sum(count)
    filter: count == {SIZE}
  - spec: done=syscalls/sys_exit_read:t:ret hist(ret)
    filter: ret == {SIZE}
"""


def test_syscall_fields_filters_and_aggregations_are_exact(workload, warm_cache):
    """sys_enter_openat's user string and its ints (stored as 8 bytes, read
    as the int they are: dfd is AT_FDCWD), a filter on sys_enter_read's
    `count`, which no event carries, counting exactly, and count/sum/hist
    by the kernel."""
    w = workload([[["open", OPEN_PATH]] * OPENS + [["read", SIZE, READS], ["read", 1, 3]]])
    comm = open(f"/proc/{w.pid}/comm").read().strip()
    ps = dataclasses.replace(loads_probeset(SYSCALLS), pid=w.pid)
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state.value == "attached" for st in s.statuses().values()),
                 "every tracepoint probe attached")
        assert {st.probe.name: st.via for st in s.statuses().values()} == dict.fromkeys(
            ("opens", "reads", "bytes", "done"), "tracepoint")
        w.run_phase()
        events = drain_all(s)
        stats = {st.probe.name: s.stats().probes[pid] for pid, st in s.statuses().items()}
        names = {pid: st.probe.name for pid, st in s.statuses().items()}
    got = Counter((names[e.probe_id], e.values, e.pid) for e in events)
    flags = os.O_CREAT | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
    assert got == Counter({("opens", (OPEN_PATH, flags, AT_FDCWD), w.pid): OPENS,
                           ("done", (SIZE,), w.pid): READS})
    assert (stats["reads"].hits, stats["reads"].emitted) == (READS, 0)
    assert stats["bytes"].top_values == (((comm,), READS, READS * SIZE),)
    assert sum(stats["done"].value_hist) == READS and stats["done"].value_hist_sum == READS * SIZE


def test_an_exec_tracepoints_data_loc_filename_and_its_pid_field(warm_cache):
    """sched_process_exec's filename is a __data_loc string inside the
    record; its `pid` field is reached as args.pid (pid is a built-in)."""
    ps = loads_probeset(f"""
name: execs
probes:
  - spec: execs=sched/sched_process_exec:t:filename,args.pid
    filter: filename == "{TRUE}"
""")
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state.value == "attached" for st in s.statuses().values()), "the probe attached")
        pids = []
        for _ in range(3):
            child = subprocess.Popen([TRUE])
            pids.append(child.pid)
            child.wait()
        events = drain_all(s)
    assert sorted((e.values, e.pid) for e in events) == sorted(((TRUE, pid), pid) for pid in pids)


def test_a_stream_of_a_tracepoint_ends_with_nothing_attached(workload, warm_cache):
    """As a user runs it: `ktui stream -e` on a syscall's tracepoint, the
    workload's opens written with their file names, and after Ctrl-C no
    program of ktui's is left in the kernel."""
    assert ktui_bpf_programs() == []
    w = workload([[["open", OPEN_PATH]] * OPENS])
    spec = f'syscalls/sys_enter_openat:t:filename:ustring if filename == "{OPEN_PATH}"'
    p = subprocess.Popen([*KTUI, "stream", "-e", spec, "--pid", str(w.pid), "--interval", "0.3"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = LineReader(p.stdout)

    def lines():
        return [json.loads(x) for x in list(out.lines)]

    wait_for(lambda: any(x["type"] == "stats" and x["probes"][0]["state"] == "attached" for x in lines())
             or p.poll() is not None, "the tracepoint attached")
    w.run_phase()
    wait_for(lambda: sum(x["type"] == "event" for x in lines()) >= OPENS or p.poll() is not None,
             f"{OPENS} events")
    p.send_signal(signal.SIGINT)
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0, err
    assert "Traceback" not in err
    written = [json.loads(x) for x in out.rest(timeout=60).splitlines()]
    events = [x for x in written if x["type"] == "event"]
    assert [(e["values"]["filename"], e["pid"]) for e in events] == [(OPEN_PATH, w.pid)] * OPENS
    summary = written[-1]
    assert (summary["probes"][0]["via"], summary["probes"][0]["hits"]) == ("tracepoint", OPENS)
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)
