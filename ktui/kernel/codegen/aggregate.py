"""C for a probe's in-kernel aggregations (`hist`, `count`, `sum`; lang.aggregate).

- `hist`: a log2 histogram of an integer fetch, one per-CPU array value per
  probe (struct ktui_hist, the latency histogram's type and slot rule), so
  reading it is one lookup.
- `count` / `sum`: a hash map per probe (`ktui_agg<N>`) keyed by the fetched
  values, each value {count, sum}, updated with atomic adds. When it is
  full a hit whose key is new is not counted there: it is counted in
  `ktui_agg_dropped` (per probe), so a full map is never silent, and its
  key is remembered in `ktui_agg<N>_lost` (as many keys as max_keys), so
  the number of distinct keys lost is known too; a hit whose key finds
  that map full as well is counted in `ktui_agg_lost_full`: the number is
  then a lower bound, and said so.

A negative value of a signed fetch (`retval`'s -errno) is left out of the
histogram and the sum: the errno breakdown counts errors, and "bytes read"
must not go down by 14 for an EFAULT. The hit is still counted under its key.

Everything reaching the C is generated from the parse tree: fetches become
register and memory reads, as for events (`fetch.FetchGen`)."""

from __future__ import annotations

from typing import Sequence

from ktui.kernel.codegen.fetch import FetchGen
from ktui.lang.aggregate import is_comm, is_signed
from ktui.lang.limits import TASK_COMM_LEN
from ktui.lang.model import Deref, Fetch, Probe, positional


STACK_DEPTH = 63  # frames kept of a stack (bpftrace's and perf's default depth is 127; 63 fits 512 bytes)
STACK_MAP_SIZE = 16384  # distinct (probe, stack) pairs counted at once
# User frames kept of a stack: frame-pointer walks rarely go deeper on
# Debian (no frame pointers), and the key stays 272 bytes (776 with the
# kernel frames of `stack: both`): 16384 preallocated keys take 4.3 MiB
# (12 MiB), plus the hash table's own ~50 bytes an entry.
USTACK_DEPTH = 32
USTACK_MAP_SIZE = 16384  # distinct (probe, process, stack) triples counted at once


def agg_map_name(index: int) -> str:
    return f"ktui_agg{index}"


def lost_map_name(index: int) -> str:
    """The keys a full count map could not take (one entry per distinct key)."""
    return f"ktui_agg{index}_lost"


def aggregate_maps(probes: Sequence[Probe]) -> list[str]:
    """Types and maps for every probe that aggregates (nothing otherwise)."""
    aggs = [(i, p.agg) for i, p in enumerate(probes) if p.agg is not None]
    if not aggs:
        return []
    lines = [
        "/* In-kernel aggregations (hist/count/sum): see codegen/aggregate.py. */",
        "struct ktui_agg_val {",
        "    u64 count;",
        "    u64 sum;",
        "};",
        "BPF_PERCPU_ARRAY(ktui_agg_dropped, u64, KTUI_NPROBES);",
        "BPF_PERCPU_ARRAY(ktui_agg_lost_full, u64, KTUI_NPROBES);",
    ]
    if any(agg.hist is not None for _, agg in aggs):
        lines.append("BPF_PERCPU_ARRAY(ktui_vhist, struct ktui_hist, KTUI_NPROBES);")
        lines.append("BPF_PERCPU_ARRAY(ktui_vhist_sum, u64, KTUI_NPROBES); /* the values' exact sum */")
    kinds = {agg.stack for _, agg in aggs if agg.stack is not None}
    if kinds:
        lines.append("BPF_PERCPU_ARRAY(ktui_stacks_dropped, u64, KTUI_NPROBES);")
    if "kernel" in kinds:
        lines += stack_maps()
    if kinds & {"user", "both"}:
        lines += ustack_maps(with_kernel="both" in kinds)
    for index, agg in aggs:
        if not agg.counts:
            continue
        lines.append(f"struct ktui_agg{index}_key {{")
        lines += [f"    {decl};" for decl in key_fields(agg.keys)]
        lines.append("};")
        lines.append(f"BPF_HASH({agg_map_name(index)}, struct ktui_agg{index}_key, "
                     f"struct ktui_agg_val, {int(agg.max_keys)});")
        lines.append(f"BPF_HASH({lost_map_name(index)}, struct ktui_agg{index}_key, u8, {int(agg.max_keys)});")
    lines.append("")
    return lines


