"""PerfBufReader against a real kernel: runs INSIDE the VM, as root.

    scripts/vm.sh -- '.venv/bin/pytest -q tests/kernel/test_perfbuf.py'

One kprobe on vfs_read, filtered in the kernel to this process (ctl[0] holds
the tgid to trace; 0 = off, so pytest's own reads between tests are not
traced). Every output failure is counted per CPU in the kernel, and every
record carries a per-CPU sequence number with the CPU in its top 16 bits, so
loss, duplication, corruption and a record filed under the wrong CPU all show.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest

from ktui.kernel.buffers.perfbuf import PerfBufReader, sample_size

pytestmark = [
    pytest.mark.kernel,
    # bcc 0.26 warns about every str argument; not ours to fix.
    pytest.mark.filterwarnings("ignore::DeprecationWarning:bcc"),
]

PROGRAM = r"""
#include <uapi/linux/ptrace.h>

struct rec {
    u64 ts;
    u32 pid;
    u32 tid;
    u64 arg3;
    char comm[16];
    u64 seq;        /* cpu << 48 | per-cpu sequence number */
};

BPF_PERF_OUTPUT(events);
BPF_ARRAY(ctl, u32, 1);
BPF_PERCPU_ARRAY(seqno, u64, 1);
BPF_PERCPU_ARRAY(lost, u64, 1);

int on_vfs_read(struct pt_regs *ctx)
{
    u32 zero = 0;
    u32 *target = ctl.lookup(&zero);
    u64 id = bpf_get_current_pid_tgid();
    if (!target || *target == 0 || (u32)(id >> 32) != *target)
        return 0;
    u64 *seq = seqno.lookup(&zero);
    if (!seq)
        return 0;
    struct rec r = {};
    r.ts = bpf_ktime_get_ns();
    r.pid = id >> 32;
    r.tid = (u32)id;
    r.arg3 = PT_REGS_PARM3(ctx);
    bpf_get_current_comm(&r.comm, sizeof(r.comm));
    /* kprobe programs run with migration off and do not nest: a per-CPU
       counter needs no atomics. */
    r.seq = ((u64)bpf_get_smp_processor_id() << 48) | *seq;
    *seq += 1;
    if (events.perf_submit(ctx, &r, sizeof(r)) != 0) {
        u64 *n = lost.lookup(&zero);
        if (n)
            *n += 1;
    }
    return 0;
}
"""

REC = np.dtype(
    [("ts", "<u8"), ("pid", "<u4"), ("tid", "<u4"), ("arg3", "<u8"), ("comm", "S16"), ("seq", "<u8")]
)
RECORD_SIZE = 48
SEQ_MASK = (1 << 48) - 1
assert REC.itemsize == RECORD_SIZE


@pytest.fixture(scope="module")
def bpf():
    from bcc import BPF

    b = BPF(text=PROGRAM)
    b.attach_kprobe(event="vfs_read", fn_name="on_vfs_read")
    yield b
    b.cleanup()


@pytest.fixture
def probe(bpf):
    """Zeroed counters; tracing off until the test switches it on."""
    bpf["seqno"].clearitem(0)
    bpf["lost"].clearitem(0)
    bpf["ctl"][ctypes.c_int(0)] = ctypes.c_uint32(0)
    readers = []

    def open_reader(page_cnt):
        reader = PerfBufReader(bpf, "events", RECORD_SIZE, page_cnt=page_cnt)
        readers.append(reader)
        return reader

    yield open_reader
    bpf["ctl"][ctypes.c_int(0)] = ctypes.c_uint32(0)
    for reader in readers:
        reader.close()


def trace_on(bpf):
    bpf["ctl"][ctypes.c_int(0)] = ctypes.c_uint32(os.getpid())


def trace_off(bpf):
    bpf["ctl"][ctypes.c_int(0)] = ctypes.c_uint32(0)


def kernel_lost(bpf) -> int:
    return int(sum(bpf["lost"][ctypes.c_int(0)]))


def read_zero(fd: int, size: int, times: int) -> None:
    # Nothing but os.read between trace_on and trace_off: no imports, no
    # file access, so every traced vfs_read is one of ours.
    for _ in range(times):
        os.read(fd, size)


def as_rec(raw) -> np.ndarray:
    """A drain (record.raw.RawRecords) of the one-size program's records."""
    assert raw.sizes in ([], [RECORD_SIZE])
    return raw.of_size(RECORD_SIZE).view(REC)


