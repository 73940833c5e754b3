"""User-space probes on a real kernel: a program's own functions (PIE and
-no-pie: a missing address-to-file-offset conversion shows on the second)
and libc's malloc, their arguments, return values, a string and a field
read from the process's memory, exact counts scoped to one process."""

from __future__ import annotations

import dataclasses
import subprocess
from collections import Counter

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset

from .conftest import HERE, BuiltTarget, drain_all, wait_for

CALLS = 5
LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


@pytest.fixture(params=["pie", "no-pie"])
def target(request, tmp_path):
    binary = tmp_path / f"uprobe_target-{request.param}"
    flags = ["-no-pie"] if request.param == "no-pie" else ["-pie", "-fPIE"]
    subprocess.run(["gcc", "-O0", *flags, "-o", str(binary), str(HERE / "uprobe_target.c")], check=True)
    t = BuiltTarget(binary, str(CALLS))  # CALLS calls a round
    yield t
    t.close()


def test_a_programs_functions_and_libcs_malloc_are_probed_exactly(target, warm_cache):
    b = target.binary
    ps = loads_probeset(f"""
name: uprobes
probes:
  - spec: adds={b}:ktui_add:c:a1,a2
  - spec: sums={b}:ktui_add:r:retval hist(retval)
  - spec: greets={b}:ktui_greet:c:a1:string,y=+4(a2):u32
  - spec: allocs={LIBC}:malloc:c
    filter: a1 == 12345
""")
    ps = dataclasses.replace(ps, pid=target.pid)  # a pid-scoped uprobe: this process alone
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state.value == "attached" for st in s.statuses().values()),
                 "every uprobe attached")
        vias = {st.probe.name: st.via for st in s.statuses().values()}
        assert vias == {"adds": "uprobe", "sums": "uretprobe", "greets": "uprobe", "allocs": "uprobe"}
        target.round()
        events = drain_all(s)
        names = {pid: st.probe.name for pid, st in s.statuses().items()}
        stats = {names[pid]: st for pid, st in s.stats().probes.items()}
    got = Counter((names[e.probe_id], e.values) for e in events if e.pid == target.pid)
    assert got == Counter({**{("adds", (i, 100)): 1 for i in range(CALLS)},
                           **{("sums", (100 + i,)): 1 for i in range(CALLS)},
                           ("greets", ("ktui-uprobe", 40)): CALLS})
    assert all(e.latency_ns and e.latency_ns > 0 for e in events if names[e.probe_id] == "sums")
    assert stats["sums"].unpaired == 0 and sum(stats["sums"].value_hist) == CALLS
    assert stats["allocs"].hits == CALLS
