"""One C function per probe (and an entry function per return probe).

Each computes only what its probe needs: a counting probe touches no
scratch event and reads comm only for its filters. The order is the
cheap refusals first: the set-wide filters, then (a return) pairing with
its own call, then the fetches the probe's filter reads and the filter,
the counters, and only for a hit that is written out the rest of the
fetches and the header."""

from __future__ import annotations

from dataclasses import dataclass

from ktui.kernel.codegen.aggregate import aggregate_lines
from ktui.kernel.codegen.fetch import FetchGen
from ktui.kernel.codegen.uses import filter_uses_comm, uses_args
from ktui.kernel.returns import errno_mode
from ktui.lang.limits import TASK_COMM_LEN
from ktui.lang.model import ARG_REGISTERS, Kind, Probe
from ktui.record.layout import ProbeLayout


@dataclass(frozen=True)
class SetFilter:
    pid: int | None
    comm: str | None


def entry_function(index: int, probe: Probe, sets: SetFilter) -> list[str]:
    """Entry half of a return probe: after the set-wide filters, push the
    call on its thread's entry stack (entry_stack.c): its frame (the stack
    pointer at entry), when, and the arguments if the return half reads
    them. An entry that could not be kept is counted."""
    lines = [
        f"int ktui_e{index}(struct pt_regs *ctx)",
        "{",
        f"    u32 probe = {index};",
        "    u64 pid_tgid = bpf_get_current_pid_tgid();",
    ]
    comm = _local_comm(lines) if sets.comm is not None else "0"
    lines += _set_filter(comm)
    args = "0"
    if uses_args(probe):
        lines.append("    u64 args[6] = {" + ", ".join(f"ctx->{reg}" for reg in ARG_REGISTERS) + "};")
        args = "args"
    lines += [
        "    /* generation 0: a compiled program's probe indices are never reused */",
        f"    if (ktui_push(probe, 0, (u32)pid_tgid, ctx->sp, bpf_ktime_get_ns(), {args}) != KTUI_PUSHED)",
        "        ktui_bump(ktui_unstored.lookup(&probe));",
        "    return 0;",
        "}",
        "",
    ]
    return lines


def probe_function(index: int, probe: Probe, layout: ProbeLayout, sets: SetFilter) -> list[str]:
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
    # the set-wide filters first, before anything is read, where they can
    # go without comm; a return then pairs with its call before its event
    # is begun (an unpaired return reads nothing more)
    early = sets.comm is None
    comm = "0"
    if early:
        lines += _set_filter("0")
    else:
        comm = _event_comm(lines) if emits else _local_comm(lines)
        lines += _set_filter(comm)
    if ret:
        args = "args" if uses_args(probe) else "0"
        if args != "0":
            lines.append("    u64 args[6];")
        lines += [
            "    u64 ts = 0;",
            "    /* its own call: this thread's, from this frame (the return address popped) */",
            f"    if (ktui_pop(probe, 0, (u32)pid_tgid, ctx->sp - 8, &ts, {args}) != KTUI_PAIRED) {{",
            "        /* entered before the probe attached, its entry not kept, or deeper than the stack */",
            "        ktui_bump(ktui_unpaired.lookup(&probe));",
            "        return 0;",
            "    }",
            "    u64 now = bpf_ktime_get_ns();",
            "    u64 latency = now - ts;",
        ]
    if early and emits:
        comm = _event_comm(lines)
    elif early and filter_uses_comm(probe):
        comm = _local_comm(lines)
    if emits and not ret:
        lines.append("    u64 now = bpf_ktime_get_ns();")
    gen = FetchGen(probe, layout, comm)
    read_by_filter = gen.filter_fetches(probe.filter) if emits else set()
    lines += gen.fetch_lines(read_by_filter)
    if probe.filter is not None:
        lines.append(f"    if (!({gen.filter_c(probe.filter)}))")
        lines.append("        return 0;")
    lines.append(f"    ktui_count(probe, {comm});")
    lines += aggregate_lines(index, probe, gen, comm)
    if ret:
        lines.append(f"    ktui_account_return(probe, latency, PT_REGS_RC(ctx), {errno_mode(probe)});")
    if emits:
        sample = max(1, probe.sample)
        limit = probe.rate_limit or 0
        lines += [
            f"    if (!ktui_admit(probe, {sample}ULL, {limit}ULL, now))",
            "        return 0;",
        ]
        rest = [i for i in range(len(layout.slots)) if i not in read_by_filter]
        lines += gen.fetch_lines(rest)
        lines += [
            "    e->ts = now;",
            f"    e->latency = {'latency' if ret else '0'};",
            "    e->probe = probe;",
            "    /* the context it ran in, in the top bits: a CPU number fits in 24 */",
            "    e->cpu = bpf_get_smp_processor_id() | (ktui_context_of(KTUI_CONTEXT_ADDRS) << KTUI_CONTEXT_SHIFT);",
            "    e->pid = pid_tgid >> 32;",
            "    e->tid = (u32)pid_tgid;",
            "    e->cgroup = bpf_get_current_cgroup_id();",
            "    /* this probe's own record: the header and its payload, all written above */",
            f"    ktui_output(ctx, probe, e, KTUI_HEADER_SIZE + {layout.payload_size});",
        ]
    lines += ["    return 0;", "}"]
    return lines


def _event_comm(lines: list[str]) -> str:
    """The scratch event `e`, and comm read into it."""
    lines += [
        "    u32 zero = 0;",
        "    struct ktui_event *e = ktui_scratch.lookup(&zero);",
        "    if (!e)",
        "        return 0;",
        "    /* the bytes after comm's NUL are left as they were (before 6.4): cleared */",
        "    __builtin_memset(e->comm, 0, sizeof(e->comm));",
        "    bpf_get_current_comm(&e->comm, sizeof(e->comm));",
    ]
    return "e->comm"


def _local_comm(lines: list[str]) -> str:
    """Read comm into a zeroed local array (its tail may become a map key)."""
    lines += [f"    char comm[{TASK_COMM_LEN}] = {{}};", "    bpf_get_current_comm(&comm, sizeof(comm));"]
    return "comm"


def _set_filter(comm: str) -> list[str]:
    return [f"    if (!ktui_set_filter(pid_tgid, {comm}))", "        return 0;"]
