"""Spans on a real kernel: `END since(START)` counts the time from each START
to the END joined to it by a key.

- Joined by the thread: the span from a read's sys_enter_read to its
  sys_exit_read gives exactly the reads a return probe of the syscall sees,
  each span holding that syscall's own time.
- Joined by a value, whatever the thread: a start waits for the first end
  of its key; a start of a key already waiting replaces it (counted), an end
  with no start waiting is counted, nothing is mixed up between keys.
- Joined by a value: a block request, by its `struct request *`, from
  blk_mq_start_request to blk_mq_end_request. 100 O_DIRECT reads of a loop
  device give exactly 100 spans on it (the loop device's own completion
  runs in a kworker or an interrupt: the spans are still the reader's,
  carried from the start), each inside its read's own time (the block
  device's read_iter, which waits for the request).
- The values of its start (`start.X`): the size each read asked for, read
  at sys_enter_read and carried to its exit, in the event, summed and
  counted per process, in a histogram and in a filter, exact; and a
  parameter by BTF at a kprobe start, added live.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections import Counter

import pytest

from ktui.kernel.generic import abi
from ktui.kernel.session import Session, SessionOptions
from ktui.lang.model import ProbeSet
from ktui.record.histogram import slot_of
from ktui.lang.spec import parse_probe_text
from ktui.lang.probeset import loads_probeset
from ktui.record.feed import ProbeState

from .conftest import drain_all, ktui_bpf_programs, wait_for

SIZE, READS = 4111, 9
BY_THREAD = """
name: by-thread
probes:
  - spec: span=syscalls/sys_exit_read:t:ret since(syscalls/sys_enter_read:t)
  - spec: ksys=ksys_read:r:retval
    attach: kprobe   # (the comparison only: the block test's end goes by fentry where it can)
  # a return at either end: its call paired first, then the span's key
  - spec: to_ret=ksys_read:r:retval since(syscalls/sys_enter_read:t)
  - spec: from_ret=syscalls/sys_exit_read:t:ret since(ksys_read:r)
