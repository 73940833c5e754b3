"""hist(VALUE, KEY...) on a real kernel: one log2 histogram per key, kept
in the generic program's count map as one entry per (key, slot), against
workloads whose every read is known.

- `vfs_read:c hist(a3, comm)`: two comms reading known sizes give each
  comm's exact buckets and the exact sum of its sizes.
- `vfs_read:r hist(latency, comm) count(comm)`: each comm's latency
  histogram holds exactly its reads, as many as count(comm) counts.
- `max_keys(3)`: a (key, slot) past the probe's bound is not kept; its hits
  are counted as dropped and its key as lost, never dropped silently.
- The issue's own case, biolatency -D: a block request's span from
  blk_mq_start_request to blk_mq_end_request, `hist(latency, dev)`: the
  loop device's histogram holds exactly its 100 requests, as count(dev).

The probes filter on comm names only these workloads take (workload.py's
"comm" op), as test_aggregations does; each test runs by kprobe and by
fentry/fexit (the block test by what the kernel allows)."""

from __future__ import annotations

import os

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset
from ktui.record.feed import ProbeState
from ktui.record.histogram import HIST_SLOTS, slot_of

from .conftest import wait_for
from .test_spans import loop_device  # noqa: F401 (a fixture: a 1 MiB loop device)

SIZES, LATENCY, SMALL = ("kh_a", "kh_b"), ("kh_lat_a", "kh_lat_b"), "kh_small"
# what each comm reads, (size, times): sizes in distinct and shared slots
READS = {"kh_a": [(7, 10), (4096, 3), (5, 2)], "kh_b": [(100, 5), (7, 2)]}


def _either(names) -> str:
    return " || ".join(f'comm == "{n}"' for n in names)


PROBES = f"""
name: keyed
attach: {{attach}}
probes:
  - spec: sizes=vfs_read:c hist(a3, comm)
    filter: {_either(SIZES)}
  - spec: lat=vfs_read:r
    hist: [latency, comm]
    count: comm
    filter: {_either(LATENCY)}
  - spec: small=vfs_read:c hist(a3, comm) max_keys(3)
    filter: comm == "{SMALL}"
"""


@pytest.fixture(scope="module", params=["kprobe", "fentry"])
def session(request):
    with Session(loads_probeset(PROBES.format(attach=request.param))) as s:
        want = {"kprobe", "kretprobe"} if request.param == "kprobe" else {"fentry", "fexit"}
        wait_for(lambda: {st.via for st in s.statuses().values()} == want, f"every probe by {request.param}")
        yield s


def _stats(session, label: str):
    ids = {st.probe.name: st.probe_id for st in session.statuses().values()}
    return session.stats().probes[ids[label]]


def _hists(stats) -> dict:
    return {key: (list(slots), total) for key, slots, total in stats.key_hists}


def test_each_comm_has_its_own_exact_size_histogram(workload, session):
    w = workload([[op for comm in SIZES for op in (["comm", comm], *[["read", size, n] for size, n in READS[comm]])]])
    w.run_phase()  # a read's kprobe ran before the read returned: the counts are final
    stats = _stats(session, "sizes")
    want = {}
    for comm in SIZES:
        slots = [0] * HIST_SLOTS
        for size, n in READS[comm]:
            slots[slot_of(size)] += n
        want[(comm,)] = (slots, sum(size * n for size, n in READS[comm]))
    assert _hists(stats) == want
    assert stats.hist_keys == 2
    assert [key for key, _, _ in stats.key_hists] == [("kh_a",), ("kh_b",)]  # most hits first
    assert stats.hits == sum(n for comm in SIZES for _, n in READS[comm])
    assert stats.value_hist == () and stats.top_values == ()  # keyed: no histogram of all, no count
    assert stats.values_dropped == 0


def test_a_latency_histogram_per_comm_holds_what_count_counts(workload, session):
    w = workload([[["comm", LATENCY[0]], ["read", 64, 12], ["comm", LATENCY[1]], ["read", 64, 4]]])
    w.run_phase()
    # a return is counted as it returns: both its halves ran before read(2) returned
    stats = _stats(session, "lat")
    counts = {key: count for key, count, _ in stats.top_values}
    assert counts == {(LATENCY[0],): 12, (LATENCY[1],): 4}
    hists = _hists(stats)
    assert {key: sum(slots) for key, (slots, _) in hists.items()} == counts
    assert all(total > 0 for _, total in hists.values())  # each key's latencies' sum, in ns
    # together, the probe's own latency histogram
    assert [sum(col) for col in zip(*(slots for slots, _ in hists.values()))] == list(stats.hist)
    assert stats.values_dropped == 0


def test_a_histogram_past_max_keys_counts_what_it_dropped(workload, session):
    # four slots of one comm into a bound of three (key, slot) entries: the
    # first three are kept, the fourth's reads are dropped and counted
    sizes = [(1, 2), (2, 2), (4, 2), (8, 3)]
    w = workload([[["comm", SMALL], *[["read", size, n] for size, n in sizes]]])
    w.run_phase()
    stats = _stats(session, "small")
    slots = [0] * HIST_SLOTS
    for size, n in sizes[:3]:
        slots[slot_of(size)] += n
    assert _hists(stats) == {(SMALL,): (slots, 1 * 2 + 2 * 2 + 4 * 2)}
    assert stats.hits == 9
    assert stats.values_dropped == 3
    assert (stats.keys_dropped, stats.keys_dropped_unknown) == (1, 0)


BLOCK = """
name: biolatency-D
probes:
  - spec: io=blk_mq_end_request:c:rq,dev=rq->part->bd_dev since(blk_mq_start_request:c:rq) hist(latency, dev) count(dev)
"""
DIRECT_READS, BLOCK_SIZE = 100, 4096


def test_a_block_latency_histogram_per_disk(workload, warm_cache, loop_device):  # noqa: F811
    rdev = os.stat(loop_device).st_rdev
    kdev = os.major(rdev) << 20 | os.minor(rdev)  # the kernel's dev_t (MKDEV), as bd_dev holds it
    w = workload([[["directread", loop_device, BLOCK_SIZE, DIRECT_READS]]])
    with Session(loads_probeset(BLOCK), SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()),
                 "the span (its start first) attached")
        w.run_phase()

        def loop_disk():
            stats = next(iter(s.stats().probes.values()))
            count = {key: c for key, c, _ in stats.top_values}.get((kdev,), 0)
            return stats, count, _hists(stats).get((kdev,), ([0], 0))

        # a request may end in an interrupt or a kworker after the read
        # returned: wait until its count and its histogram both hold 100
        wait_for(lambda: loop_disk()[1] == DIRECT_READS and sum(loop_disk()[2][0]) == DIRECT_READS,
                 "every request of the loop device, counted and in its histogram")
        stats, count, (slots, total) = loop_disk()
    assert count == sum(slots) == DIRECT_READS
    assert total > 0 and stats.values_dropped == 0
    assert (kdev,) in {key for key, _, _ in stats.key_hists}