def stack_maps() -> list[str]:
    """Stacks are counted in a hash map keyed by the frames themselves:
    exact, and its entries can be deleted. (A BPF stack-trace map never
    frees its entries and its buckets collide long before it is full, so
    on a long run every new stack fails.) The 512-byte key is built in a
    per-CPU scratch slot: it does not fit the BPF stack."""
    return [
        f"#define KTUI_STACK_DEPTH {STACK_DEPTH}",
        "struct ktui_stack_key {",
        "    u32 probe;",
        "    u32 nframes;",
        "    u64 ip[KTUI_STACK_DEPTH];",
        "};",
        "BPF_PERCPU_ARRAY(ktui_stack_scratch, struct ktui_stack_key, 1);",
        f"BPF_HASH(ktui_stacks, struct ktui_stack_key, u64, {STACK_MAP_SIZE});",
    ]


def ustack_maps(*, with_kernel: bool) -> list[str]:
    """`stack: user` / `both`: a second map, keyed by the process (tgid:
    user addresses mean nothing without it; user space reads its
    /proc/PID/maps to symbolize them) and the frames. The kernel frames'
    array is there only when a probe of the program wants both."""
    return [
        f"#define KTUI_USTACK_DEPTH {USTACK_DEPTH}",
        f"#define KTUI_KSTACK_DEPTH {STACK_DEPTH}",
        *(["#define KTUI_USTACK_KIP 1"] if with_kernel else []),
        "struct ktui_ustack_key {",
        "    u32 probe;",
        "    u32 tgid;",
        "    u32 nkframes;",
        "    u32 nuframes;",
        *(["    u64 kip[KTUI_KSTACK_DEPTH];"] if with_kernel else []),
        "    u64 uip[KTUI_USTACK_DEPTH];",
        "};",
        "BPF_PERCPU_ARRAY(ktui_ustack_scratch, struct ktui_ustack_key, 1);",
        f"BPF_HASH(ktui_ustacks, struct ktui_ustack_key, u64, {USTACK_MAP_SIZE});",
    ]


def ustack_lines(kind: str) -> list[str]:
    """Count this hit's user stack (and kernel stack, for `both`) under
    its process. No user frames (a kernel thread) is a stack of its own,
    not a drop; a stack the kernel could not take, or a full map, is
    counted in ktui_stacks_dropped. The user frames come from the frame
    pointer chain (the kernel's perf callchain walk): where the code has
    no frame pointers, the stack stops early or goes astray."""
    out = [
        "    u32 uz = 0;",
        "    struct ktui_ustack_key *uk = ktui_ustack_scratch.lookup(&uz);",
        "    if (uk) {",
        "        uk->probe = probe;",
        "        uk->tgid = (u32)(bpf_get_current_pid_tgid() >> 32);",
    ]
    if kind == "both":
        out.append("        long kn = bpf_get_stack(ctx, uk->kip, sizeof(uk->kip), 0);")
    else:
        out += ["        long kn = 0;",
                "#ifdef KTUI_USTACK_KIP  /* the slot may hold a `both` probe's kernel frames */",
                "        __builtin_memset(uk->kip, 0, sizeof(uk->kip));",
                "#endif"]
    out += [
        "        long un = bpf_get_stack(ctx, uk->uip, sizeof(uk->uip), BPF_F_USER_STACK);",
        "        u64 *uc = 0;",
        f"        if (kn {'>' if kind == 'both' else '>='} 0 && un >= 0) {{",
        "            uk->nkframes = (u32)(kn / 8);",
        "            uk->nuframes = (u32)(un / 8);",
        "            u64 uzero = 0;",
        "            uc = ktui_ustacks.lookup_or_try_init(uk, &uzero);",
        "        }",
        "        if (uc)",
        "            __sync_fetch_and_add(uc, 1);",
        "        else",
        "            ktui_bump(ktui_stacks_dropped.lookup(&probe));",
        "    }",
    ]
    return out


def stack_lines() -> list[str]:
    """Count this hit's kernel stack (bpf_get_stack zeroes the frames past
    the ones it writes, so equal stacks are equal keys). A stack that
    could not be taken or stored is counted in ktui_stacks_dropped."""
    return [
        "    u32 sz = 0;",
        "    struct ktui_stack_key *sk = ktui_stack_scratch.lookup(&sz);",
        "    if (sk) {",
        "        sk->probe = probe;",
        "        long sn = bpf_get_stack(ctx, sk->ip, sizeof(sk->ip), 0);",
        "        u64 *sc = 0;",
        "        if (sn > 0) {",
        "            sk->nframes = (u32)(sn / 8);",
        "            u64 szero = 0;",
        "            sc = ktui_stacks.lookup_or_try_init(sk, &szero);",
        "        }",
        "        if (sc)",
        "            __sync_fetch_and_add(sc, 1);",
        "        else",
        "            ktui_bump(ktui_stacks_dropped.lookup(&probe));",
        "    }",
    ]


