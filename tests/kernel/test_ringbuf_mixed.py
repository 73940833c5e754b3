"""RingBufReader against a real kernel's BPF ring buffer, with records of
several sizes; and the programs submit without waking anyone. Runs INSIDE
the VM, as root.

    /work/tools/vmtest tests/kernel/test_ringbuf_mixed.py

A kprobe on vfs_read, filtered in the kernel to this process (ctl[0] holds
the tgid, 0 = off), writes records of 48, 64 and 80 bytes in turn (by a
per-CPU sequence number, with the CPU in its top 16 bits) into a ring of
four pages, so records of every size wrap many times. Every failed output is
counted in the kernel: delivered + failed == generated, exactly.

Wakeups: the collector drains on a timer and never polls the ring, so
ktui's programs pass BPF_RB_NO_WAKEUP. Nothing of ours polls, so the proof
is a poller of our own (epoll on the ring's map fd): with the flag, records
arrive and it stays asleep; with flags 0 (the control) it is woken.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import select
import time

import numpy as np
import pytest

from ktui.kernel.buffers.ringbuf import RingBufReader

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning:bcc")]

PAGES = 4
PROGRAM = r"""
#include <uapi/linux/ptrace.h>

struct rec {
    u64 ts;
    u32 pid;
    u32 tid;
    u64 arg3;
    char comm[16];
    u64 seq;        /* cpu << 48 | per-cpu sequence number */
    u64 more[4];    /* the sequence number again, as far as the record goes */
};

BPF_RINGBUF_OUTPUT(events, PAGES);
BPF_ARRAY(ctl, u64, 2);          /* [0] tgid to trace (0: off), [1] ringbuf_output flags */
BPF_PERCPU_ARRAY(seqno, u64, 1);
BPF_PERCPU_ARRAY(lost, u64, 1);

