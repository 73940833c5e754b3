"""The shipped generic program (ktui/kernel/generic/shipped/): a first
start with no kernel headers and no cache loads it at once, runs every
probe by fentry/fexit, and counts none of ktui's own processes; a kernel
whose verifier refuses it gets one line saying what a compile would need,
and the verifier's words in ktui's log.

The kernel headers are made unreachable as on a production machine: in a
private mount namespace an empty directory covers /usr/src and this
kernel's build and source trees (Debian's stock kernels have no kheaders
module for bcc to fall back to). So any compile would fail, and a start
that needed one could not load.

ktui's own processes stay out of every count (issue 28: on a first start
`read_ret`'s top comms ranked python3 first, the compile child's reads,
counted while the probes were loading). The session runs in a Python
whose name is `ktuiown` (a symlink: a process's comm is the name it was
started by): any hit of ktui's shows as `ktuiown`. The test's own bpf(2)
calls, made once the probes are in, are the only ones a probe on the bpf
syscall may count, and nothing execs meanwhile.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from ktui.btf.index import KernelBtf
from ktui.kernel.generic.cache import decode_entry, encode_entry
from ktui.kernel.generic.shipped import (KPROBE, SUFFIX, TRACEPOINT, TRACING, VARIANTS, shipped_dir, shipped_key,
                                         shipped_program)
from ktui.kernel.generic.loader import load_compiled, load_tracepoint_program, load_tracing_copy, program_text
from ktui.kernel.maps import bpfsys

from ktui.record.histogram import HIST_SLOTS, slot_of

from .conftest import HERE

OWN = "ktuiown"
OWN_CALLS = 3
ROOT = HERE.parent.parent

AGG = "shipagg"  # the workload's comm: only its hits reach the probes below
READS = [["read", 7, 10], ["read", 100, 5], ["badread", 2]]
OPENED = "/tmp/ktui-shipped-open"
PROBES = f"""
name: own
probes:
  - bpf=__x64_sys_bpf:c
  - execs=__x64_sys_execve:c
  - reads=vfs_read:r
  - sizes=vfs_read:c:a3
  # the generic engine's every feature, with no compiler: names, filters,
  # strings, hist, count by comm, sum, kernel stacks
  - spec: agg_sizes=vfs_read:c:count hist(count) count(comm) stack(kernel)
    filter: comm == "{AGG}"
  - spec: agg_bytes=vfs_read:r sum(retval)
    filter: comm == "{AGG}" && retval >= 0
  - spec: opens=do_sys_openat2:c:fname=+0(a2):ustring
    filter: comm == "{AGG}"
"""

# $1: an empty directory; the rest: the command, run where no kernel
# headers can be found
NO_HEADERS = r"""
empty="$1"; shift
for d in /usr/src "/lib/modules/$(uname -r)/build" "/lib/modules/$(uname -r)/source"; do
    if [ -e "$d" ]; then mount --bind "$empty" "$d" || exit 90; fi
done
[ -z "$(ls -A /usr/src)" ] || exit 91
exec "$@"
"""

SCRIPT = r"""
import json, sys, time
from collections import Counter
from pathlib import Path

from ktui.pipeline.stacks import merged

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset

cache_dir, log, probes = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
comms = Counter()
values = Counter()

def drain(s):
    for e in s.drain().events():
        comms[(names[e.probe_id], e.comm)] += 1
        if e.comm == "shipagg":
            values[(names[e.probe_id], repr(e.values))] += 1

options = SessionOptions(engine="generic", attach="auto", cache_dir=cache_dir, log_path=log)
with Session(loads_probeset(probes), options) as s:
    names = {i: st.probe.name for i, st in s.statuses().items()}
    deadline = time.monotonic() + 600
    while not s.loaded.is_set() and time.monotonic() < deadline:
        drain(s)
        time.sleep(0.2)
    print(json.dumps({"loaded": s.loaded.is_set(), "error": s.load_error}), flush=True)
    if s.load_error or not s.loaded.is_set():
        sys.exit(0)
    sys.stdin.readline()  # the test made its own calls
    time.sleep(0.3)
    drain(s)
    stats = s.stats().probes
    states = {names[i]: [st.state.value, st.via] for i, st in s.statuses().items()}
    probes = {i: st.probe for i, st in s.statuses().items()}
    stacks = {names[i]: [[list(frames), n] for frames, n in merged(probes[i], p.stacks, s.symbolize, offsets=False)]
              for i, p in stats.items() if p.stacks}