def check_identity(recs: np.ndarray) -> None:
    assert np.all(recs["pid"] == os.getpid())
    assert np.all(recs["tid"] == os.getpid())  # pytest runs single-threaded
    comm = open("/proc/self/comm", "rb").read().strip()[:15]
    assert np.all(recs["comm"] == comm)


@pytest.fixture
def dev_zero():
    fd = os.open("/dev/zero", os.O_RDONLY)
    yield fd
    os.close(fd)


def pin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})


@pytest.fixture
def restore_affinity():
    saved = os.sched_getaffinity(0)
    yield
    os.sched_setaffinity(0, saved)


def test_sample_size_matches_kernel_padding():
    # u32 rawsize + data is padded to 8 bytes: 8 + 4 + 48 + 4 for our record.
    assert sample_size(48) == 64
    assert sample_size(40) == 56
    assert sample_size(44) == 56


def test_exact_delivery_of_999_reads(bpf, probe, dev_zero):
    reader = probe(page_cnt=64)
    trace_on(bpf)
    read_zero(dev_zero, 1, 333)
    read_zero(dev_zero, 7, 333)
    read_zero(dev_zero, 4096, 333)
    trace_off(bpf)

    # 999 samples of exactly 8 (header) + 4 (rawsize) + 48 + 4 (padding) bytes.
    assert reader.pending_bytes() == 999 * 64
    by_cpu = reader.drain_by_cpu()
    assert reader.walked_batches == 0, "the numpy fast path rejected plain samples"
    total = sum(len(batch) for batch in by_cpu.values())
    assert total == 999
    assert kernel_lost(bpf) == 0
    assert reader.lost_notified == 0
    assert reader.skipped_records == 0
    assert reader.pending_bytes() == 0

    recs = np.concatenate([as_rec(batch) for batch in by_cpu.values()])
    sizes, counts = np.unique(recs["arg3"], return_counts=True)
    assert dict(zip(sizes.tolist(), counts.tolist())) == {1: 333, 7: 333, 4096: 333}
    check_identity(recs)
    for cpu, batch in by_cpu.items():
        r = as_rec(batch)
        assert np.all(r["seq"] >> 48 == cpu), "record filed under the wrong CPU"
        # Per CPU: sequence numbers 0..n-1 in ring order, timestamps rising.
        assert np.array_equal(r["seq"] & SEQ_MASK, np.arange(len(r)))
        assert np.all(np.diff(r["ts"].astype(np.int64)) > 0)
    # The sizes come in program order 1, 7, 4096 when merged by time.
    merged = recs[np.argsort(recs["ts"], kind="stable")]
    assert merged["arg3"].tolist() == [1] * 333 + [7] * 333 + [4096] * 333

    # drain() gives the same records, concatenated, and the ring is now empty.
    assert len(reader.drain()) == 0


def test_overflow_accounting(bpf, probe, dev_zero, restore_affinity):
    """What the kernel does when a perf ring is full, checked exactly.

    - A sample that does not fit is dropped whole: bpf_perf_event_output()
      returns nonzero (-ENOSPC), so the in-kernel counter sees every drop,
      and delivered + dropped == generated.
    - The ring never fills completely: the kernel wants CIRC_SPACE >= size,
      and CIRC_SPACE of an empty ring is data_size - 1. A ring of N bytes
      holds N // 64 - 1 of our 64-byte samples.
    - The kernel keeps the drop count to itself until a later sample fits;
      only then it writes one PERF_RECORD_LOST (the whole count so far) just
      before that sample. Draining alone reports nothing: lost_notified
      catches up with the in-kernel counter after one more event per CPU.
    """
    cpu = sorted(os.sched_getaffinity(0))[0]
    pin(cpu)
    reader = probe(page_cnt=2)
    trace_on(bpf)
    read_zero(dev_zero, 1, 20000)
    trace_off(bpf)

    delivered = as_rec(reader.drain())
    lost = kernel_lost(bpf)
    assert len(delivered) + lost == 20000
    assert len(delivered) == reader.data_size // reader.stride - 1
    assert reader.lost_notified == 0  # nothing written since the ring filled
    assert np.array_equal(delivered["seq"] & SEQ_MASK, np.arange(len(delivered)))

    # One more event, now that there is room: it brings the LOST record.
    trace_on(bpf)
    read_zero(dev_zero, 1, 1)
    trace_off(bpf)
    after = as_rec(reader.drain())
    assert len(after) == 1
    assert int((after["seq"] & SEQ_MASK)[0]) == 20000  # the seqs in between were dropped
    assert kernel_lost(bpf) == lost
    assert reader.lost_notified == lost
    check_identity(np.concatenate([delivered, after]))


