"""One C function per probe (and an entry function per return probe).

Each computes only what its probe needs: a counting probe touches no
scratch event and reads comm only for its filters."""

from __future__ import annotations

from dataclasses import dataclass

from ktui.kernel.codegen.aggregate import aggregate_lines
from ktui.kernel.codegen.fetch import FetchGen
from ktui.kernel.codegen.runtime import EntrySlots
from ktui.kernel.codegen.uses import filter_uses_comm
from ktui.lang.limits import TASK_COMM_LEN
from ktui.lang.model import (
    ARG_REGISTERS,
    Kind,
    Probe,
)
from ktui.record.layout import ProbeLayout


def entry_function(index: int, probe: Probe, sets: "SetFilter", slots: EntrySlots) -> list[str]:
    """Entry half of a return probe: remember when (and the arguments, if
    the return half uses them). The set-wide filters apply here."""
    lines = [
        f"int ktui_e{index}(struct pt_regs *ctx)",
        "{",
        "    u64 pid_tgid = bpf_get_current_pid_tgid();",
    ]
    comm = "0"
    if sets.comm is not None:
        lines += [f"    char comm[{TASK_COMM_LEN}];", "    bpf_get_current_comm(&comm, sizeof(comm));"]
        comm = "comm"
    lines += [
        f"    if (!ktui_set_filter(pid_tgid, {comm}))",
        "        return 0;",
        "    u32 thread_slot = (u32)pid_tgid & (KTUI_ENTRY_SLOTS - 1);",
    ]
    if slots.args_block is not None:
        lines += _saved_args_slot(slots.args_block)
        lines += [f"    saved->args[{i}] = ctx->{reg};" for i, reg in enumerate(ARG_REGISTERS)]
    lines += [
        f"    u32 slot = {slots.ts_block} * KTUI_ENTRY_SLOTS + thread_slot;",
        "    struct ktui_entry *entry = ktui_entries.lookup(&slot);",
        "    if (!entry)",
        "        return 0;",
        "    entry->tid = (u32)pid_tgid;",
        "    entry->ts = bpf_ktime_get_ns();",
        "    return 0;",
        "}",
        "",
    ]
    return lines


def _saved_args_slot(block: int) -> list[str]:
    """`saved`: this thread's slot for a return probe's entry arguments."""
    return [
        f"    u32 args_slot = {block} * KTUI_ENTRY_SLOTS + thread_slot;",
        "    struct ktui_entry_args *saved = ktui_entry_args.lookup(&args_slot);",
        "    if (!saved)",
        "        return 0;",
    ]


@dataclass(frozen=True)
class SetFilter:
    pid: int | None
    comm: str | None


def probe_function(index: int, probe: Probe, layout: ProbeLayout, sets: SetFilter,
                    slots: EntrySlots | None = None) -> list[str]:
    """The probe proper. Computes only what this probe needs: a counting
    probe touches no scratch event and reads comm only for its filters."""
    ret = probe.kind is Kind.RETURN
    emits = probe.emits_events
    lines = [
        f"int ktui_p{index}(struct pt_regs *ctx)",
        "{",
        f"    u32 probe = {index};",
        "    u64 pid_tgid = bpf_get_current_pid_tgid();",
    ]
    if ret:
        assert slots is not None
        lines += [
            "    u32 thread_slot = (u32)pid_tgid & (KTUI_ENTRY_SLOTS - 1);",
            f"    u32 slot = {slots.ts_block} * KTUI_ENTRY_SLOTS + thread_slot;",
            "    struct ktui_entry *entry = ktui_entries.lookup(&slot);",
            "    /* entered before we attached, filtered out, or another thread's */",
            "    if (!entry || !entry->ts || entry->tid != (u32)pid_tgid)",
            "        return 0;",
            "    u64 now = bpf_ktime_get_ns();",
            "    u64 latency = now - entry->ts;",
            "    entry->ts = 0;",
        ]
        if slots.args_block is not None:
            lines += _saved_args_slot(slots.args_block)
            lines += ["    u64 args[6];", "    __builtin_memcpy(args, saved->args, sizeof(args));"]
    elif emits:
        lines.append("    u64 now = bpf_ktime_get_ns();")
    comm = "0"
    if emits:
        lines += [
            "    u32 zero = 0;",
            "    struct ktui_event *e = ktui_scratch.lookup(&zero);",
            "    if (!e)",
            "        return 0;",
            "    bpf_get_current_comm(&e->comm, sizeof(e->comm));",
        ]
        comm = "e->comm"
    elif (sets.comm is not None and not ret) or filter_uses_comm(probe):
        lines += [f"    char comm[{TASK_COMM_LEN}];", "    bpf_get_current_comm(&comm, sizeof(comm));"]
        comm = "comm"
    if not ret:  # the entry half already applied the set filter
        lines += [
            f"    if (!ktui_set_filter(pid_tgid, {comm}))",
            "        return 0;",
        ]
    if emits:
        lines += [
            "    e->ts = now;",
            f"    e->latency = {'latency' if ret else '0'};",
            "    e->probe = probe;",
            "    e->cpu = bpf_get_smp_processor_id();",
            "    e->pid = pid_tgid >> 32;",
            "    e->tid = (u32)pid_tgid;",
        ]
    gen = FetchGen(probe, layout, comm)
    if emits:
        lines += gen.fetch_lines()
    if probe.filter is not None:
        lines.append(f"    if (!({gen.filter_c(probe.filter)}))")
        lines.append("        return 0;")
    lines.append(f"    ktui_count(probe, {comm});")
    lines += aggregate_lines(index, probe, gen, comm)
    if ret:
        lines.append("    ktui_account_return(probe, latency, PT_REGS_RC(ctx));")
    if emits:
        sample = max(1, probe.sample)
        limit = probe.rate_limit or 0
        lines.append(f"    if (ktui_admit(probe, {sample}ULL, {limit}ULL, now))")
        lines.append("        ktui_output(ctx, probe, e);")
    lines += ["    return 0;", "}"]
    return lines

