"""Wildcards on a real kernel: one probe on every function (tracepoint) a
pattern matches, its hits by function counted in the kernel, exactly.

Kernel functions go in one kprobe_multi link where the kernel makes one
(6.12), else one perf kprobe per function (Debian's 6.1: CONFIG_FPROBE
off); a tracepoint pattern is one perf link per event. The workload makes
known syscalls (read, readv, pread64) in its own process, which the
probes are limited to."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections import Counter

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.model import KtuiError
from ktui.lang.probeset import loads_probeset
from ktui.record.feed import ProbeState

from .conftest import drain_all, kprobe_entries, ktui_bpf_programs, wait_for

READ, READV, PREAD = (7, 5), (9, 3), (11, 2)  # (bytes, calls) of each syscall
PHASE = [["read", *READ], ["readv", *READV], ["pread", *PREAD]]
CALLS = READ[1] + READV[1] + PREAD[1]
SIZES = {"read": READ, "readv": READV, "pread64": PREAD}

WILD = """
name: wildcards
probes:
  - spec: calls=__x64_sys_*read*:c
  - spec: keyed=__x64_sys_*read*:c count(func)
  - spec: rets=__x64_sys_*read*:r:func,retval
  - spec: exits=syscalls/sys_exit_*read*:t:func,ret
"""


def _by_name(session) -> dict:
    stats = session.stats().probes
    return {st.probe.name: stats.get(pid) for pid, st in session.statuses().items()}


def test_a_wildcards_hits_by_function_are_exact(workload, warm_cache):
    """Calls, returns (with their latencies and values) and tracepoint
    events of every function the pattern matches, each counted under its
    own name, and nothing under the names the workload never called; each
    event names its function (func), and count(func) counts by it."""
    w = workload([PHASE])
    ps = dataclasses.replace(loads_probeset(WILD), pid=w.pid)
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()),
                 "every wildcard attached")
        multi = s.features.has("kprobe_multi")
        via = {st.probe.name: st.via for st in s.statuses().values()}
        calls = "kprobe_multi" if multi else "kprobe"
        assert via == {"calls": calls, "keyed": calls, "rets": "kretprobe_multi" if multi else "kretprobe",
                       "exits": "tracepoint"}
        w.run_phase()
        wait_for(lambda: all(p is not None and p.hits == CALLS for p in _by_name(s).values()),
                 f"{CALLS} hits on each probe")
        stats = _by_name(s)
        members = {st.probe.name: st.probe.members for st in s.statuses().values()}
        events = drain_all(s)
        names = {pid: st.probe.name for pid, st in s.statuses().items()}
    want = {"read": READ[1], "readv": READV[1], "pread64": PREAD[1]}
    for name, prefix in (("calls", "__x64_sys_"), ("keyed", "__x64_sys_"), ("rets", "__x64_sys_"),
                         ("exits", "syscalls/sys_exit_")):
        got = {m[0]: m[1] for m in stats[name].members}
        assert got == {prefix + k: v for k, v in want.items()}, name
        assert stats[name].member_count == len(members[name]) > len(want)
        assert set(got) <= set(members[name])
    # a return's latency is counted under its function too, and adds up
    assert all(lat > 0 for _, _, lat in stats["rets"].members)
    assert sum(lat for _, _, lat in stats["rets"].members) == stats["rets"].latency_sum_ns
    # each event says which function its hit came from (func), and count(func) counts by it in the kernel
    values = Counter((names[e.probe_id], e.values) for e in events)
    assert values == Counter({("rets", (f"__x64_sys_{k}", size)): n for k, (size, n) in SIZES.items()}
                             | {("exits", (f"syscalls/sys_exit_{k}", size)): n for k, (size, n) in SIZES.items()})
    assert {key: (n, total) for key, n, total in stats["keyed"].top_values} == {
        (f"__x64_sys_{k}",): (n, 0) for k, (_size, n) in SIZES.items()}
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)
    assert not [e for e in kprobe_entries() if "_sys_" in e and "read" in e]


@pytest.mark.parametrize("spec, words", [
    # pread64's fd is an unsigned int, preadv's an unsigned long
    ("fds=syscalls/sys_enter_*read*:t:fd", "sys_enter_preadv does not lay out its fields as"),
    ("everything=__*:c", "narrow the pattern"),
])
def test_a_pattern_whose_events_differ_or_that_matches_too_much_is_refused(spec, words, warm_cache):
    """A pattern's fields must read alike in every event it matches; `__*` matches more functions than this kernel
    attaches at once. Either is said in one line, and nothing attaches."""
    ps = loads_probeset(f"name: refused\nprobes:\n  - spec: {spec}\n")
    with pytest.raises(KtuiError) as err:
        Session(ps, SessionOptions(cache_dir=warm_cache))
    assert words in str(err.value) and "\n" not in str(err.value)
    assert ktui_bpf_programs() == []


def test_check_says_where_a_pattern_matches_nothing_and_passes_one_that_matches(tmp_path):
    """`ktui check` asks this kernel: a function pattern against
    available_filter_functions, a tracepoint pattern against tracefs, each
    failure at its file:line:col, the good pattern not mentioned."""
    path = tmp_path / "wild.yaml"
    path.write_text("name: wild\nprobes:\n  - spec: __x64_sys_*read*:c\n  - spec: __x64_sys_nothing_like_this_*:c\n"
                    "  - spec: syscalls/sys_nothing_like_this_*:t\n")
    out = subprocess.run([sys.executable, "-m", "ktui", "check", str(path)], capture_output=True, text=True)
    assert out.returncode != 0, out.stdout
    lines = out.stdout.splitlines()
    assert any(line.startswith(f"{path}:4:") and "__x64_sys_nothing_like_this_* matches no kernel functions"
               in line for line in lines), lines
    assert any(line.startswith(f"{path}:5:") and "no tracepoint matches" in line for line in lines), lines
    assert not any(f"{path}:3:" in line for line in lines), lines
    path.write_text("name: wild\nprobes:\n  - spec: __x64_sys_*read*:c\n  - spec: syscalls/sys_exit_*read*:t:ret\n")
    out = subprocess.run([sys.executable, "-m", "ktui", "check", str(path)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok (2 probes)"), out.stdout + out.stderr