def test_records_survive_wrapping(bpf, probe, dev_zero, restore_affinity):
    """Bursts interleaved with drains push every record through the
    two-page ring many times, with records straddling its end.

    Our 64-byte samples divide the ring size, so they wrap only at a record
    boundary, until a 24-byte PERF_RECORD_LOST shifts them: the middle of
    the test overflows once on purpose, after which samples cross the end
    of the ring and must be reassembled from two copies."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    pin(cpu)
    reader = probe(page_cnt=2)
    capacity = reader.data_size // reader.stride - 1
    got = []
    straddling_drains = 0
    generated = 0

    def drain():
        nonlocal straddling_drains
        tail, head = reader.positions()[cpu]
        start = tail % reader.data_size
        if start + (head - tail) > reader.data_size and (reader.data_size - start) % reader.stride:
            straddling_drains += 1
        got.append(as_rec(reader.drain()))

    bursts = [97, 1, capacity, 50, 113] * 6 + [capacity * 3] + [97, 1, capacity, 50, 113] * 6
    for n in bursts:
        trace_on(bpf)
        read_zero(dev_zero, 1, n)
        trace_off(bpf)
        generated += n
        drain()
    # The LOST count of the overflow burst arrives with the next burst.
    recs = np.concatenate(got)
    lost = kernel_lost(bpf)

    assert len(recs) + lost == generated
    assert lost > 0 and reader.lost_notified == lost
    assert reader.walked_batches == 1  # only the batch holding the LOST record
    assert reader.stride * len(recs) > 20 * reader.data_size  # wrapped many times
    assert straddling_drains > 0, "no record ever crossed the end of the ring"
    check_identity(recs)
    assert np.all(recs["arg3"] == 1)
    assert np.all(recs["seq"] >> 48 == cpu)
    seq = (recs["seq"] & SEQ_MASK).astype(np.int64)
    steps = np.diff(seq)
    assert np.all(steps >= 1), "records out of order or duplicated"
    # Exactly one gap, of exactly the dropped count.
    assert int((steps - 1).sum()) == lost
    assert np.count_nonzero(steps > 1) == 1


def test_max_records_and_close(bpf, probe, dev_zero):
    reader = probe(page_cnt=64)
    trace_on(bpf)
    read_zero(dev_zero, 1, 300)
    trace_off(bpf)
    first = as_rec(reader.drain(max_records=100))
    assert len(first) == 100
    rest = as_rec(reader.drain())
    assert len(rest) == 200
    seqs = np.sort(np.concatenate([first, rest])["seq"])
    assert len(np.unique(seqs)) == 300
    reader.close()
    reader.close()  # idempotent
    # After close the map entries are gone: output fails and is counted.
    trace_on(bpf)
    read_zero(dev_zero, 1, 10)
    trace_off(bpf)
    assert kernel_lost(bpf) == 10


def test_lost_record_between_samples(bpf, probe, dev_zero, restore_affinity):
    """A PERF_RECORD_LOST in the middle of a batch: the samples on both sides
    still come out, in order, and the LOST count is taken."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    pin(cpu)
    reader = probe(page_cnt=2)
    capacity = reader.data_size // reader.stride - 1
    trace_on(bpf)
    read_zero(dev_zero, 1, capacity + 100)  # fills the ring, then 100 fail
    trace_off(bpf)
    head = as_rec(reader.drain(max_records=10))  # frees room for the LOST + 5
    trace_on(bpf)
    read_zero(dev_zero, 1, 5)
    trace_off(bpf)
    rest = as_rec(reader.drain())  # capacity - 10 samples, LOST, 5 samples

    assert len(head) == 10 and len(rest) == capacity - 10 + 5
    assert reader.walked_batches == 1
    assert kernel_lost(bpf) == 100 and reader.lost_notified == 100
    seq = (np.concatenate([head, rest])["seq"] & SEQ_MASK).astype(np.int64)
    expected = np.concatenate([np.arange(capacity), np.arange(capacity + 100, capacity + 105)])
    assert np.array_equal(seq, expected)
    check_identity(np.concatenate([head, rest]))


