"""fentry/fexit (issue 13): the same values and counts as kprobes on the
same workload, the fallback to a kprobe where fentry cannot go (an offset,
a function with more than 6 arguments on 6.1), an fexit latency histogram
that counts every call, and no tracing link left after any exit."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess

import pytest

from ktui.btf.index import KernelBtf
from ktui.kernel.attach.attach_choice import choose, max_args
from ktui.kernel.machine.features import kernel_features
from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset
from ktui.lang.spec import parse_spec
from ktui.record.feed import ProbeState

from .conftest import drain_all, wait_for

READS, SIZE = 40, 7


def after_ftrace_site() -> int:
    """The first instruction boundary past vfs_read's ftrace call site
    (nop5), where a kprobe can go: +0x5, or +0x9 behind an endbr64 where
    the kernel has IBT (Debian's 6.12; its 6.1 has not: there +0x4 is
    inside the nop and the kprobe is refused)."""
    config = f"/boot/config-{os.uname().release}"
    ibt = os.path.exists(config) and "CONFIG_X86_KERNEL_IBT=y" in open(config).read()
    return 9 if ibt else 5
# do_mmap takes 8 arguments on 6.1 (9 from 6.5): past a 6.1 trampoline's 6
MANY_ARGS = "do_mmap"

SAME = """
name: same
probes:
  - spec: fe=vfs_read:c:a3
    attach: fentry
  - spec: kp=vfs_read:c:a3
    attach: kprobe
  - spec: fx=vfs_read:r:retval,a3
    attach: fentry
    maxactive: 64
  - spec: kr=vfs_read:r:retval,a3
    attach: kprobe
