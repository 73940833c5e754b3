"""ProbeSet -> one BPF C program (bcc dialect). A pure function of the model.

No user text is pasted into the C: symbols are used only by the attach calls
(never in the program), functions are named `ktui_p<N>` / `ktui_e<N>` by
index, and the only things that reach the C from the user are integers the
parser produced and string-literal bytes spelled as numbers.

The program has, for the whole set:
- one event output (`ktui_events`): the BPF ring buffer, or perf buffers;
- per-probe per-CPU counters: hits, emitted, lost (failed outputs);
- per-probe log2 latency histograms and errno counts for return probes;
- per-probe comm counts (top comms);
- for return probes, an entry kprobe that pushes the call (its frame, the
  entry time and the arguments) on its thread's entry stack, so each return
  pairs with its own call, carries its latency and can fetch a1..a6 as they
  were at entry; a return that finds no entry of its own is counted as
  unpaired, an entry that could not be kept as unstored (entry_stack.c);
- per-probe errno tables for return probes (the generic program's rule).

Each probe's records are exactly its header and its own payload, every byte
written by the hit (no other probe's leftovers: records of several sizes
share the buffer). A probe's filter runs before any fetch it does not read.

The parts: `runtime` (types, maps and helpers every program has), `probe`
(one function per probe), `fetch` (C for fetches and filters).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ktui.kernel.codegen.aggregate import aggregate_maps
from ktui.kernel.codegen.probe import SetFilter, entry_function, probe_function
from ktui.kernel.codegen.runtime import (
    PERF,
    RINGBUF,
    comment_safe,
    helpers,
    prelude,
)
from ktui.lang.cgroups import uses_cgroup
from ktui.lang.latency import uses_latency
from ktui.lang.model import Kind, Probe, ProbeSet, SpecError
from ktui.record.layout import RecordLayout, record_layout


@dataclass(frozen=True)
class Program:
    text: str
    layout: RecordLayout
    buffer: str  # RINGBUF or PERF
    probes: tuple[Probe, ...]

    def entry_fn(self, index: int) -> str:
        return f"ktui_e{index}"

    def probe_fn(self, index: int) -> str:
        return f"ktui_p{index}"


# A tracepoint runs on the shipped generic program's tracepoint variant,
# and a user function's probe (a uprobe) reads the process's memory, which
# only the generic program does (kernel/generic/program.c); the C here would
# attach to a kernel function of its name. No compiled program takes either,
# nor a wildcard, nor a probe reading the task's cgroup (lang.cgroups: the
# C here has no cgroup fetch, key or comparison).
NOT_COMPILED = ("never compiled: tracepoints, user-space probes, wildcards, gated probes (within:), spans and "
                "probes that read cgroup or latency run on the generic program")


def never_compiled(probe: Probe) -> bool:
    # latency (lang.latency): the C here has no filter on it nor sum of it
    return (probe.kind is Kind.TRACEPOINT or probe.target.is_user or probe.target.is_wildcard
            or probe.within is not None or probe.since is not None or uses_cgroup(probe)
            or uses_latency(probe))


def compiled_part(probes: Sequence[Probe] | ProbeSet) -> tuple[tuple[Probe, ...], tuple[Probe, ...]]:
    """(the probes a compiled program takes, those it leaves to the generic
    program), each in the set's order."""
    probes = probes.probes if isinstance(probes, ProbeSet) else tuple(probes)
    return (tuple(p for p in probes if not never_compiled(p)), tuple(p for p in probes if never_compiled(p)))


def generate(
    probes: Sequence[Probe] | ProbeSet,
    *,
    buffer: str = RINGBUF,
    ringbuf_pages: int = 2048,
    pid: int | None = None,
    comm: str | None = None,
    exclude_pids: Sequence[int] = (),
    context: Sequence[int] = (0, 0, 0),
) -> Program:
    """Generate the C program for `probes` (indexed 0..n-1 in the records).
    `exclude_pids`: ktui's own processes, whose hits no probe counts.
    `context`: where a hit's context is read (ContextAddresses' three
    addresses, kernel/symbols/interrupt_context), 0s: not known."""
    if isinstance(probes, ProbeSet):
        pid = probes.pid if pid is None else pid
        comm = probes.comm if comm is None else comm
        probes = probes.probes
    probes = tuple(probes)
    if not probes:
        raise SpecError("nothing to compile: the probe set is empty")
    for probe in probes:
        if never_compiled(probe):
            raise SpecError(f"{probe.name}: {NOT_COMPILED}")
    if buffer not in (RINGBUF, PERF):
        raise ValueError(f"unknown buffer kind {buffer!r}")
    if ringbuf_pages & (ringbuf_pages - 1):
        raise ValueError("ringbuf_pages must be a power of two")
    layout = record_layout(probes)
    returns = any(p.kind is Kind.RETURN for p in probes)
    out: list[str] = []
    out += prelude(len(probes), layout, buffer, ringbuf_pages, returns)
    out += helpers(buffer, pid, comm, exclude_pids, returns, context)
    out += aggregate_maps(probes)
    for index, (probe, probe_layout) in enumerate(zip(probes, layout.probes)):
        out.append("")
        out.append(f"/* probe {index}: {comment_safe(probe.spec_text)} */")
        sets = SetFilter(pid, comm)
        if probe.kind is Kind.RETURN:
            out += entry_function(index, probe, sets)
        out += probe_function(index, probe, probe_layout, sets)
    return Program("\n".join(out) + "\n", layout, buffer, probes)
