"""hist / count / sum, kept in the kernel, against a workload whose every
read is known: exact histogram buckets, exact counts by value, exact sums
by comm, a full count map that reports what it dropped, and the kernel
stacks of two syscalls that reach vfs_read.

Aggregations run in the generic program, shipped prebuilt: nothing is
compiled. Each test runs by kprobe and by fentry/fexit (whose stacks start
in ktui's program and trampoline: the reader must leave those frames out).
The module opens one session per way holding every test's probes (a
session's start and end cost seconds under emulation, not a compile any
more). Each test's probes filter on comm names only its own
workload takes (workload.py's "comm" op, before its reads): every hit of
a test's probes is one of its workload's reads, as with the set filtered
on the workload's pid, and no test's reads reach another's probes."""

from __future__ import annotations

import dataclasses

import pytest

from ktui.kernel.session import Session
from ktui.lang.probeset import loads_probeset
from ktui.pipeline.stacks import folded_lines, merged
from ktui.record.histogram import HIST_SLOTS, slot_of

from .conftest import wait_for

READS = [["read", 7, 10], ["read", 100, 5], ["read", 4096, 3]]
# the comm names each test's workload takes: one test's alone
HIST, SUM_A, SUM_B, FULL, STACKS = "agg_hist", "agg_a", "agg_b", "agg_full", "agg_stacks"
BY_SUM = f'(comm == "{SUM_A}" || comm == "{SUM_B}")'

PROBES = f"""
name: a
attach: {{attach}}
probes:
  - spec: sizes=vfs_read:c hist(a3) count(a3)
    filter: comm == "{HIST}"
  - spec: all=vfs_read:r count(comm) sum(retval)
    filter: {BY_SUM}
  - spec: vfs_read:r
    label: ok
    count: [comm]
    sum: retval
    filter: retval >= 0 && {BY_SUM}
  - spec: total=vfs_read:r sum(retval)
    filter: {BY_SUM}
  - spec: small=vfs_read:c count(a3) max_keys(4)
    filter: comm == "{FULL}"
  - spec: who=vfs_read:c stack(kernel)
    filter: comm == "{STACKS}"
"""


@pytest.fixture(scope="module", params=["kprobe", "fentry"])
def session(request):
    """Every test's probes in one session per way of attaching. Counting
    only: nothing is ever streamed."""
    with Session(loads_probeset(PROBES.format(attach=request.param))) as s:
        # every probe attached the way asked
        want = {"kprobe", "kretprobe"} if request.param == "kprobe" else {"fentry", "fexit"}
        wait_for(lambda: {st.via for st in s.statuses().values()} == want, f"every probe by {request.param}")
        yield s


def by_label(session) -> dict[str, int]:
    return {st.probe.name: st.probe_id for st in session.statuses().values()}


def test_every_probe_of_the_module_attached(session):
    assert {st.probe.name: st.state.value for st in session.statuses().values()} == dict.fromkeys(
        ("sizes", "all", "ok", "total", "small", "who"), "attached")


def test_value_histogram_and_top_values_are_exact(workload, session):
    w = workload([[["comm", HIST], *READS]])  # counting-only: no fetch, no events
    w.run_phase()
    stats = session.stats().probes[by_label(session)["sizes"]]
    assert len(session.drain()) == 0  # nothing streamed
    expected = [0] * HIST_SLOTS
    for _, size, n in READS:
        expected[slot_of(size)] += n
    assert stats.hits == 18
    assert list(stats.value_hist) == expected
    assert stats.value_hist_sum == sum(size * n for _, size, n in READS)  # the kernel's exact sum
    assert stats.top_values == (((7,), 10, 0), ((100,), 5, 0), ((4096,), 3, 0))
    assert stats.value_keys == 3
    assert stats.values_dropped == 0


def test_sum_by_comm_with_and_without_a_filter(workload, session):
    w = workload([[["comm", SUM_A], ["read", 7, 10],
                   ["comm", SUM_B], ["read", 100, 3], ["badread", 4]]])
    w.run_phase()
    stats = session.stats().probes
    ids = by_label(session)
    # negative returns (-EBADF) are counted under their key but not summed
    assert stats[ids["all"]].top_values == (((SUM_B,), 7, 300), ((SUM_A,), 10, 70))
    assert stats[ids["ok"]].top_values == (((SUM_B,), 3, 300), ((SUM_A,), 10, 70))
    assert stats[ids["total"]].top_values == (((), 17, 370),)
    # the sum over every key: the top values view's share of the sum (issue #29)
    assert stats[ids["all"]].value_sum == stats[ids["total"]].value_sum == 370


def test_a_full_count_map_counts_its_drops(workload, session):
    # ten distinct sizes, twice each, into a map of four keys: the first four
    # sizes are counted; every read of the other six is dropped and counted,
    # and so are their distinct keys (the lost keys' map, shared by every
    # probe, has room for them all: none is unknown)
    w = workload([[["comm", FULL], *[["read", size, 2] for size in range(1, 11)]]])
    w.run_phase()
    stats = session.stats().probes[by_label(session)["small"]]
    assert stats.hits == 20
    assert stats.value_keys == 4
    assert sorted(stats.top_values) == [((1,), 2, 0), ((2,), 2, 0), ((3,), 2, 0), ((4,), 2, 0)]
    assert stats.values_dropped == 12
    assert stats.keys_dropped == 6
    assert stats.keys_dropped_unknown == 0
    # what the exporter reads (detail=False): every count and drop the
    # same, the lost keys' map not walked (no metric carries keys_dropped)
    brief = session.stats(detail=False).probes[by_label(session)["small"]]
    assert (brief.hits, brief.value_keys, sorted(brief.top_values), brief.values_dropped) == \
        (20, 4, sorted(stats.top_values), 12)
    assert brief.keys_dropped == 0


def test_stacks_of_two_syscalls_reaching_vfs_read(workload, session):
    # read(2) reaches vfs_read through ksys_read, pread64(2) through
    # ksys_pread64: two call paths, each counted exactly
    w = workload([[["comm", STACKS], ["read", 7, 10], ["pread", 5, 6]]])
    w.run_phase()
    who = by_label(session)["who"]
    stats = session.stats().probes[who]
    probe = session.statuses()[who].probe
    stacks = merged(probe, stats.stacks, session.symbolize, offsets=False)
    folded = folded_lines(probe, stats.stacks, session.symbolize)
    assert stats.hits == 16
    assert stats.stacks_dropped == 0
    assert all(frames[0] == "vfs_read" for frames, _ in stacks), stacks
    via_read = sum(n for frames, n in stacks if "ksys_read" in frames or "__x64_sys_read" in frames)
    via_pread = sum(n for frames, n in stacks if any("pread64" in f for f in frames))
    assert (via_read, via_pread) == (10, 6), stacks
    assert sum(n for _, n in stacks) == 16
    # folded: root first, the probed function last, then the count
    assert all(line.rsplit(" ", 1)[0].endswith(";vfs_read") for line in folded), folded
    assert sum(int(line.rsplit(" ", 1)[1]) for line in folded) == 16
    # what the exporter reads (detail=False): the hits, no stacks walked
    brief = session.stats(detail=False).probes[who]
    assert (brief.hits, brief.stacks) == (16, ())