"""


def _by_name(session):
    names = {pid: st.probe.name for pid, st in session.statuses().items()}
    return {names[pid]: p for pid, p in session.stats().probes.items() if pid in names}


def test_a_span_joined_by_the_thread_gives_the_return_probes_counts(workload, warm_cache):
    w = workload([[["read", SIZE, READS]]])
    ps = dataclasses.replace(loads_probeset(BY_THREAD), pid=w.pid)
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()),
                 "the span (its start first) and the return probe attached")
        w.run_phase()
        wait_for(lambda: all(_by_name(s).get(n) is not None and _by_name(s)[n].hits >= READS
                             for n in ("span", "ksys", "to_ret", "from_ret")), "every read's spans and return")
        stats = _by_name(s)
        events = drain_all(s)
        ids = {st.probe.name: pid for pid, st in s.statuses().items()}
    assert set(stats) == {"span", "ksys", "to_ret", "from_ret"}  # the starts are no probes of the table
    span, ksys = stats["span"], stats["ksys"]
    assert (span.hits, ksys.hits) == (READS, READS)
    assert sum(span.hist) == READS
    # each of the workload's reads started and ended once: nothing unpaired,
    # replaced, lost or still waiting (the --pid filter applies to both ends)
    assert (span.span_starts, span.span_matched, span.span_unmatched, span.span_replaced, span.span_unkept,
            span.span_waiting) == (READS, READS, 0, 0, 0, 0)
    mine = [e for e in events if e.probe_id == ids["span"]]
    assert [e.values for e in mine] == [(SIZE,)] * READS
    assert all(e.pid == w.pid for e in mine)
    # the tracepoints are around the syscall's body, which holds ksys_read:
    # each span is at least as long as its ksys_read
    returns = [e for e in events if e.probe_id == ids["ksys"]]
    assert len(returns) == READS
    for span_event, ret in zip(sorted(mine, key=lambda e: e.ts_ns), sorted(returns, key=lambda e: e.ts_ns)):
        assert span_event.latency_ns >= ret.latency_ns > 0
    assert span.latency_sum_ns >= ksys.latency_sum_ns > 0
    # from the syscall's entry to ksys_read's return, and from that return to
    # the syscall's exit: each read once, in that order. (Not "the two add up
    # to at most the whole": each end's time is read by its own program at a
    # shared hit, and on a loaded machine the VM can be descheduled between
    # two programs of one hit: 1.4 ms over 9 reads once, under a CPU hog.)
    for name in ("to_ret", "from_ret"):
        st = stats[name]
        assert (st.hits, sum(st.hist), st.span_starts, st.span_matched, st.span_unmatched, st.unpaired) == \
            (READS,) * 4 + (0, 0), (name, st)
        assert [e.values for e in events if e.probe_id == ids[name]] == [(SIZE,)] * READS
        assert st.latency_sum_ns > 0
    to_ret = sorted((e for e in events if e.probe_id == ids["to_ret"]), key=lambda e: e.ts_ns)
    from_ret = sorted((e for e in events if e.probe_id == ids["from_ret"]), key=lambda e: e.ts_ns)
    # each read's ksys_read returned before its syscall's exit (two hits: their order is the kernel's)
    assert all(a.ts_ns < b.ts_ns for a, b in zip(to_ret, from_ret))
    assert all(a.ts_ns < b.ts_ns for a, b in zip(from_ret, to_ret[1:]))  # and the reads one after the other
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)


A, B = 3001, 3002
BY_VALUE = "sized=vfs_read:c:a3 since(vfs_write:c:a3)"


def _waiting_starts(session) -> int:
    """Starts in the kernel's table of waiting starts, every span's."""
    from ktui.kernel.maps import bpfsys

    return len(bpfsys.map_keys(session._engine._map("ktui_spans"), 8 + 8 * abi.SPAN_KEYS))


@pytest.mark.parametrize("events", [True, False], ids=["events", "export"])
def test_a_span_joined_by_a_value_pairs_each_start_with_the_first_end_of_its_key(workload, warm_cache, events):
    # four writes of A (each replacing the one before), then reads of B (no
    # start of their key), then of A: the first takes the last write's start.
    # With events off (`ktui export`) the same: the key is still read at
    # both ends, though no event holds it
    w = workload([[["write", A, 4], ["read", B, 2], ["read", A, 3]]])
    ps = ProbeSet("by-value", pid=w.pid, attach="kprobe")
    with Session(ps, SessionOptions(cache_dir=warm_cache, events=events)) as s:
        s.wait_loaded()
        # added live, as the dashboard's `a` does: no compile
        status = s.add_probe_now(parse_probe_text(BY_VALUE))
        wait_for(lambda: s.statuses()[status.probe_id].state is ProbeState.ATTACHED, "the span attached")
        w.run_phase()
        # the workload's "done" is a write too (5 bytes): a fifth start, still waiting
        wait_for(lambda: _by_name(s)["sized"].span_starts == 5, "every start counted")
        sized = _by_name(s)["sized"]
        written = drain_all(s)
        # (counted before it is stored: wait for the table too)
        wait_for(lambda: _waiting_starts(s) == 1, "the last start stored, waiting")
        s.remove_probe_now(status.probe_id)  # its waiting start goes with it
        assert _waiting_starts(s) == 0
    assert (sized.hits, sized.span_matched, sized.span_replaced, sized.span_unkept, sized.span_waiting) == \
        (1, 1, 3, 0, 1), sized
    # the reads of B and the last two of A found no start; so did every
    # other process's read (--pid leaves their starts out, not their ends)
    assert sized.span_unmatched >= 4 and sized.unpaired == 0
    if not events:
        assert (written, sized.emitted, sized.lost) == ([], 0, 0)
        return
    assert [(e.values, e.pid) for e in written] == [((A,), w.pid)]
    assert written[0].latency_ns > 0


@pytest.fixture
def loop_device(tmp_path):
    """A 1 MiB loop device (the loop module loaded where it is one), detached after."""
    subprocess.run(["modprobe", "loop"], check=False, capture_output=True)
    backing = tmp_path / "disk.img"
    backing.write_bytes(b"\xa5" * (1 << 20))
    dev = subprocess.run(["losetup", "--find", "--show", str(backing)], check=True, capture_output=True,
                         text=True).stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "--detach", dev], check=False)


BLOCK = """
name: block
probes:
  - spec: io=blk_mq_end_request:c:rq,dev=rq->part->bd_dev since(blk_mq_start_request:c:rq)
    filter: dev == {dev}
  - spec: pread=blkdev_read_iter:r:retval