# The same probe writing records of 48, 64 and 80 bytes in turn (by its
# per-CPU sequence number): each probe's records are as long as its own
# fields, so one buffer holds several sizes.
MIXED = PROGRAM.replace("    u64 seq;        /* cpu << 48 | per-cpu sequence number */\n};",
                        "    u64 seq;        /* cpu << 48 | per-cpu sequence number */\n    u64 more[4];\n};") \
    .replace("    if (events.perf_submit(ctx, &r, sizeof(r)) != 0) {",
             "    u64 k = r.seq & 0xffffffffffffULL;\n"
             "    r.more[0] = r.more[1] = r.more[2] = r.more[3] = k;\n"
             "    int rc;\n"
             "    if (k % 3 == 0)\n        rc = events.perf_submit(ctx, &r, 48);\n"
             "    else if (k % 3 == 1)\n        rc = events.perf_submit(ctx, &r, 64);\n"
             "    else\n        rc = events.perf_submit(ctx, &r, 80);\n"
             "    if (rc != 0) {")
assert MIXED.count("more[4]") == 1 and "rc = events.perf_submit(ctx, &r, 80)" in MIXED


@pytest.fixture(scope="module")
def bpf_mixed():
    from bcc import BPF

    b = BPF(text=MIXED)
    b.attach_kprobe(event="vfs_read", fn_name="on_vfs_read")
    yield b
    b.cleanup()


def mixed_records(raw) -> tuple[np.ndarray, np.ndarray]:
    """The records' first 48 bytes in order, and each one's size; each holds
    its own number as far as it goes (no other record's bytes)."""
    heads = np.empty(len(raw), dtype=REC)
    sizes = np.empty(len(raw), dtype=np.int64)
    order = raw.order if raw.order is not None else np.zeros(len(raw), dtype=np.uint8)
    for k, group in enumerate(raw.groups):
        size = group.dtype.itemsize
        words = np.frombuffer(group.tobytes(), dtype="<u8").reshape(len(group), size // 8)
        heads[order == k] = np.frombuffer(np.ascontiguousarray(words[:, :6]).tobytes(), dtype=REC)
        sizes[order == k] = size
        assert (words[:, 6:] == (words[:, 5] & SEQ_MASK)[:, None]).all()
    return heads, sizes


def test_records_of_three_sizes_with_a_lost_record_between_them(bpf_mixed, dev_zero, restore_affinity):
    """On one CPU: bursts of all three sizes, drained in turn, wrap a
    two-page ring many times; one burst overflows it, and the LOST record
    the kernel writes later comes between samples of several sizes."""
    cpu = sorted(os.sched_getaffinity(0))[0]
    pin(cpu)
    bpf = bpf_mixed
    bpf["seqno"].clearitem(0)
    bpf["lost"].clearitem(0)
    reader = PerfBufReader(bpf, "events", RECORD_SIZE, page_cnt=2)
    try:
        got_heads, got_sizes = [], []
        bursts = [1, 2, 3, 40, 7] * 8 + [300] + [1, 2, 3, 40, 7] * 8
        for n in bursts:
            trace_on(bpf)
            read_zero(dev_zero, 1, n)
            trace_off(bpf)
            heads, sizes = mixed_records(reader.drain())
            got_heads.append(heads)
            got_sizes.append(sizes)
        heads, sizes = np.concatenate(got_heads), np.concatenate(got_sizes)
        lost = kernel_lost(bpf)
        assert lost > 0 and reader.lost_notified == lost
        assert len(heads) + lost == sum(bursts)
        assert reader.skipped_records == 0
        check_identity(heads)
        seq = (heads["seq"] & SEQ_MASK).astype(np.int64)
        assert (heads["seq"] >> 48 == cpu).all()
        assert (sizes == np.asarray([48, 64, 80])[seq % 3]).all(), "a record of the wrong size"
        steps = np.diff(seq)
        assert (steps >= 1).all(), "records out of order or twice"
        assert int((steps - 1).sum()) == lost and np.count_nonzero(steps > 1) == 1
        assert set(sizes.tolist()) == {48, 64, 80}
    finally:
        reader.close()
