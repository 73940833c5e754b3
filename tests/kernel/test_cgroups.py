"""--cgroup on a real kernel: the same workload run inside a test cgroup
(in a child of it: descendants count) and outside it is counted only
inside, exactly, by a tracepoint and a kprobe with a filter; a path that
is no cgroup v2 directory is refused in one line."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from ktui.kernel.attach.cgroup_scope import cgroup2_root
from ktui.kernel.session import Session, SessionOptions
from ktui.lang.model import KtuiError
from ktui.lang.probeset import loads_probeset
from ktui.record.feed import ProbeState

from .conftest import ktui_bpf_programs, wait_for

SIZE, INSIDE, OUTSIDE = 4099, 7, 5
SET = f"""
name: scoped
probes:
  - spec: reads=syscalls/sys_enter_read:t
    filter: count == {SIZE}
  - spec: sizes=ksys_read:c:a3
    filter: a3 == {SIZE}
"""


@pytest.fixture
def test_cgroup(tmp_path):
    """A cgroup of the test's own and a child of it, under the machine's
    cgroup v2 mount (one mounted for the test where the guest has none);
    removed after, its processes gone."""
    root = cgroup2_root()
    mounted = None
    if root is None:
        mounted = tmp_path / "cgroup2"
        mounted.mkdir()
        subprocess.run(["mount", "-t", "cgroup2", "none", str(mounted)], check=True)
        root = str(mounted)
    top = Path(root) / f"ktui-test-{os.getpid()}"
    child = top / "inner"
    child.mkdir(parents=True)
    yield top, child
    for d in (child, top):
        for pid in (d / "cgroup.procs").read_text().split():
            (Path(root) / "cgroup.procs").write_text(pid)
        d.rmdir()
    if mounted is not None:
        subprocess.run(["umount", str(mounted)], check=True)


def test_only_the_cgroup_and_its_descendants_count(workload, warm_cache, test_cgroup):
    top, child = test_cgroup
    inside = workload([[["read", SIZE, INSIDE]]])
    (child / "cgroup.procs").write_text(str(inside.pid))
    outside = workload([[["read", SIZE, OUTSIDE]]])
    ps = dataclasses.replace(loads_probeset(SET), cgroup=str(top))
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()),
                 "both probes attached")
        outside.run_phase()
        inside.run_phase()
        names = {pid: st.probe.name for pid, st in s.statuses().items()}
        # (outside ran first: once the inside's hits are in, every hit is)
        wait_for(lambda: all(p.hits >= INSIDE for p in s.stats().probes.values()), f"{INSIDE} hits on each")
        stats = {names[pid]: p for pid, p in s.stats().probes.items()}
    assert {n: (p.hits, p.counted_only) for n, p in stats.items()} == {"reads": (INSIDE, 0), "sizes": (INSIDE, 0)}
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)


@pytest.mark.parametrize("path, words", [
    ("/nonexistent-ktui-cgroup", "no such cgroup"),
    ("/proc", "not in a cgroup v2 hierarchy"),
])
def test_a_path_that_is_no_cgroup_v2_directory_is_refused(path, words, warm_cache):
    ps = dataclasses.replace(loads_probeset(SET), cgroup=path)
    with pytest.raises(KtuiError) as err:
        with Session(ps, SessionOptions(cache_dir=warm_cache)):
            pass
    assert words in str(err.value) and "\n" not in str(err.value)
    assert ktui_bpf_programs() == []