"""


@pytest.fixture
def cache_dir(warm_cache):
    """The run's cache (conftest), as an XDG_CACHE_HOME: both variants in it
    (`auto` goes by kprobe rather than wait for the tracing one's compile),
    compiled once per run."""
    return warm_cache.parent


def run(ps, workload, cache_dir, log, shape=(("read", SIZE, READS),)):
    w = workload([[list(op) for op in shape]])
    ps = loads_probeset(ps) if isinstance(ps, str) else ps
    ps = dataclasses.replace(ps, pid=w.pid)
    # the directory `ktui stream` uses with XDG_CACHE_HOME=cache_dir: one compile for the module
    options = SessionOptions(engine="generic", cache_dir=cache_dir / "ktui", log_path=log)
    with Session(ps, options) as s:
        s.wait_loaded()
        statuses = s.statuses()
        w.run_phase()
        s.detach_all()
        events = drain_all(s)
        return statuses, s.stats().probes, events


def test_fentry_and_kprobe_agree(workload, cache_dir, tmp_path):
    log = tmp_path / "ktui.log"
    statuses, stats, events = run(SAME, workload, cache_dir, log)
    ids = {st.probe.name: i for i, st in statuses.items()}
    assert all(st.state is ProbeState.ATTACHED for st in statuses.values()), statuses
    assert {st.probe.name: st.via for st in statuses.values()} == {
        "fe": "fentry", "kp": "kprobe", "fx": "fexit", "kr": "kretprobe"}
    for name in ("fe", "kp", "fx", "kr"):
        assert stats[ids[name]].hits == READS, (name, stats[ids[name]])
        mine = [e for e in events if e.probe_id == ids[name]]
        assert len(mine) == READS, name
    values = {name: sorted(e.values for e in events if e.probe_id == ids[name]) for name in ids}
    assert values["fe"] == values["kp"] == [(SIZE,)] * READS
    assert values["fx"] == values["kr"] == [(SIZE, SIZE)] * READS
    # fexit: every return, none missed; its histogram counts every call
    assert stats[ids["fx"]].missed_returns == 0
    assert sum(stats[ids["fx"]].hist) == READS == sum(stats[ids["kr"]].hist)
    assert all(e.latency_ns > 0 for e in events if e.probe_id == ids["fx"])
    text = log.read_text()
    assert "maxactive 64 unused: fexit sees every return" in text


# Probes that only count gather nothing their plan does not read
# (generic/plan.work_flags): these filters read an argument, which a call
# probe must still take (fentry: bpf_get_func_arg) and a return probe's
# entry must still save for its return. Each set runs alone: another
# probe's copy of the same hit's arguments would hide a missing one.
FILTERED_CALLS = """
name: filtered-calls
probes:
  - spec: fc=vfs_read:c
    filter: a3 == 7
    attach: fentry
  - spec: kc=vfs_read:c
    filter: a3 == 7
    attach: kprobe
"""
FILTERED_RETURNS = """
name: filtered-returns
probes:
  - spec: fr=vfs_read:r
    filter: a3 == 3 && retval == 3
    attach: fentry
  - spec: kr=vfs_read:r
    filter: a3 == 3 && retval == 3
    attach: kprobe
"""
# Probes that do nothing but count, and time a return (F_BARE: no scratch
# state): who made each hit, every latency.
BARE = """
name: bare
probes:
  - spec: fb=vfs_read:c
    attach: fentry
  - spec: kb=vfs_read:c
    attach: kprobe
  - spec: fr=vfs_read:r
    attach: fentry
  - spec: kr=vfs_read:r
    attach: kprobe
"""
OTHER_READS = 25


def test_counting_probes_filter_on_arguments(workload, cache_dir, tmp_path):
    shape = (("read", SIZE, READS), ("read", 3, OTHER_READS))
    every = READS + OTHER_READS
    for text, via, want in ((FILTERED_CALLS, {"fc": "fentry", "kc": "kprobe"}, READS),
                            (FILTERED_RETURNS, {"fr": "fexit", "kr": "kretprobe"}, OTHER_READS),
                            (BARE, {"fb": "fentry", "kb": "kprobe", "fr": "fexit", "kr": "kretprobe"},
                             every)):
        statuses, stats, events = run(text, workload, cache_dir, tmp_path / "ktui.log", shape)
        assert events == []  # they only count
        assert {st.probe.name: st.via for st in statuses.values()} == via
        hits = {st.probe.name: stats[i].hits for i, st in statuses.items()}
        assert hits == {name: want for name in via}, text
        for i, st in statuses.items():  # who made the hits: every one, by its comm
            assert sum(n for _, n in stats[i].top_comms) == hits[st.probe.name], stats[i]
        for i, st in statuses.items():
            if st.probe.kind.name == "RETURN":  # every latency too, and no errno
                assert sum(stats[i].hist) == want, stats[i]
                assert stats[i].latency_sum_ns > 0 and not stats[i].errnos, stats[i]


COUNTING = """
name: counting
probes:
  - spec: fc=vfs_read:c
    attach: fentry
  - spec: kc=vfs_read:c
    attach: kprobe
"""


def test_a_counting_probe_runs_its_own_program(workload, cache_dir, tmp_path):
    """A call probe that only counts runs generic/counter.py's program, by
    fentry and by kprobe: no set-wide --pid, so it counts every process's
    reads but ktui's own, and names them past its exact first hits by a
    1-in-COMM_EVERY sample, weighted: each workload's share comes out
    within a few samples of its true count."""
    from ktui.kernel.codegen.runtime import COMM_EVERY, COMM_EXACT

    a_reads, b_reads, own_reads = 3000, 1500, 300
    assert a_reads > 2 * COMM_EXACT  # most of a's hits are sampled
    w = workload([[["comm", "ktui-ctr-a"], ["read", 1, a_reads], ["comm", "ktui-ctr-b"], ["read", 1, b_reads]]])
    options = SessionOptions(engine="generic", cache_dir=cache_dir / "ktui", log_path=tmp_path / "ktui.log")
    own_comm = f"/proc/self/task/{os.getpid()}/comm"
    with Session(loads_probeset(COUNTING), options) as s:
        s.wait_loaded()
        statuses = s.statuses()
        counters = [slot.counter for slot in s._engine.slots.values()]
        # ktui's own reads (this process is the session's): renamed, and not counted
        before = open(own_comm).read().strip()
        with open(own_comm, "w") as f:
            f.write("ktui-ctr-self")
        try:
            zero = os.open("/dev/zero", os.O_RDONLY)
            for _ in range(own_reads):
                os.read(zero, 1)
            os.close(zero)
        finally:
            with open(own_comm, "w") as f:
                f.write(before)
        w.run_phase()
        s.detach_all()
        stats = s.stats().probes
    assert {st.probe.name: (st.state, st.via) for st in statuses.values()} == {
        "fc": (ProbeState.ATTACHED, "fentry"), "kc": (ProbeState.ATTACHED, "kprobe")}
    assert counters == [True, True]
    # the hash picks 1 in COMM_EVERY of a run of counts to within a few
    slack = 4 * COMM_EVERY
    for i, st in statuses.items():
        comms = dict(stats[i].top_comms)
        assert stats[i].hits >= a_reads + b_reads, stats[i]
        assert not stats[i].top_comms_exact, stats[i]
        assert abs(comms.get("ktui-ctr-a", 0) - a_reads) <= slack, (st.probe.name, comms)
        assert abs(comms.get("ktui-ctr-b", 0) - b_reads) <= slack, (st.probe.name, comms)
        assert "ktui-ctr-self" not in comms, (st.probe.name, comms)


def test_bare_probes_keep_the_set_wide_comm_filter(workload, cache_dir, tmp_path):
    """A bare probe reads comm into the stack, not the scratch state: the
    set's comm filter (`--comm`) must still decide, at a call and at a
    return probe's entry."""
    ps = dataclasses.replace(loads_probeset(BARE), comm="ktui-bare")
    shape = (("read", SIZE, OTHER_READS), ("comm", "ktui-bare"), ("read", SIZE, READS))
    statuses, stats, events = run(ps, workload, cache_dir, tmp_path / "ktui.log", shape)
    assert events == []
    hits = {st.probe.name: stats[i].hits for i, st in statuses.items()}
    assert hits == {"fb": READS, "kb": READS, "fr": READS, "kr": READS}
    for i in statuses:
        assert dict(stats[i].top_comms) == {"ktui-bare": READS}, stats[i]


def test_fallback_for_offset_and_many_arguments(workload, cache_dir, tmp_path):
    btf = KernelBtf()
    features = kernel_features()  # probed: what the session itself goes by
    many = choose(parse_spec(f"{MANY_ARGS}:c"), "auto", features=features, btf=btf, generic=True)
    if max_args(features) == 6:
        assert many.via == "kprobe" and "arguments" in many.reason, many
    offset = after_ftrace_site()
    ps = f"""
name: fallback
attach: auto
probes:
  - spec: off=vfs_read+{offset:#x}:c
  - spec: many={MANY_ARGS}:c
  - spec: whole=vfs_read:c
"""
    log = tmp_path / "ktui.log"
    statuses, stats, _ = run(ps, workload, cache_dir, log)
    by_name = {st.probe.name: st for st in statuses.values()}
    ids = {st.probe.name: i for i, st in statuses.items()}
    assert all(st.state is ProbeState.ATTACHED for st in statuses.values()), statuses
    assert by_name["off"].via == "kprobe"
    assert by_name["whole"].via == "fentry"
    assert by_name["many"].via == ("kprobe" if max_args(features) == 6 else "fentry")
    assert stats[ids["off"]].hits == stats[ids["whole"]].hits == READS
    text = log.read_text()
    assert re.search(rf"vfs_read\+{offset:#x}:c: attach: auto: kprobe: .*offset", text), text
    if max_args(features) == 6:
        assert re.search(rf"{MANY_ARGS}:c: attach: auto: kprobe: .*arguments", text), text


def tracing_links() -> list[str]:
    """Every tracing link in the kernel (bpftool link list; links can
    vanish mid-listing, and then bpftool exits 255: asked again)."""
    out = None

    def listed():
        nonlocal out
        out = subprocess.run(["bpftool", "-j", "link", "list"], capture_output=True, text=True)
        return out.returncode == 0

    wait_for(listed, f"bpftool link list to answer ({out.stderr.strip() if out else ''})", 30, every=0.2)
    return [link for link in json.loads(out.stdout or "[]") if link.get("type") == "tracing"]


# Called first thing by every run of ktui's programs (the dispatcher's, the
# generic program's kprobe and tracing variants): a probe on it is entered
# again from inside its own run.
NESTED = "bpf_get_current_pid_tgid"


def test_fentry_recursion_misses_are_counted(workload, cache_dir, tmp_path):
    """The trampoline skips an fentry program entered again on a CPU where
    it already runs, and counts that on the program (recursion_misses,
    5.12+). An fentry probe on a helper that its own program calls: each
    run it starts (from the kprobe's runs on every vfs_read) calls the
    helper once more, and that nested run is skipped and counted."""
    ps = f"""
name: nested
probes:
  - spec: trigger=vfs_read:c
    attach: kprobe
  - spec: nested={NESTED}:c
    attach: fentry
"""
    statuses, stats, _ = run(ps, workload, cache_dir, tmp_path / "ktui.log")
    by_name = {st.probe.name: st for st in statuses.values()}
    ids = {st.probe.name: i for i, st in statuses.items()}
    assert by_name["nested"].state is ProbeState.ATTACHED, by_name["nested"]
    assert by_name["nested"].via == "fentry"
    trigger, nested = stats[ids["trigger"]], stats[ids["nested"]]
    assert trigger.hits == READS, trigger
    # every outer run of the copy calls the helper before any filter: one
    # skipped, counted nested run at least per run, and it ran at least once
    # per workload read (the kprobe's program calls the helper too)
    assert nested.recursion_misses >= READS, nested
    assert nested.recursion_misses >= nested.hits, nested


# `auto` while the fentry/fexit variant first compiles (a kprobe counts, the
# variant compiles in the background, the next start goes by fentry):
# test_own_processes, the one first start of the suite (a compile takes
# minutes under emulation).
