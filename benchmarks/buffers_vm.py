"""Perf buffers (ktui.kernel.buffers.perfbuf) vs the BPF ring buffer (ktui.kernel.buffers.ringbuf), batch-read.

Run inside the VM, as root:

    scripts/vm.sh -- 'python benchmarks/buffers_vm.py'
    scripts/vm.sh -- 'python benchmarks/buffers_vm.py --reads 1000000 --repeat 2 --json bench-out/buffers.json'

One kprobe on vfs_read, filtered in the kernel to one pid: a forked child
that does N one-byte reads of /dev/zero and nothing else (it waits for its
start signal with sigwait, and reports with write(2), so none of its own
bookkeeping is traced). The parent drains on a fixed timer, as ktui does,
and never polls. The BPF program counts every failed output per CPU, so
delivered + failed must equal N exactly; the script checks it.

Modes: perf and ring as ktui used them before records of several sizes
(48-byte records; ring with flags 0, so a record landing in a drained ring
wakes pollers), ringnw (BPF_RB_NO_WAKEUP, what ktui's programs pass now),
ringmix and perfmix (records of 48 and 64 bytes in turn, read by the same
readers: the cost of several sizes).

Reported per mode: the child's loop time and its slowdown against the same
loop with no probe ("none"), delivered share, drained events/s (delivered
over the child's loop time), and the consumer's CPU per delivered event and
as a share of one core, and the irq_work interrupts during the run (a ring
record submitted without BPF_RB_NO_WAKEUP into a drained ring raises one).
Under TCG only ratios within one run mean anything.

Losses are also classified from the records' per-CPU sequence numbers (see
classify_losses): "full" when the ring may have been full at the time,
"not-full" when the drain that followed proves it was not, and "1-gaps"
counts runs of exactly one lost event.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ktui.kernel.buffers.perfbuf import PerfBufReader, sample_size  # noqa: E402
from ktui.kernel.buffers.ringbuf import RingBufReader  # noqa: E402

RECORD_SIZE = 48
SEQ_VIEW = np.dtype([("head", "V40"), ("seq", "<u8")])  # the record's last field

PROGRAM = r"""
#include <uapi/linux/ptrace.h>
#include <linux/sched.h>

struct rec {
    u64 ts;
    u32 pid;
    u32 tid;
    u64 arg3;
    char comm[16];
    u64 seq;
    u64 more[2];    /* the mixed modes' 64-byte records */
};

OUTPUT_DECL
BPF_ARRAY(ctl, u32, 1);          /* [0]: tgid to trace, 0 = off */
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
    r.seq = ((u64)bpf_get_smp_processor_id() << 48) | *seq;   /* per-CPU, CPU on top */
    *seq += 1;
    if (OUTPUT_CALL != 0) {
        u64 *n = lost.lookup(&zero);
        if (n)
            *n += 1;
    }
    return 0;
}
"""

RING = "BPF_RINGBUF_OUTPUT(events, RING_PAGES);"
OUTPUTS = {
    "perf": ("BPF_PERF_OUTPUT(events);", "events.perf_submit(ctx, &r, 48)"),
    # flags 0: a wakeup when a record lands in a drained ring (ktui before BPF_RB_NO_WAKEUP)
    "ring": (RING, "events.ringbuf_output(&r, 48, 0)"),
    "ringnw": (RING, "events.ringbuf_output(&r, 48, BPF_RB_NO_WAKEUP)"),
    # records of 48 and 64 bytes in turn
    "ringmix": (RING, "((r.seq & 1) ? events.ringbuf_output(&r, 64, BPF_RB_NO_WAKEUP) "
                      ": events.ringbuf_output(&r, 48, BPF_RB_NO_WAKEUP))"),
    "perfmix": ("BPF_PERF_OUTPUT(events);",
                "((r.seq & 1) ? events.perf_submit(ctx, &r, 64) : events.perf_submit(ctx, &r, 48))"),
}


def compile_program(mode: str, ring_pages: int):
    """Compile with clang's warnings kept out of our output (fd 2 to a file)."""
    from bcc import BPF

    decl, call = OUTPUTS[mode]
    text = PROGRAM.replace("OUTPUT_DECL", decl.replace("RING_PAGES", str(ring_pages)))
    text = text.replace("OUTPUT_CALL", call)
    saved = os.dup(2)
    with open(f"/tmp/buffers_vm-clang-{mode}.log", "w") as log:
        os.dup2(log.fileno(), 2)
        try:
            return BPF(text=text.encode())
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def start_child(reads: int):
    """Fork the workload; it waits for SIGUSR1, does `reads` one-byte reads,
    writes its loop time in ns and exits. Returns (pid, result_fd)."""
    ready_r, ready_w = os.pipe()
    result_r, result_w = os.pipe()
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            fd = os.open("/dev/zero", os.O_RDONLY)
            os.write(ready_w, b"r")
            signal.sigwait({signal.SIGUSR1})
            t0 = time.perf_counter_ns()
            for _ in range(reads):
                os.read(fd, 1)
            t1 = time.perf_counter_ns()
            os.write(result_w, str(t1 - t0).encode())
            code = 0
        finally:
            os._exit(code)  # never return into the parent's code
    signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    os.close(ready_w)
    os.close(result_w)
    assert os.read(ready_r, 1) == b"r"
    os.close(ready_r)
    return pid, result_r


