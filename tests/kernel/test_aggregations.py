"""hist / count / sum, kept in the kernel, against a workload whose every
read is known: exact histogram buckets, exact counts by value, exact sums
by comm, a full count map that reports what it dropped, and the kernel
stacks of two syscalls that reach vfs_read.

The workload (workload.py) reads only when told, so with the probe set
filtered on its pid every hit is one of its reads."""

from __future__ import annotations

from ktui.kernel.session import Session
from ktui.pipeline.stacks import folded_lines, merged
from ktui.record.histogram import HIST_SLOTS, slot_of

from .test_pipeline import probe_set

READS = [["read", 7, 10], ["read", 100, 5], ["read", 4096, 3]]


def by_label(session) -> dict[str, int]:
    return {st.probe.name: st.probe_id for st in session.statuses().values()}


def test_value_histogram_and_top_values_are_exact(workload):
    w = workload([READS])
    text = ("name: a\nprobes:\n"
            "  - spec: sizes=vfs_read:c hist(a3) count(a3)\n")  # counting-only: no fetch, no events
    with Session(probe_set(text, w.pid)) as s:
        w.run_phase()
        stats = s.stats().probes[by_label(s)["sizes"]]
        assert len(s.drain()) == 0  # nothing streamed
    expected = [0] * HIST_SLOTS
    for _, size, n in READS:
        expected[slot_of(size)] += n
    assert stats.hits == 18
    assert list(stats.value_hist) == expected
    assert stats.top_values == (((7,), 10, 0), ((100,), 5, 0), ((4096,), 3, 0))
    assert stats.value_keys == 3
    assert stats.values_dropped == 0


def test_sum_by_comm_with_and_without_a_filter(workload):
    w = workload([[["comm", "agg_a"], ["read", 7, 10],
                   ["comm", "agg_b"], ["read", 100, 3], ["badread", 4]]])
    text = ("name: s\nprobes:\n"
            "  - spec: all=vfs_read:r count(comm) sum(retval)\n"
            "  - spec: vfs_read:r\n    label: ok\n    count: [comm]\n    sum: retval\n"
            "    filter: retval >= 0\n"
            "  - spec: total=vfs_read:r sum(retval)\n")
    with Session(probe_set(text, w.pid)) as s:
        w.run_phase()
        stats = s.stats().probes
        ids = by_label(s)
    # negative returns (-EBADF) are counted under their key but not summed
    assert stats[ids["all"]].top_values == ((("agg_b",), 7, 300), (("agg_a",), 10, 70))
    assert stats[ids["ok"]].top_values == ((("agg_b",), 3, 300), (("agg_a",), 10, 70))
    assert stats[ids["total"]].top_values == (((), 17, 370),)
    # the sum over every key: the top values view's share of the sum (issue #29)
    assert stats[ids["all"]].value_sum == stats[ids["total"]].value_sum == 370


def test_a_full_count_map_counts_its_drops(workload):
    # ten distinct sizes, twice each, into a map of four keys: the first four
    # sizes are counted; every read of the other six is dropped and counted,
    # the keys of the next four are remembered (the lost keys' map holds
    # max_keys), and the last two sizes' 4 reads are counted as unknown keys
    w = workload([[["read", size, 2] for size in range(1, 11)]])
    text = "name: f\nprobes:\n  - spec: small=vfs_read:c count(a3) max_keys(4)\n"
    with Session(probe_set(text, w.pid)) as s:
        w.run_phase()
        stats = s.stats().probes[by_label(s)["small"]]
    assert stats.hits == 20
    assert stats.value_keys == 4
    assert sorted(stats.top_values) == [((1,), 2, 0), ((2,), 2, 0), ((3,), 2, 0), ((4,), 2, 0)]
    assert stats.values_dropped == 12
    assert stats.keys_dropped == 4
    assert stats.keys_dropped_unknown == 4


def test_stacks_of_two_syscalls_reaching_vfs_read(workload):
    # read(2) reaches vfs_read through ksys_read, pread64(2) through
    # ksys_pread64: two call paths, each counted exactly
    w = workload([[["read", 7, 10], ["pread", 5, 6]]])
    text = "name: k\nprobes:\n  - spec: who=vfs_read:c stack(kernel)\n"
    with Session(probe_set(text, w.pid)) as s:
        w.run_phase()
        stats = s.stats().probes[by_label(s)["who"]]
        probe = s.statuses()[by_label(s)["who"]].probe
        stacks = merged(probe, stats.stacks, s.symbolize, offsets=False)
        folded = folded_lines(probe, stats.stacks, s.symbolize)
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