int on_vfs_read(struct pt_regs *ctx)
{
    u32 zero = 0, one = 1;
    u64 *target = ctl.lookup(&zero);
    u64 *flags = ctl.lookup(&one);
    u64 id = bpf_get_current_pid_tgid();
    if (!target || !flags || *target == 0 || (id >> 32) != *target)
        return 0;
    u64 *seq = seqno.lookup(&zero);
    if (!seq)
        return 0;
    struct rec r = {};
    u64 n = *seq;
    *seq += 1;
    r.ts = bpf_ktime_get_ns();
    r.pid = id >> 32;
    r.tid = (u32)id;
    r.arg3 = PT_REGS_PARM3(ctx);
    bpf_get_current_comm(&r.comm, sizeof(r.comm));
    r.seq = ((u64)bpf_get_smp_processor_id() << 48) | n;
    r.more[0] = r.more[1] = r.more[2] = r.more[3] = n;
    int rc;
    if (n % 3 == 0)
        rc = events.ringbuf_output(&r, 48, *flags);
    else if (n % 3 == 1)
        rc = events.ringbuf_output(&r, 64, *flags);
    else
        rc = events.ringbuf_output(&r, 80, *flags);
    if (rc != 0) {
        u64 *k = lost.lookup(&zero);
        if (k)
            *k += 1;
    }
    return 0;
}
""".replace("PAGES);", f"{PAGES});")

HEAD = np.dtype([("ts", "<u8"), ("pid", "<u4"), ("tid", "<u4"), ("arg3", "<u8"), ("comm", "S16"),
                 ("seq", "<u8")])
SEQ_MASK = (1 << 48) - 1
NO_WAKEUP = 1  # BPF_RB_NO_WAKEUP


@pytest.fixture(scope="module")
def bpf():
    from bcc import BPF

    b = BPF(text=PROGRAM)
    b.attach_kprobe(event="vfs_read", fn_name="on_vfs_read")
    yield b
    b.cleanup()


@pytest.fixture
def ring(bpf):
    """A reader of the ring, counters zeroed, tracing off until asked."""
    bpf["seqno"].clearitem(0)
    bpf["lost"].clearitem(0)
    set_ctl(bpf, 0, 0)
    set_ctl(bpf, 1, NO_WAKEUP)
    reader = RingBufReader(bpf["events"].map_fd, PAGES * 4096)
    reader.drain()  # whatever an earlier test left
    yield reader
    set_ctl(bpf, 0, 0)
    reader.close()


def set_ctl(bpf, index: int, value: int) -> None:
    bpf["ctl"][ctypes.c_int(index)] = ctypes.c_uint64(value)


def read_zero(bpf, fd: int, times: int) -> None:
    # Nothing but os.read while tracing: every traced vfs_read is one of ours.
    set_ctl(bpf, 0, os.getpid())
    for _ in range(times):
        os.read(fd, 1)
    set_ctl(bpf, 0, 0)


def kernel_lost(bpf) -> int:
    return int(sum(bpf["lost"][ctypes.c_int(0)]))


def generated(bpf) -> int:
    return int(sum(bpf["seqno"][ctypes.c_int(0)]))


@pytest.fixture
def dev_zero():
    fd = os.open("/dev/zero", os.O_RDONLY)
    yield fd
    os.close(fd)


def records(raw) -> tuple[np.ndarray, np.ndarray]:
    """Every record's first 48 bytes, in ring order, and each one's size."""
    heads = np.empty(len(raw), dtype=HEAD)
    sizes = np.empty(len(raw), dtype=np.int64)
    order = raw.order if raw.order is not None else np.zeros(len(raw), dtype=np.uint8)
    for k, group in enumerate(raw.groups):
        size = group.dtype.itemsize
        words = np.frombuffer(group.tobytes(), dtype="<u8").reshape(len(group), size // 8)
        rows = order == k
        heads[rows] = np.frombuffer(np.ascontiguousarray(words[:, :6]).tobytes(), dtype=HEAD)
        sizes[rows] = size
        # the record's own number as far as it goes: no other record's bytes
        assert (words[:, 6:] == (words[:, 5] & SEQ_MASK)[:, None]).all()
    return heads, sizes


def check(heads: np.ndarray, sizes: np.ndarray) -> None:
    """Each record has its own size (by its number), and each CPU's come in
    ring order with no number twice."""
    n = (heads["seq"] & SEQ_MASK).astype(np.int64)
    assert (sizes == np.asarray([48, 64, 80])[n % 3]).all(), "a record of the wrong size"
    for cpu in np.unique(heads["seq"] >> 48):
        mine = n[heads["seq"] >> 48 == cpu]
        assert (np.diff(mine) >= 1).all(), "records out of ring order, or twice"
    assert (heads["pid"] == os.getpid()).all()


def test_three_sizes_come_out_exactly_and_in_order_across_many_wraps(bpf, ring, dev_zero):
    got_heads, got_sizes = [], []
    for burst in [1, 2, 3, 50, 100, 7, 150, 33] * 12:  # a ring of 4 pages holds ~230
        read_zero(bpf, dev_zero, burst)
        raw = ring.drain()
        heads, sizes = records(raw)
        got_heads.append(heads)
        got_sizes.append(sizes)
    heads, sizes = np.concatenate(got_heads), np.concatenate(got_sizes)
    total = generated(bpf)
    assert total == sum([1, 2, 3, 50, 100, 7, 150, 33] * 12)
    assert len(heads) + kernel_lost(bpf) == total
    assert kernel_lost(bpf) == 0  # every burst fits: nothing lost
    assert set(sizes.tolist()) == {48, 64, 80}
    assert sum(sizes + 8) > 10 * PAGES * 4096  # wrapped many times (18: 4 pages, 4212 records)
    check(heads, sizes)
    assert ring.pending_bytes() == 0


def test_an_overflowing_burst_is_counted_and_the_rest_read(bpf, ring, dev_zero):
    read_zero(bpf, dev_zero, 2000)  # far more than the ring holds
    heads, sizes = records(ring.drain())
    lost = kernel_lost(bpf)
    assert lost > 0 and len(heads) + lost == 2000
    check(heads, sizes)
    read_zero(bpf, dev_zero, 10)  # room again
    heads, sizes = records(ring.drain())
    assert len(heads) == 10 and kernel_lost(bpf) == lost
    check(heads, sizes)


def wait_for(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_no_wakeup_leaves_a_poller_asleep_and_flags_0_wake_it(bpf, ring, dev_zero):
    fd = bpf["events"].map_fd
    with select.epoll() as ep:
        ep.register(fd, select.EPOLLIN)
        assert ep.poll(0) == []  # empty ring
        read_zero(bpf, dev_zero, 30)  # BPF_RB_NO_WAKEUP
        assert wait_for(lambda: ring.pending_bytes() > 0)
        assert ep.poll(0.5) == [], "a record submitted with BPF_RB_NO_WAKEUP woke the poller"
        assert len(ring.drain()) == 30
        set_ctl(bpf, 1, 0)  # the control: adaptive wakeups, as before
        read_zero(bpf, dev_zero, 30)
        assert ep.poll(5.0), "flags 0 did not wake the poller: the check above proves nothing"
        assert len(ring.drain()) == 30


@pytest.mark.parametrize("engine", ["generic", "compiled"])
def test_ktui_programs_submit_without_waking_anyone(engine, workload, tmp_path):
    """The generic program (program.c) and a compiled one (codegen's
    runtime) pass BPF_RB_NO_WAKEUP: their events arrive, and a poller of
    the ring stays asleep."""
    from ktui.kernel.session import Session, SessionOptions
    from ktui.lang.probeset import loads_probeset

    w = workload([[["read", 3, 50]]])
    ps = dataclasses.replace(loads_probeset("name: w\nprobes:\n  - spec: vfs_read:c:a3\n"), pid=w.pid)
    with Session(ps, SessionOptions(engine=engine)) as s:
        s.wait_loaded()
        if engine == "generic":
            fd = s._engine.program.maps["ktui_events"]
            pending = s._engine.reader.pending_bytes
        else:
            unit = s._units[0]
            fd = unit.bpf[b"ktui_events"].map_fd
            pending = unit.reader.pending_bytes
        s.drain()
        with select.epoll() as ep:
            ep.register(fd, select.EPOLLIN)
            assert ep.poll(0) == []
            w.run_phase()
            assert wait_for(lambda: pending() > 0)
            assert ep.poll(0.5) == [], f"the {engine} program's events woke the poller"
        events = s.drain().events()
        assert [e.values for e in events] == [(3,)] * 50
