"""ktui's own processes stay out of every count, from the first moment
(issue 28: on a first start `read_ret`'s top comms ranked python3 first,
with a count that never grew: the compile child's reads, counted while the
probes were loading).

A first start compiles twice while its probes are attached: the generic
program (the dispatcher counts meanwhile) and then, in the background, its
fentry/fexit variant (the generic program counts). Both compiles run in
ktui's compile helper. The session runs in a Python whose name is
`ktuiown` (a symlink: a process's comm is the name it was started by), and
the helper is started by the same name: any hit of ktui's family shows as
`ktuiown`, or as what the helper would start (ldconfig, bcc's shell and
tar), in the top comms or the events. The test's own bpf(2) calls, made
once both compiles are done, are the only ones a probe on the bpf syscall
may count: every early count (no comm) would be the helper's. Nothing
execs meanwhile but the helper (it execs itself afresh after each
compile): a probe on execve counts nothing, not even the helper's first
exec, which comes before its pid could be known if it were started once the
probes count.

The same first start, the kernel suite's only compile of the generic
program (each takes minutes under emulation), also proves the cache's side
of it. Its cache holds a corrupt copy of the generic program: a miss, logged,
and compiled afresh. `auto` counts by kprobe while the fentry/fexit variant
compiles, and says why. Both programs compiled in the guest are the very
entries the host compiled for this kernel (conftest.PREBUILT), and the next
start loads both from the cache and goes by fentry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from ktui import __version__
from ktui.kernel.generic.cache import SUFFIX, ProgramCache, cache_key
from ktui.kernel.generic.loader import program_text
from ktui.kernel.machine.features import kernel_features
from ktui.kernel.maps import bpfsys
from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset

from .conftest import HERE, drain_all

OWN = "ktuiown"
WHAT_THE_HELPER_WOULD_START = {OWN, "ldconfig", "ldconfig.real", "sh", "tar", "xz", "modprobe"}
OWN_CALLS = 3

PROBES = """
name: own
probes:
  - bpf=__x64_sys_bpf:c
  - execs=__x64_sys_execve:c
  - reads=vfs_read:r
  - sizes=vfs_read:c:a3
"""

SCRIPT = r"""
import json, sys, time
from collections import Counter
from pathlib import Path

from ktui.kernel.generic.cache import ProgramCache
from ktui.kernel.generic.loader import cached_tracing_variant
from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset

cache_dir, log, probes = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
comms = Counter()

def drain(s):
    for e in s.drain().events():
        comms[(names[e.probe_id], e.comm)] += 1

options = SessionOptions(engine="generic", attach="auto", cache_dir=cache_dir, log_path=log)
with Session(loads_probeset(probes), options) as s:
    names = {i: st.probe.name for i, st in s.statuses().items()}
    deadline = time.monotonic() + 700  # within the test's own timeout: this says why
    while not s.loaded.is_set() and time.monotonic() < deadline:
        drain(s)
        time.sleep(0.2)
    if s.load_error or not s.loaded.is_set():
        print("not loaded:", s.load_error or "timeout", flush=True)
        sys.exit(1)
    # the fentry/fexit variant compiles in the background: done once cached
    while cached_tracing_variant(ProgramCache(cache_dir)) is None and time.monotonic() < deadline:
        drain(s)
        time.sleep(0.2)
    drain(s)
    print("compiled", flush=True)
    sys.stdin.readline()  # the test made its own calls
    time.sleep(0.3)
    drain(s)
    stats = s.stats().probes
    states = {names[i]: [st.state.value, st.via] for i, st in s.statuses().items()}