def finish_child(pid: int, result_fd: int) -> float:
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    ns = int(os.read(result_fd, 64))
    os.close(result_fd)
    return ns / 1e9


def classify_losses(seq_batches: list, sizes: list, nbytes: list, stride: int, capacity: int,
                    generated: list) -> dict:
    """Where were events lost? Per CPU, a gap in the sequence numbers is a
    run of failed outputs, between the record before the gap (returned by
    drain a) and the one after it (drain b). While they failed, no ring held
    more than drains a-1 .. b returned together (drain a-1 frees its records
    only when it ends). A gap whose bound is below a full ring is a loss
    that was NOT for lack of space. For perf buffers the bound adds up all
    CPUs, so it is loose, never too small.
    """
    seqs = np.concatenate(seq_batches)
    drain_no = np.concatenate([np.full(n, i) for i, n in enumerate(sizes)])
    upto = np.concatenate([[0], np.cumsum(np.array(nbytes, dtype=np.int64))])

    def is_full(a: int, b: int) -> bool:  # drains a-1 .. b, clipped
        return upto[min(b, len(sizes) - 1) + 1] - upto[max(a - 1, 0)] >= capacity - 2 * stride

    out = {"gaps": 0, "single_gaps": 0, "lost_ring_full": 0, "lost_ring_not_full": 0, "duplicates": 0}

    def count(missing: int, a: int, b: int) -> None:
        out["lost_ring_full" if is_full(a, b) else "lost_ring_not_full"] += missing

    for cpu, made in enumerate(generated):
        if not made:
            continue
        mine = seqs >> 48 == cpu
        if not mine.any():
            count(made, 0, len(sizes) - 1)
            continue
        n = (seqs[mine] & ((1 << 48) - 1)).astype(np.int64)
        drains = drain_no[mine]
        order = np.argsort(n, kind="stable")
        n, drains = n[order], drains[order]
        steps = np.diff(n)
        out["duplicates"] += int(np.sum(steps == 0))
        gaps = np.flatnonzero(steps > 1)
        out["gaps"] += len(gaps)
        out["single_gaps"] += int(np.sum(steps[gaps] == 2))
        for g in gaps:
            count(int(steps[g] - 1), int(drains[g]), int(drains[g + 1]))
        if n[0] > 0:  # lost before this CPU's first delivered record
            count(int(n[0]), 0, int(drains[0]))
        if made - 1 > n[-1]:  # lost after its last one
            count(int(made - 1 - n[-1]), int(drains[-1]), len(sizes) - 1)
    return out


def seq_in_order(raw) -> np.ndarray:
    """The records' sequence numbers (bytes 40..48 of each), in arrival order."""
    out = np.empty(len(raw), dtype=np.uint64)
    order = raw.order if raw.order is not None else np.zeros(len(raw), dtype=np.uint8)
    for k, group in enumerate(raw.groups):
        size = group.dtype.itemsize
        out[order == k] = group.view(np.dtype([("head", "V40"), ("seq", "<u8"),
                                               ("rest", f"V{size - 48}")]) if size > 48 else SEQ_VIEW)["seq"]
    return out


def batch_bytes(mode: str, raw) -> int:
    """What a drain took out of the buffer."""
    each = sample_size if mode.startswith("perf") else (lambda size: 8 + size)
    return sum(len(g) * each(g.dtype.itemsize) for g in raw.groups)


def irq_works() -> int:
    """irq_work interrupts so far, all CPUs (/proc/interrupts, IWI): a ring
    record submitted without BPF_RB_NO_WAKEUP into a drained ring raises one."""
    for line in Path("/proc/interrupts").read_text().splitlines():
        if line.strip().startswith("IWI:"):
            return sum(int(x) for x in line.split()[1:] if x.isdigit())
    return -1


def run_none(reads: int) -> dict:
    pid, result_fd = start_child(reads)
    os.kill(pid, signal.SIGUSR1)
    return {"mode": "none", "loop_s": finish_child(pid, result_fd)}


