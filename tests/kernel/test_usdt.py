"""USDT probes on a real kernel: a program's probe points built with
sys/sdt.h at -O0 (arguments on the stack) and -O2 (in registers), their
arguments exact (an int, a long, a string in the process's memory, a
constant), and a semaphore the kernel raises while ktui is attached (the
program's `if (SEMAPHORE)` branch runs only then)."""

from __future__ import annotations

import dataclasses
import subprocess
from collections import Counter

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset

from .conftest import HERE, BuiltTarget, drain_all, wait_for

CALLS = 4
BIG = 1000000000000


@pytest.fixture(params=["O0", "O2"])
def target(request, tmp_path):
    binary = tmp_path / f"usdt_target-{request.param}"
    subprocess.run(["gcc", f"-{request.param}", "-o", str(binary), str(HERE / "usdt_target.c")], check=True)
    t = BuiltTarget(binary, str(CALLS))  # CALLS firings a round; round() says how often gated fired
    yield t
    t.close()


def test_usdt_arguments_and_a_semaphore_raised_while_attached(target, warm_cache):
    assert target.round() == 0  # no tracer: the gated point's semaphore is 0
    ps = loads_probeset(f"""
name: usdt
probes:
  - spec: ticks={target.binary}:ktui:tick:usdt:a1,a2,a3:string,a4
  - spec: gated={target.binary}:ktui:gated:usdt:a1 hist(a1)
    filter: a1 >= 2
""")
    ps = dataclasses.replace(ps, pid=target.pid)
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state.value == "attached" for st in s.statuses().values()),
                 "both USDT probes attached")
        assert {st.probe.name: st.via for st in s.statuses().values()} == {"ticks": "usdt", "gated": "usdt"}
        assert target.round() == CALLS  # the kernel raised the semaphore: the gated point fired
        events = drain_all(s)
        names = {pid: st.probe.name for pid, st in s.statuses().items()}
        stats = {names[pid]: st for pid, st in s.stats().probes.items()}
    # gated fired with 0, 2, 4, 6: the filter (a1 >= 2, a1 from the note) kept three
    assert Counter((names[e.probe_id], e.values) for e in events) == Counter(
        {**{("ticks", (i, BIG + i, "ktui-usdt", 7)): 1 for i in range(CALLS)},
         **{("gated", (2 * i,)): 1 for i in range(1, CALLS)}})
    assert stats["gated"].hits == CALLS - 1 and sum(stats["gated"].value_hist) == CALLS - 1
    # detached: the semaphore is down again, the gated point silent
    assert target.round() == CALLS