def key_fields(keys: Sequence[Fetch]) -> list[str]:
    """The key struct's members: integers first, then comms, so nothing is
    padded (a comm is 16 bytes); a sum without keys has one zero member.
    User space reads them back in this order (`key_order`)."""
    fields = [f"u64 k{i}" for i in key_order(keys) if not is_comm(keys[i])]
    fields += [f"char k{i}[{TASK_COMM_LEN}]" for i in key_order(keys) if is_comm(keys[i])]
    return fields or ["u64 none"]


def key_order(keys: Sequence[Fetch]) -> list[int]:
    """Indices of `keys` in struct order: integers, then comms."""
    ints = [i for i, k in enumerate(keys) if not is_comm(k)]
    return ints + [i for i, k in enumerate(keys) if is_comm(k)]


def aggregate_lines(index: int, probe: Probe, gen: FetchGen, comm: str) -> list[str]:
    """The statements a hit that passed every filter runs. `comm` is the C
    char array already holding comm, or "0" when none was read."""
    agg = probe.agg
    if agg is None:
        return []
    out = ["    /* aggregations */", "    {"]
    if agg.hist is not None:
        value = _value(gen, agg.hist, out)
        guard = f"(s64){value} >= 0" if is_signed(agg.hist) else "1"
        out += [
            f"    if ({guard}) {{",
            "        struct ktui_hist *vh = ktui_vhist.lookup(&probe);",
            f"        u32 vs = ktui_log2_slot({value});",
            "        if (vh && vs < KTUI_HIST_SLOTS) {",
            "            vh->slot[vs]++;",
            "            u64 *vsum = ktui_vhist_sum.lookup(&probe);",
            "            if (vsum)",
            f"                *vsum += {value};",
            "        }",
            "    }",
        ]
    if agg.counts:
        out += [
            f"    struct ktui_agg{index}_key ak;",
            "    __builtin_memset(&ak, 0, sizeof(ak));",
        ]
        for i, key in enumerate(agg.keys):
            if is_comm(key):
                if comm == "0":
                    out.append(f"    bpf_get_current_comm(&ak.k{i}, sizeof(ak.k{i}));")
                else:
                    out.append(f"    __builtin_memcpy(ak.k{i}, {comm}, sizeof(ak.k{i}));")
            else:
                out.append(f"    ak.k{i} = {_value(gen, key, out)};")
        added = "0"
        if agg.sum is not None:
            value = _value(gen, agg.sum, out)
            added = f"((s64){value} >= 0 ? {value} : 0)" if is_signed(agg.sum) else value
        out += [
            "    struct ktui_agg_val az = {};",
            f"    struct ktui_agg_val *av = {agg_map_name(index)}.lookup_or_try_init(&ak, &az);",
            "    if (av) {",
            "        __sync_fetch_and_add(&av->count, 1);",
        ]
        if agg.sum is not None:
            out.append(f"        __sync_fetch_and_add(&av->sum, {added});")
        out += [
            "    } else {",
            "        ktui_bump(ktui_agg_dropped.lookup(&probe));",
            "        u8 lz = 0;",
            f"        if (!{lost_map_name(index)}.lookup_or_try_init(&ak, &lz))",
            "            ktui_bump(ktui_agg_lost_full.lookup(&probe));",
            "    }",
        ]
    if agg.stack == "kernel":
        out += stack_lines()
    elif agg.stack is not None:
        out += ustack_lines(agg.stack)
    out.append("    }")
    return out


def _value(gen: FetchGen, fetch: Fetch, out: list[str]) -> str:
    """A C variable holding the fetch's integer value, extended from its
    width as its type says (u64 bits; signed types sign-extended)."""
    typ = fetch.effective_type
    width = int(typ[1:])
    expr = positional(fetch.expr)
    if isinstance(expr, Deref):
        base = gen.address(expr.inner, out)
        raw = gen.new_tmp()
        out.append(f"    u{width} {raw} = 0;")
        out.append(f"    bpf_probe_read_kernel(&{raw}, sizeof({raw}), (void *)({base} + ({expr.offset}LL)));")
        value = raw
    else:
        value = f"({gen.raw(expr)})"
    var = gen.new_tmp()
    if typ.startswith("s"):
        out.append(f"    u64 {var} = (u64)(s64)(s{width})({value});")
    else:
        out.append(f"    u64 {var} = (u64)(u{width})({value});")
    return var
