"""Parameters and struct fields by name, on a real kernel: the values the
positional form reads, `file->f_pos` at known file offsets, and a string
through two pointers (`file->f_path.dentry->d_name.name`), with both
engines (the generic program and a compiled one)."""

from __future__ import annotations

import dataclasses

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.model import Named
from ktui.lang.probeset import loads_probeset

from .conftest import drain_all

FILE = "/tmp/ktui-names-file"
READ, TIMES = 100, 5
SHAPE = [["fileread", FILE, READ, TIMES], ["read", 7, 3]]

# `pos=+0(a4):s64` is the positional reading of what file->f_pos is at
# entry (vfs_read's fourth parameter points at it for a read(2)).
PROBES = """
name: names
probes:
  - spec: vfs_read:c:count,a3,file->f_pos,pos=+0(a4):s64,name=file->f_path.dentry->d_name.name:string
    label: call
  - spec: vfs_read:r:retval,count,a3
    label: ret
    filter: count > 50
"""


def run(engine: str, workload, cache_dir):
    with open(FILE, "wb") as f:
        f.write(b"x" * 4096)
    w = workload([SHAPE])
    ps = dataclasses.replace(loads_probeset(PROBES), pid=w.pid)
    with Session(ps, SessionOptions(engine=engine, cache_dir=cache_dir)) as s:
        s.wait_loaded()
        w.run_phase()
        events = drain_all(s)
        statuses = {st.probe_id: st.probe for st in s.statuses().values()}
    return [(statuses[e.probe_id], e.values) for e in events]


@pytest.mark.parametrize("engine", ["generic", "compiled"])
def test_names_read_what_positions_read(engine, workload, warm_cache):
    got = run(engine, workload, warm_cache)
    calls = [v for p, v in got if p.label == "call"]
    rets = [v for p, v in got if p.label == "ret"]
    # the probe the session ran was bound to this kernel's BTF
    probe = next(p for p, _ in got if p.label == "call")
    count, _a3, f_pos, _pos, name = probe.fetches
    assert isinstance(count.expr, Named) and count.ctype == "size_t" and count.effective_type == "u64"
    assert f_pos.ctype == "loff_t" and f_pos.effective_type == "s64"
    assert name.effective_type == "string"

    # every event: the name gives exactly the positional value
    assert calls and all(v[0] == v[1] for v in calls), calls
    assert all(v[2] == v[3] for v in calls), calls
    # the regular file, read in order: f_pos at each read is its offset,
    # and the file's name comes through file->f_path.dentry->d_name.name
    ours = [v for v in calls if v[4] == FILE.rsplit("/", 1)[1]]
    assert [v[2] for v in ours] == [i * READ for i in range(TIMES)]
    assert [v[0] for v in ours] == [READ] * TIMES
    zero = [v for v in calls if v[4] == "zero"]
    assert [v[0] for v in zero] == [7, 7, 7]
    # the return probe: count at return is the entry's, and a filter by name
    assert sorted(rets) == [(READ, READ, READ)] * TIMES