"""
DIRECT_READS, BLOCK_SIZE = 100, 4096


def test_block_requests_from_start_to_end_by_their_request(workload, warm_cache, loop_device):
    rdev = os.stat(loop_device).st_rdev
    kdev = os.major(rdev) << 20 | os.minor(rdev)  # the kernel's dev_t (MKDEV), as bd_dev holds it
    w = workload([[["directread", loop_device, BLOCK_SIZE, DIRECT_READS]]])
    ps = dataclasses.replace(loads_probeset(BLOCK.format(dev=kdev)))
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()),
                 "the span (its start first) and the read probe attached")
        w.run_phase()
        wait_for(lambda: _by_name(s).get("io") is not None and _by_name(s)["io"].hits >= DIRECT_READS,
                 "every request's span")
        stats = _by_name(s)
        events = drain_all(s)
        ids = {st.probe.name: pid for pid, st in s.statuses().items()}
    io = stats["io"]
    assert io.hits == DIRECT_READS
    assert sum(io.hist) == DIRECT_READS
    assert (io.span_unkept, io.span_replaced) == (0, 0)
    spans = sorted((e for e in events if e.probe_id == ids["io"]), key=lambda e: e.ts_ns)
    assert len(spans) == DIRECT_READS
    # the reader's, though the request may end in an interrupt or a kworker
    assert {(e.pid, e.values[1]) for e in spans} == {(w.pid, kdev)}
    comm = spans[0].comm
    assert {e.comm for e in spans} == {comm} and io.top_comms == ((comm, DIRECT_READS),)
    preads = sorted((e for e in events if e.probe_id == ids["pread"] and e.pid == w.pid), key=lambda e: e.ts_ns)
    assert len(preads) == DIRECT_READS, (stats["pread"], Counter(e.pid for e in events if e.probe_id == ids["pread"]))
    # each request inside its own read: issued after the call began, ended before it returned
    for span, pread in zip(spans, preads):
        assert 0 < span.latency_ns <= pread.latency_ns
        assert pread.ts_ns - pread.latency_ns <= span.ts_ns - span.latency_ns
        assert span.ts_ns <= pread.ts_ns
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)


START_VALUES = """
name: start-values
probes:
  - label: asked
    spec: syscalls/sys_exit_read:t:ret,start.count
    since: syscalls/sys_enter_read:t
    count: comm
    sum: start.count
    hist: start.count
  - label: big
    spec: syscalls/sys_exit_read:t:ret
    since: syscalls/sys_enter_read:t
    filter: start.count > 2000
"""
BIG, SMALL, BAD, BAD_SIZE, SMALLS, BADS = 4111, 1777, "spanbad", 13, 6, 5


def test_an_ends_values_of_its_start_are_the_starts_exactly(workload, warm_cache):
    # each read asks its size at sys_enter_read; a bad read asks 13 bytes and
    # returns -EBADF: what the end sums is what was asked, not what it returned
    w = workload([[["comm", "spanbig"], ["read", BIG, READS], ["comm", BAD], ["badread", BADS],
                   ["comm", "spansmall"], ["read", SMALL, SMALLS]]])
    ps = dataclasses.replace(loads_probeset(START_VALUES), pid=w.pid)
    with Session(ps, SessionOptions(cache_dir=warm_cache)) as s:
        wait_for(lambda: all(st.state is ProbeState.ATTACHED for st in s.statuses().values()),
                 "both spans (their starts first) attached")
        # a kprobe's start reading a parameter by BTF, added live (the dashboard's `a`)
        live = s.add_probe_now(parse_probe_text(
            "few=ksys_read:r:retval,asked=start.count since(ksys_read:c) sum(start.count) if start.count < 100"))
        wait_for(lambda: s.statuses()[live.probe_id].state is ProbeState.ATTACHED, "the live span attached")
        w.run_phase()
        total = READS + BADS + SMALLS
        wait_for(lambda: _by_name(s).get("asked") is not None and _by_name(s)["asked"].hits >= total
                 and _by_name(s)["few"].hits >= BADS, "every read's span")
        stats = _by_name(s)
        events = drain_all(s)
        ids = {st.probe.name: pid for pid, st in s.statuses().items()}
        names = [f.name for f in s.statuses()[ids["asked"]].probe.fetches]
    asked = stats["asked"]
    assert (asked.hits, asked.span_matched, asked.span_unmatched) == (total, total, 0)
    # per process: the reads and the bytes each asked for (-EBADF's 13 included)
    assert sorted(asked.top_values) == sorted([(("spanbig",), READS, READS * BIG),
                                               ((BAD,), BADS, BADS * BAD_SIZE),
                                               (("spansmall",), SMALLS, SMALLS * SMALL)]), asked.top_values
    expected = [0] * len(asked.value_hist)
    for size, n in ((BIG, READS), (BAD_SIZE, BADS), (SMALL, SMALLS)):
        expected[slot_of(size)] += n
    assert list(asked.value_hist) == expected
    assert asked.value_hist_sum == READS * BIG + BADS * BAD_SIZE + SMALLS * SMALL
    # each event: what the read returned, then what it asked for, under that name
    mine = sorted((e for e in events if e.probe_id == ids["asked"]), key=lambda e: e.ts_ns)
    assert [e.values for e in mine] == [(BIG, BIG)] * READS + [(-9, BAD_SIZE)] * BADS + [(SMALL, SMALL)] * SMALLS
    assert names == ["ret", "start.count"]
    # the filter on the start's value passes exactly the big reads
    big = stats["big"]
    assert (big.hits, big.span_matched) == (READS, total), big
    assert [e.values for e in events if e.probe_id == ids["big"]] == [(BIG,)] * READS
    # by BTF at a kprobe's start: ksys_read's count, carried to its return
    few = stats["few"]
    assert (few.hits, few.top_values) == (BADS, (((), BADS, BADS * BAD_SIZE),)), few
    assert [e.values for e in events if e.probe_id == ids["few"]] == [(-9, BAD_SIZE)] * BADS
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)