print(json.dumps({
    "states": states,
    "stats": {names[i]: {"hits": p.hits, "counted_only": p.counted_only, "top_comms": p.top_comms}
              for i, p in stats.items()},
    "event_comms": [[probe, comm, n] for (probe, comm), n in comms.items()],
}))
"""


def corrupt_copy(warm_cache: Path, cache: Path) -> tuple[str, str]:
    """CACHE made to hold the run's generic program (warm_cache) with its
    instructions corrupted, and nothing else: (the generic program's key,
    its fentry/fexit variant's)."""
    kprobe_key = cache_key(program_text(func_arg_helpers=kernel_features().func_arg_helpers), __version__)
    tracing_key = cache_key(program_text(tracing=True), __version__)
    cache.mkdir(mode=0o700)
    entry = cache / (kprobe_key + SUFFIX)
    data = json.loads((warm_cache / entry.name).read_bytes())
    data["body"] = data["body"].replace('"insns": "', '"insns": "AAAA', 1)
    entry.write_bytes(json.dumps(data).encode())
    entry.chmod(0o600)
    return kprobe_key, tracing_key


def test_a_first_starts_compiles_are_not_counted(tmp_path, warm_cache, workload):
    cache = tmp_path / "cache"
    kprobe_key, tracing_key = corrupt_copy(warm_cache, cache)
    python = tmp_path / OWN
    python.symlink_to(os.path.realpath(sys.executable))
    root = HERE.parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), sysconfig.get_paths()["purelib"]]))
    script = tmp_path / "session.py"
    script.write_text(SCRIPT)
    log = tmp_path / "ktui.log"
    proc = subprocess.Popen([str(python), str(script), str(cache), str(log), PROBES],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=root)
    try:
        line = proc.stdout.readline()
        assert line == "compiled\n", f"{line!r}; log: {log.read_text() if log.exists() else ''}"
        me = Path("/proc/self/comm").read_text().strip()
        assert me != OWN
        for _ in range(OWN_CALLS):  # bpf(2) by a process that is not ktui's: counted
            os.close(bpfsys.map_create(bpfsys.BPF_MAP_TYPE_ARRAY, 4, 8, 1, name="ktui_own_test"))
        out, _ = proc.communicate("done\n", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    seen = json.loads(out)
    text = log.read_text()
    # the corrupt entry was a miss, said so, and both compiles ran while the
    # probes counted, in the helper; `auto` went by kprobe meanwhile, saying why
    assert "is corrupt" in text and "recompiling" in text, text
    assert "compile helper started" in text, text
    assert "generic program compiled" in text and "fentry/fexit variant compiled" in text, text
    assert "attach: auto: kprobe: the fentry/fexit variant is not compiled yet" in text, text
    assert all(state == "attached" for state, _via in seen["states"].values()), seen["states"]
    assert {via for _state, via in seen["states"].values()} == {"kprobe", "kretprobe"}, seen["states"]

    for name, stats in seen["stats"].items():
        comms = {comm for comm, _n in stats["top_comms"]}
        assert not comms & WHAT_THE_HELPER_WOULD_START, (name, stats)
    assert not {comm for _probe, comm, _n in seen["event_comms"]} & WHAT_THE_HELPER_WOULD_START
    assert sum(n for probe, _comm, n in seen["event_comms"] if probe == "sizes") > 0  # events did flow

    assert seen["stats"]["execs"]["hits"] == 0, seen["stats"]["execs"]  # the helper's execs are ktui's
    bpf = seen["stats"]["bpf"]
    # every bpf(2) call of the run was ktui's (left out) but the test's own
    assert bpf["counted_only"] == 0, bpf  # the dispatcher counted none of the first compile's calls
    assert dict(bpf["top_comms"]) == {me: OWN_CALLS}, bpf
    assert bpf["hits"] == OWN_CALLS, bpf

    # compiled here, both are the very entries the run's cache holds: the
    # host's compiles for this kernel, instructions, maps and all
    for key in (kprobe_key, tracing_key):
        assert ProgramCache(cache).get(key) == ProgramCache(warm_cache).get(key) is not None, key
    # the next start: both from the cache, no compile, and by fentry
    reads = 25
    w = workload([[["read", 5, reads]]])
    next_log = tmp_path / "next.log"
    ps = loads_probeset(f"name: next\nfilter:\n  pid: {w.pid}\nprobes:\n  - vfs_read:c:a3\n")
    with Session(ps, SessionOptions(engine="generic", attach="auto", cache_dir=cache, log_path=next_log)) as s:
        assert s.wait_loaded(600)
        (st,) = s.statuses().values()
        assert (st.state.value, st.via) == ("attached", "fentry"), st
        w.run_phase()
        events = drain_all(s)
        assert s.stats().probes[st.probe_id].hits == reads
    assert [e.values[0] for e in events] == [5] * reads
    text = next_log.read_text()
    assert "generic program from the cache" in text, text
    assert "generic program compiled" not in text and "variant compiled" not in text, text