print(json.dumps({
    "states": states,
    "stats": {names[i]: {"hits": p.hits, "counted_only": p.counted_only, "top_comms": p.top_comms,
                         "value_hist": p.value_hist, "top_values": p.top_values, "value_sum": p.value_sum,
                         "stacks_dropped": p.stacks_dropped}
              for i, p in stats.items()},
    "stacks": stacks,
    "event_comms": [[probe, comm, n] for (probe, comm), n in comms.items()],
    "event_values": [[probe, text, n] for (probe, text), n in values.items()],
}), flush=True)
"""


def test_every_shipped_variant_passes_this_kernels_verifier():
    """All six, those for kernels without bpf_get_func_arg too: the kprobe
    variants loaded, one copy of each tracing variant for vfs_read's entry
    and return, and each tracepoint variant, on the kprobe variant's maps
    as a session does."""
    vfs_read = KernelBtf().function_ids("vfs_read")[0]
    kprobe = {h: load_compiled(shipped_program(program_text(func_arg_helpers=h), KPROBE, h), "shipped", 1 << 16)
              for h in (True, False)}
    try:
        for name, kind, helpers in VARIANTS:
            program = shipped_program(program_text(kind, func_arg_helpers=helpers), kind, helpers)
            if kind == TRACEPOINT:
                os.close(load_tracepoint_program(program, kprobe[helpers].maps, name="ktui_test"))
            if kind != TRACING:
                continue
            for attach_type in (bpfsys.BPF_TRACE_FENTRY, bpfsys.BPF_TRACE_FEXIT):
                fd = load_tracing_copy(program, kprobe[helpers].maps, cookie=1, nargs=3, btf_id=vfs_read,
                                       attach_type=attach_type, name="ktui_test")
                os.close(fd)
    finally:
        for loaded in kprobe.values():
            loaded.close()


def start_without_headers(tmp_path: Path, package_root: Path) -> tuple[subprocess.Popen, Path, Path]:
    """The session script, as `ktuiown`, with ktui from PACKAGE_ROOT, an
    empty cache and no kernel headers: (the process, its cache, its log)."""
    cache, log, empty = tmp_path / "cache", tmp_path / "ktui.log", tmp_path / "empty"
    empty.mkdir()
    python = tmp_path / OWN
    python.symlink_to(os.path.realpath(sys.executable))
    script = tmp_path / "session.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(package_root), sysconfig.get_paths()["purelib"]]))
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", NO_HEADERS, "sh", str(empty),
               str(python), str(script), str(cache), str(log), PROBES]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                            cwd=package_root)
    return proc, cache, log


def loaded(proc: subprocess.Popen, log: Path) -> dict:
    line = proc.stdout.readline()
    assert line, f"no answer (exit {proc.wait()}); log: {log.read_text() if log.exists() else ''}"
    return json.loads(line)


def test_a_first_start_without_headers_or_cache_runs_the_shipped_program(tmp_path, workload):
    w = workload([[["comm", AGG], *READS, ["open", OPENED]]])
    proc, cache, log = start_without_headers(tmp_path, ROOT)
    try:
        start = loaded(proc, log)
        assert start["loaded"] and not start["error"], (start, log.read_text())
        me = Path("/proc/self/comm").read_text().strip()
        assert me != OWN
        for _ in range(OWN_CALLS):  # bpf(2) by a process that is not ktui's: counted
            os.close(bpfsys.map_create(bpfsys.BPF_MAP_TYPE_ARRAY, 4, 8, 1, name="ktui_own_test"))
        w.run_phase()  # known reads and an open, under a comm of their own
        out, _ = proc.communicate("done\n", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    seen = json.loads(out)
    text = log.read_text()
    # no compile, no helper for one, and nothing written to the cache
    assert "generic program (shipped) loaded" in text, text
    assert "compile" not in text, text
    assert not cache.exists() or not any(cache.glob("*.ktuiprog"))
    # every probe attached, by fentry/fexit at once where `auto` allows it
    # (the shipped tracing variant; 6.1 takes the bpf syscall by kprobe)
    assert all(state == "attached" for state, _via in seen["states"].values()), seen["states"]
    assert seen["states"]["reads"] == ["attached", "fexit"], seen["states"]
    assert seen["states"]["sizes"] == ["attached", "fentry"], seen["states"]
    assert "not compiled yet" not in text, text

    for name, stats in seen["stats"].items():
        assert OWN not in {comm for comm, _n in stats["top_comms"]}, (name, stats)
    assert OWN not in {comm for _probe, comm, _n in seen["event_comms"]}
    assert sum(n for probe, _comm, n in seen["event_comms"] if probe == "sizes") > 0  # events did flow
    assert seen["stats"]["execs"]["hits"] == 0, seen["stats"]["execs"]
    bpf = seen["stats"]["bpf"]
    # every bpf(2) call of the run was ktui's (left out) but the test's own
    assert bpf["counted_only"] == 0, bpf
    assert dict(bpf["top_comms"]) == {me: OWN_CALLS}, bpf
    assert bpf["hits"] == OWN_CALLS, bpf

    # exact values of the workload, every one from the shipped program
    assert seen["states"]["agg_sizes"] == ["attached", "fentry"], seen["states"]
    sizes = seen["stats"]["agg_sizes"]
    expected = [0] * HIST_SLOTS
    for op in READS:
        size, n = (op[1], op[2]) if op[0] == "read" else (13, op[1])  # badread: 13 bytes asked
        expected[slot_of(size)] += n
    assert sizes["value_hist"] == expected, sizes
    assert sizes["top_values"] == [[[AGG], 17, 0]], sizes
    events = {text: n for probe, text, n in seen["event_values"] if probe == "agg_sizes"}
    assert events == {"(7,)": 10, "(100,)": 5, "(13,)": 2}, seen["event_values"]
    assert sizes["stacks_dropped"] == 0, sizes
    stacks = seen["stacks"]["agg_sizes"]
    assert sum(n for _frames, n in stacks) == 17 and all(f[0] == "vfs_read" for f, _n in stacks), stacks
    assert seen["stats"]["agg_bytes"]["top_values"] == [[[], 15, 7 * 10 + 100 * 5]], seen["stats"]["agg_bytes"]
    opens = [(text, n) for probe, text, n in seen["event_values"] if probe == "opens"]
    assert len(opens) == 1 and OPENED in opens[0][0] and opens[0][1] == 1, seen["event_values"]


def refused_copy(root: Path) -> Path:
    """A copy of ktui whose shipped kprobe variants the verifier refuses:
    their first instruction an exit, before r0 is set (the rest is then
    unreachable). Well-formed otherwise: the loader takes them for today's."""
    copy = root / "ktui"
    shutil.copytree(ROOT / "ktui", copy, ignore=shutil.ignore_patterns("__pycache__"))
    for name, kind, helpers in VARIANTS:
        if kind != KPROBE:
            continue
        path = copy / shipped_dir().relative_to(ROOT / "ktui") / (name + SUFFIX)
        key = shipped_key(program_text(KPROBE, func_arg_helpers=helpers))
        program = decode_entry(path.read_bytes(), key)
        insns = bytes([0x95]) + bytes(7) + program.insns[8:]
        path.write_bytes(encode_entry(type(program)(insns, program.relocations, program.maps), key))
    return root


def test_a_refused_shipped_program_says_what_a_compile_needs_in_one_line(tmp_path):
    proc, _cache, log = start_without_headers(tmp_path, refused_copy(tmp_path / "pkg"))
    try:
        start = loaded(proc, log)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert start["loaded"] and start["error"], (start, text)
    error = start["error"]
    assert "\n" not in error, error
    assert "refused the shipped generic program" in error, error
    assert f"linux-headers-{os.uname().release}" in error and "python3-bpfcc" in error, error
    # the verifier's own words are kept
    assert "The verifier's log:" in text, text
    assert "R0 !read_ok" in text or "unreachable insn" in text, text