def run_probe(mode: str, b, reads: int, args) -> dict:
    b["seqno"].clearitem(0)
    b["lost"].clearitem(0)
    b.attach_kprobe(event=b"vfs_read", fn_name=b"on_vfs_read")
    if mode.startswith("perf"):
        reader = PerfBufReader(b, "events", RECORD_SIZE, page_cnt=args.perf_pages)
        buffer_bytes = reader.data_size * len(reader.cpus)
    else:
        data_size = args.ring_pages * 4096
        reader = RingBufReader(b["events"].map_fd, data_size, RECORD_SIZE)
        buffer_bytes = data_size
    try:
        pid, result_fd = start_child(reads)
        b["ctl"][ctypes.c_int(0)] = ctypes.c_uint32(pid)
        # For the loss analysis after the timed part: each batch's size and
        # sequence numbers (not the batches: fresh memory costs page faults).
        sizes, seqs, nbytes = [], [], []
        iwi0 = irq_works()
        cpu0 = time.process_time()
        wall0 = time.perf_counter()
        os.kill(pid, signal.SIGUSR1)
        next_tick = wall0
        while True:
            next_tick += args.interval
            time.sleep(max(0.0, next_tick - time.perf_counter()))
            batch = reader.drain()
            sizes.append(len(batch))
            seqs.append(seq_in_order(batch))
            nbytes.append(batch_bytes(mode, batch))
            if os.waitpid(pid, os.WNOHANG) != (0, 0):
                break
        # The child is gone: everything it produced is in the buffer now.
        batch = reader.drain()
        sizes.append(len(batch))
        seqs.append(seq_in_order(batch))
        nbytes.append(batch_bytes(mode, batch))
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        iwi = irq_works() - iwi0
        b["ctl"][ctypes.c_int(0)] = ctypes.c_uint32(0)
        ns = int(os.read(result_fd, 64))
        os.close(result_fd)
        loop_s = ns / 1e9
        lost = int(sum(b["lost"][ctypes.c_int(0)]))
        delivered = sum(sizes)
        stride = sample_size(64) if mode.startswith("perf") else 8 + 64  # the largest
        # perf: one ring per CPU, each of reader.data_size bytes.
        capacity = reader.data_size
        row = {
            "mode": mode,
            "loop_s": loop_s,
            "delivered": delivered,
            "lost_in_kernel": lost,
            "exact": delivered + lost == reads,
            "share": delivered / reads,
            "drained_per_s": delivered / loop_s,
            "cpu_us_per_event": 1e6 * cpu / max(delivered, 1),
            "core_share": cpu / wall,
            "drains": len(sizes),
            "max_batch_bytes": max(nbytes),
            "ring_bytes": capacity,
            "buffer_bytes": buffer_bytes,
            "irq_works": iwi,
        }
        generated = [int(x) for x in b["seqno"][ctypes.c_int(0)]]
        row.update(classify_losses(seqs, sizes, nbytes, stride, capacity, generated))
        row["classified"] = row["lost_ring_full"] + row["lost_ring_not_full"] == lost
        if mode.startswith("perf"):
            row["lost_notified"] = reader.lost_notified
            row["walked_batches"] = reader.walked_batches
        return row
    finally:
        reader.close()
        b.detach_kprobe(event=b"vfs_read")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--perf-pages", type=int, default=256, help="per CPU")
    ap.add_argument("--ring-pages", type=int, default=512, help="total")
    ap.add_argument("--interval", type=float, default=0.010, help="drain timer, seconds")
    ap.add_argument("--modes", default="none,perf,ring,ringnw",
                    help="of none, perf, ring (flags 0: wakeups), ringnw (BPF_RB_NO_WAKEUP), "
                         "ringmix, perfmix (48- and 64-byte records in turn)")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    modes = args.modes.split(",")
    programs = {m: compile_program(m, args.ring_pages) for m in modes if m != "none"}
    rows = []
    for rep in range(args.repeat):
        # Alternate the order so drift in a shared host hits every mode.
        order = modes if rep % 2 == 0 else list(reversed(modes))
        for mode in order:
            row = run_none(args.reads) if mode == "none" else run_probe(mode, programs[mode], args.reads, args)
            row["rep"] = rep
            rows.append(row)
            print(json.dumps(row), flush=True)
    base = [r["loop_s"] for r in rows if r["mode"] == "none"]
    base_s = min(base) if base else None
    print()
    print(f"{args.reads} one-byte reads, kernel {os.uname().release}, drain every {args.interval * 1e3:g} ms")
    print(f"{'mode':7} {'loop s':>7} {'slowdown':>8} {'share':>7} {'exact':>5} "
          f"{'drained ev/s':>12} {'us/ev':>6} {'core':>5} {'lost(k/notif)':>14} "
          f"{'full/not-full':>14} {'1-gaps':>6} {'irq_work':>8}")
    for r in rows:
        slow = f"{r['loop_s'] / base_s:.2f}x" if base_s else "-"
        if r["mode"] == "none":
            print(f"{'none':7} {r['loop_s']:7.2f} {slow:>8}")
            continue
        lost = f"{r['lost_in_kernel']}/{r.get('lost_notified', '-')}"
        print(f"{r['mode']:7} {r['loop_s']:7.2f} {slow:>8} {r['share']:7.1%} {str(r['exact']):>5} "
              f"{r['drained_per_s']:12,.0f} {r['cpu_us_per_event']:6.2f} {r['core_share']:5.0%} {lost:>14} "
              f"{str(r['lost_ring_full']) + '/' + str(r['lost_ring_not_full']):>14} {r['single_gaps']:>6} "
              f"{r['irq_works']:>8}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=1))
    ok = all(r.get("exact", True) and r.get("classified", True) and not r.get("duplicates") for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
