"""Read a compiled unit's in-kernel counters into ProbeStats.

Counts, histograms, errnos and comms live in BPF maps, summed over CPUs
here, once per stats read: never counted from events in Python. A
probe's latency histogram is one per-CPU array value (struct ktui_hist),
so it costs one lookup, not one per slot."""

from __future__ import annotations

import ctypes

from ktui.kernel.maps.aggmaps import read_aggregates, read_stacks, stack_fields
from ktui.kernel.codegen import COMM_EXACT
from ktui.kernel.maps.percpu import percpu_hist, percpu_sum, percpu_values
from ktui.kernel.returns import ERRNO_BUCKETS, bucket_errno, errno_check
from ktui.lang.model import Kind
from ktui.record.feed import ProbeStats

TOP_COMMS = 5


def read_unit_stats(unit, user_symbols=None) -> dict[int, ProbeStats]:
    """`user_symbols` (usyms.UserSymbols) names user stack frames."""
    bpf = unit.bpf
    hits_t, emit_t, lost_t = bpf[b"ktui_hits"], bpf[b"ktui_emitted"], bpf[b"ktui_lost"]
    hist_t, sum_t = bpf[b"ktui_hist"], bpf[b"ktui_lat_sum"]
    # comms are zero-padded in the kernel (programs clear them before
    # reading), so one name is one key; still add up by name, as older
    # programs left other names' tails after the NUL
    comm_counts: dict[int, dict[str, int]] = {}
    for k, v in bpf[b"ktui_comms"].items():
        name = bytes(k.comm).split(b"\0", 1)[0].decode("utf-8", "replace")
        per = comm_counts.setdefault(k.probe, {})
        per[name] = per.get(name, 0) + int(v.value)
    comms = {p: list(d.items()) for p, d in comm_counts.items()}
    stacks = read_stacks(bpf, unit.program.probes, user_symbols)
    out = {}
    for local in sorted(unit.live):
        probe = unit.program.probes[local]
        per_cpu_hits = percpu_values(hits_t, local)
        returns: dict = {}
        if probe.kind is Kind.RETURN:
            returns = _return_fields(bpf, local, probe, hist_t, sum_t)
        pid_ = unit.ids[local]
        out[pid_] = ProbeStats(
            probe_id=pid_,
            hits=sum(per_cpu_hits),
            lost=percpu_sum(lost_t, local),
            emitted=percpu_sum(emit_t, local),
            top_comms=tuple(sorted(comms.get(local, []), key=lambda kv: -kv[1])[:TOP_COMMS]),
            # exact while no CPU has counted past its exact first hits (then
            # a random sample, weighted: codegen/runtime.py's ktui_count)
            top_comms_exact=all(n <= COMM_EXACT for n in per_cpu_hits),
            # a compiled program counts by comm alone (codegen/runtime.py):
            # its hits by cgroup are not kept, and say so (never an empty list)
            top_cgroups_kept=False,
            **returns,
            **read_aggregates(bpf, probe, local),
            **stack_fields(bpf, probe, local, stacks),
        )
    return out


def _return_fields(bpf, local: int, probe, hist_t, sum_t) -> dict:
    """A return probe's latencies, errnos and pairing counters. Its hits
    never nest (kprobes), so none is dropped for nesting."""
    errnos = errno_counts(bpf[b"ktui_errnos"], local)
    return {
        "hist": percpu_hist(hist_t, local),
        "latency_sum_ns": percpu_sum(sum_t, local),
        "errnos": tuple(sorted(errnos.items(), key=lambda kv: -kv[1])),
        "errnos_other": percpu_sum(bpf[b"ktui_errno_rest"], local),
        "errno_check": errno_check(probe),
        "unpaired": percpu_sum(bpf[b"ktui_unpaired"], local),
        "entries_unstored": percpu_sum(bpf[b"ktui_unstored"], local),
    }


def errno_counts(table, local: int) -> dict[int, int]:
    """Probe `local`'s errno table (ERRNO_BUCKETS u64 from local *
    ERRNO_BUCKETS in one array for every CPU), by errno: one batch read
    where the kernel has them (5.6), one lookup per bucket before."""
    start = local * ERRNO_BUCKETS
    counts = _batch(table, start)
    if counts is None:
        counts = [int(table[ctypes.c_int(start + b)].value) for b in range(ERRNO_BUCKETS)]
    return {bucket_errno(b): n for b, n in enumerate(counts) if n}


def _batch(table, start: int) -> list[int] | None:
    fd = getattr(table, "map_fd", None)
    if fd is None:
        return None
    from ktui.kernel.maps import bpfsys

    try:
        raw = bpfsys.array_lookup_all(fd, ERRNO_BUCKETS, 8, start=start)
    except bpfsys.BpfError:  # no batch operations (before 5.6)
        return None
    return [int(n) for n in memoryview(raw).cast("Q")]
