"""Read a compiled unit's in-kernel counters into ProbeStats.

Counts, histograms, errnos and comms live in BPF maps, summed over CPUs
here, once per stats read: never counted from events in Python. A
probe's latency histogram is one per-CPU array value (struct ktui_hist),
so it costs one lookup, not one per slot."""

from __future__ import annotations

from ktui.kernel.aggmaps import read_aggregates, read_stacks, stack_fields
from ktui.kernel.percpu import percpu_hist, percpu_sum
from ktui.lang.model import Kind
from ktui.record.feed import ProbeStats

TOP_COMMS = 5



def read_unit_stats(unit, user_symbols=None) -> dict[int, ProbeStats]:
    """`user_symbols` (usyms.UserSymbols) names user stack frames."""
    bpf = unit.bpf
    hits_t, emit_t, lost_t = bpf[b"ktui_hits"], bpf[b"ktui_emitted"], bpf[b"ktui_lost"]
    hist_t, sum_t = bpf[b"ktui_hist"], bpf[b"ktui_lat_sum"]
    errnos: dict[int, list[tuple[int, int]]] = {}
    for k, v in bpf[b"ktui_errnos"].items():
        errnos.setdefault(k.probe, []).append((int(k.err), int(v.value)))
    # bpf_get_current_comm does not clear the bytes after the NUL, so one
    # name can sit under several keys (stale tails): add them up by name.
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
        hist: tuple[int, ...] = ()
        latency_sum = 0
        if probe.kind is Kind.RETURN:
            hist = percpu_hist(hist_t, local)
            latency_sum = percpu_sum(sum_t, local)
        pid_ = unit.ids[local]
        out[pid_] = ProbeStats(
            probe_id=pid_,
            hits=percpu_sum(hits_t, local),
            lost=percpu_sum(lost_t, local),
            emitted=percpu_sum(emit_t, local),
            hist=hist,
            latency_sum_ns=latency_sum,
            errnos=tuple(sorted(errnos.get(local, []), key=lambda kv: -kv[1])),
            top_comms=tuple(sorted(comms.get(local, []), key=lambda kv: -kv[1])[:TOP_COMMS]),
            **read_aggregates(bpf, probe, local),
            **stack_fields(bpf, probe, local, stacks),
        )
    return out
