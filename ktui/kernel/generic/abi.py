"""What the generic program and ktui agree on: plans, config, limits.

The structs are defined once, here, as ctypes Structures; `c_declarations()`
writes the same definitions as C for the program (program.c), so the two
sides cannot drift. A plan is what a probe is to the generic program:
where each fetch comes from, how to follow its pointers, the filter as
comparisons plus a truth table, sampling, and the size of its records.
"""

from __future__ import annotations

import ctypes

from ktui.kernel.codegen.runtime import COMM_EVERY, COMM_EXACT, log2_slot_helper
from ktui.kernel.returns import (  # re-exported: abi.ENTRY_DEPTH etc.
    ENTRY_DEPTH,
    ENTRY_THREADS,
    ERRNO_BUCKETS,
    ERRNO_GUESS,
    ERRNO_HIGH_BASE,
    ERRNO_LOW,
)

# a fetch's dereference offsets: n - 1 pointer hops and the final read (MAX_DEREF)
from ktui.lang.limits import MAX_DEREF, MAX_ERRNO, MAX_FETCHES, STRING_MAX
from ktui.record.histogram import HIST_SLOTS
from ktui.record.layout import HEADER_FIELDS, HEADER_SIZE

MAX_PROBES = 1024  # slots; a cookie carries slot | generation << 16
MAX_CMPS = 6  # comparisons in a filter: its truth table is one u64
PAYLOAD_MAX = MAX_FETCHES * STRING_MAX
RECORD_MAX = HEADER_SIZE + PAYLOAD_MAX
# Return probes' entry stacks (ENTRY_DEPTH, ENTRY_THREADS) and errno tables
# (ERRNO_*): kernel/returns.py, shared with the compiled programs.
# Scratch areas per CPU: a hit nested in another's (fentry/fexit programs
# nest, and interleave under preemption) takes the next; none free: counted.
NEST_LEVELS = 3  # program.c's ktui_claim takes them one by one
NREGS = 21  # words of x86-64 struct pt_regs
TRACE_ARGS = 12  # arguments a tracing copy reads at most before 5.17: the kernel's limit from 6.6

COOKIE_SLOT_MASK = 0xFFFF
COOKIE_GEN_SHIFT = 16
COOKIE_ENTRY = 1 << 32  # the entry half of a return probe
COOKIE_EARLY = 1 << 33  # the dispatcher counts this probe's hits until the program is in
# A wildcard's function (tracepoint) in its cookie: each match is attached
# with a site of its own, where the program counts its hits and latencies
# (ktui_sites); 0: not a wildcard. Sites are the session's, given out in
# ranges, one per wildcard probe (engine.Slot.sites).
COOKIE_SITE_SHIFT = 40
MAX_SITES = 8192  # a power of two: the mask below
SITE_MASK = MAX_SITES - 1

# where a value comes from
SRC_REG = 1  # pt_regs word `reg` (a register, or an argument of a call probe)
SRC_ARG = 2  # argument `reg` (0..5) as saved at entry: return probes
SRC_RETVAL = 3
SRC_PID = 4
SRC_TID = 5
SRC_CPU = 6
SRC_RECORD = 7  # a tracepoint's record: the base its fields are read from
SRC_VAL = 8  # a filter operand: the value of fetch `reg`, as stored
SRC_CONST = 9  # a filter operand: the comparison's constant; a fetch: offs[0] (a USDT argument $N)
SRC_STRVAL = 10  # a filter operand: the string of fetch `reg` (a payload offset)
SRC_COMM_STR = 11  # a filter operand: the task's comm
SRC_CGROUP = 12  # the task's cgroup v2 id (bpf_get_current_cgroup_id): its directory's inode
SRC_FUNC = 13  # a wildcard's function: its place in the probe's members (its site - plan.site_base)
# a return's or a span end's latency (ns; lang.latency): known before the
# filter and the aggregations run, 0 in a hit that has none
SRC_LATENCY = 14
# a span end's value of its start (`start.X`, lang.spans): value `reg` of
# those its start stored with it (ktui_span_start.v), taken with the start
SRC_START = 15

# what a fetch stores
K_UINT = 0
K_SINT = 1
K_KSTR = 2
K_USTR = 3
K_HEADER = 4  # comm, pid, tid, cpu: in the record header already

# a fetch's last step (Fetch.loc): its address, or a tracepoint's dynamic
# field there (lang.model.DataLoc: a u32 holding length << 16 | where)
LOC_NONE = 0
LOC_DATA = 1  # where counts from the record's start (__data_loc)
LOC_REL = 2  # ... from the end of the u32 (__rel_loc)

CMP_INT = 1
CMP_STR = 2
CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")

F_RETURN = 1
F_EMITS = 2
# What a hit gathers before its plan runs, each only when the plan needs it
# (plan.work_flags derives them from the plan's own fetches and comparisons):
F_REGS = 4  # a fetch or the filter reads registers: copy pt_regs first
F_ARGS = 8  # ... reads arguments (SRC_ARG): tracing reads them, a return probe's entry saves them
F_TIME = 16  # the hit needs the time: an event's, a latency, a rate window
F_CPU = 32  # the hit needs the CPU: an event's header, or a fetch or filter on cpu
F_BARE = 64  # it only counts (a return: and times); no filter, fetch, event, rate: no scratch state
# A gate (`within: FUNC`): the slot on FUNC's entry and return keeps each
# thread's depth inside FUNC (ktui_gates); a probe whose plan names the
# gate counts only while its thread is inside
F_GATE = 128
# ... a gate between two events (`within(START .. END)`) has a slot on each,
# both F_GATE, plan.gate naming the START's slot (its depths' key): this
# flag on the END's (a hit there is one less)
F_GATE_END = 1024
GATE_THREADS = 16384  # threads inside some gate at once (ktui_gates)
# A span (`END since(START)`, lang.spans): START's slot stores when and who
# under the key (ktui_spans), END's slot takes it back and counts the time
# between as a return probe's latency; plan.span names the END's slot
F_SPAN_START = 256
F_SPAN_END = 512
SPAN_KEYS = 4  # integers of a span's key (lang.spans.SPAN_KEYS_MAX)
SPAN_VALS = 4  # integers a start stores for its end (lang.spans.SPAN_VALUES_MAX): a power of two
SPAN_MAP = 16384  # starts waiting for their end, every span's (ktui_spans)

# In-kernel aggregations (plan.agg: lang.aggregate's hist/count/sum/stack), kept
# for every hit that passed the filter, sampled or not, in maps shared by every
# probe and keyed by the probe's tag (slot and generation): what one probe
# left there is never read as another's.
AGG_HIST = 1  # a log2 histogram of fetch agg_hist (ktui_vhist)
AGG_COUNT = 2  # hits counted by key (ktui_aggs): agg_key's integers, and comm if agg_comm
AGG_SUM = 4  # ... and fetch agg_sum added up per key
AGG_KSTACK = 8  # each hit's kernel stack counted (ktui_stacks; with AGG_USTACK: ktui_ustacks)
AGG_USTACK = 16  # ... its user stack, under its process (ktui_ustacks)
# hist(VALUE, KEY...): fetch agg_hist's log2 slot counted (and the value
# summed) under agg_key's key with AggKey.bucket = slot + 1, in ktui_aggs:
# each (key, slot) one of the probe's max_keys, its drops counted as a count's
AGG_KHIST = 32
AGG_SIGNED_HIST = 1  # plan.agg_signed: a negative value (an errno) is left out of ...
AGG_SIGNED_SUM = 2  # ... the histogram, the sum
AGG_KEYS = 4  # integer keys of a count (lang.model.AGG_KEYS_MAX)
# Entries of the shared maps: every probe's keys (a probe's own max_keys is
# held exactly by its count in ktui_agg_nkeys), stacks. Preallocated: before
# 6.1 the kernel warns that a tracing program's run-time-allocated hash map is
# unsafe (and refuses it on PREEMPT_RT), and no allocation can fail inside a
# hit; each entry costs its key and value plus ~50 bytes.
AGG_MAP_KEYS = 16384
STACK_DEPTH = 63  # kernel frames of a stack (as the compiled programs')
USTACK_DEPTH = 32
STACK_MAP = 8192
# Who made each probe's sampled hits: keys {probe, cgroup id, comm} of the
# generic program's ktui_comms and the counting probes' own map. One per
# comm in each cgroup: a name that runs in many containers takes a key in
# each (hits whose key finds no room are counted as dropped)
COMM_KEYS = 8192
USTACK_MAP = 4096

# pt_regs word index of each register, by its pt_regs field name
PT_REGS = ("r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8", "ax", "cx",
           "dx", "si", "di", "orig_ax", "ip", "cs", "flags", "sp", "ss")
REG_INDEX = {name: i for i, name in enumerate(PT_REGS)}


class Fetch(ctypes.Structure):
    _fields_ = [
        ("src", ctypes.c_uint8),
        ("kind", ctypes.c_uint8),
        ("width", ctypes.c_uint8),  # bytes of an integer: 1, 2, 4, 8
        ("nderef", ctypes.c_uint8),  # 0: the source itself; n: n - 1 pointer hops, then the read
        ("reg", ctypes.c_uint16),
        ("dest", ctypes.c_uint16),  # payload offset
        ("loc", ctypes.c_uint8),  # LOC_*
        ("user", ctypes.c_uint8),  # 1: its memory is the process's (a uprobe), not the kernel's
        ("pad", ctypes.c_uint8 * 6),
        ("offs", ctypes.c_int64 * MAX_DEREF),
    ]


class Cmp(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_uint8),  # CMP_INT, CMP_STR
        ("op", ctypes.c_uint8),  # index into CMP_OPS
        ("sign", ctypes.c_uint8),  # compare as signed 64-bit
        ("lsrc", ctypes.c_uint8),
        ("rsrc", ctypes.c_uint8),
        ("nwords", ctypes.c_uint8),  # strings: 8-byte words to compare (the constant and its NUL)
        ("lreg", ctypes.c_uint16),  # register, argument or fetch index, or a payload offset
        ("rreg", ctypes.c_uint16),
        ("pad", ctypes.c_uint16 * 3),
        ("imm", ctypes.c_uint64),
        ("last_mask", ctypes.c_uint64),  # strings: the bytes of the last word that count
        ("str", ctypes.c_uint64 * (STRING_MAX // 8)),
    ]


class Plan(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint32),
        ("nfetch", ctypes.c_uint32),
        ("ncmps", ctypes.c_uint32),
        ("sample", ctypes.c_uint32),
        ("rate_limit", ctypes.c_uint32),
        # a return value's errno: 0 not counted, 4 as a 32-bit int, 8 as a long or ERR_PTR
        ("errno_mode", ctypes.c_uint32),
        ("record_size", ctypes.c_uint32),  # this probe's own records: header and its payload
        ("gen", ctypes.c_uint32),
        # a wildcard's first site (its members' sites follow it, in order): a
        # hit's function is its cookie's site less this (SRC_FUNC)
        ("site_base", ctypes.c_uint32),
        # `within:` the slot of the gate the probe counts inside, plus 1 (0: none);
        # on an end of a gate between two events (F_GATE), its START's slot plus 1
        ("gate", ctypes.c_uint32),
        # a span's end (F_SPAN_END) or start (F_SPAN_START): the END's slot
        # plus 1 and its generation (a start stored for an edited span's
        # old generation is never taken), and how many of the fetches are
        # the key (0: the thread)
        ("span", ctypes.c_uint32),
        ("span_gen", ctypes.c_uint32),
        ("span_nkeys", ctypes.c_uint32),
        # a span's start: how many of its fetches, after the key, are values
        # it stores for its end (`start.X`: SRC_START there)
        ("span_nvals", ctypes.c_uint32),
        # bit i: fetch i runs before the filter (the filter reads it) ...
        ("fetch_before", ctypes.c_uint32),
        # ... after it, only for a hit that passed and is written out
        ("fetch_after", ctypes.c_uint32),
        # aggregations (AGG_*): what, the probe's cap on keys, and the fetches
        # they read (after the filter, before the event's own)
        ("agg", ctypes.c_uint32),
        ("agg_max_keys", ctypes.c_uint32),
        ("fetch_agg", ctypes.c_uint32),
        ("agg_hist", ctypes.c_uint8),  # fetch index of the histogram's value
        ("agg_sum", ctypes.c_uint8),  # ... of the summed value
        ("agg_nkeys", ctypes.c_uint8),  # integer keys: fetch indices in agg_key
        ("agg_comm", ctypes.c_uint8),  # comm is a key too
        ("agg_signed", ctypes.c_uint8),  # AGG_SIGNED_*
        ("agg_key", ctypes.c_uint8 * AGG_KEYS),
        ("agg_pad", ctypes.c_uint8 * 3),
        ("fetch", Fetch * MAX_FETCHES),
        ("cmps", Cmp * MAX_CMPS),
        # bit b: the filter's value when the comparisons' results are the bits of b
        ("truth", ctypes.c_uint64),
    ]


class AggKey(ctypes.Structure):
    """A count map key: the probe's tag, its integer keys (in the order of
    its `count:` list, integers only), and comm (NUL and stale bytes after
    it: the reader adds up by name). `bucket`: 0 for a count's entry, a
    keyed histogram's slot plus 1 for its entries (AGG_KHIST)."""

    _fields_ = [
        ("tag", ctypes.c_uint32),
        ("bucket", ctypes.c_uint32),
        ("k", ctypes.c_uint64 * AGG_KEYS),
        ("comm", ctypes.c_char * 16),
    ]


class AggVal(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint64), ("sum", ctypes.c_uint64)]


class StackKey(ctypes.Structure):
    """A kernel stack of a probe (bpf_get_stack zeroes the frames past
    nframes, so equal stacks are equal keys)."""

    _fields_ = [
        ("tag", ctypes.c_uint32),
        ("nframes", ctypes.c_uint32),
        ("ip", ctypes.c_uint64 * STACK_DEPTH),
    ]


class UStackKey(ctypes.Structure):
    """A user stack under its process (user addresses mean nothing without
    it), after the kernel stack when the probe wants both."""

    _fields_ = [
        ("tag", ctypes.c_uint32),
        ("tgid", ctypes.c_uint32),
        ("nkframes", ctypes.c_uint32),
        ("nuframes", ctypes.c_uint32),
        ("kip", ctypes.c_uint64 * STACK_DEPTH),
        ("uip", ctypes.c_uint64 * USTACK_DEPTH),
    ]


# ktui's own processes a config leaves out: ktui itself and its compile
# helper (compile_child.py; one at a time). program.c compares each.
EXCLUDED_PIDS = 2


class Config(ctypes.Structure):
    _fields_ = [
        ("pid", ctypes.c_uint32),  # set-wide: only this process (0: any)
        ("exclude_pids", ctypes.c_uint32 * EXCLUDED_PIDS),  # 0: none
        ("has_comm", ctypes.c_uint32),
        # set-wide: only tasks under the cgroup in ktui_cgroup[0] (descendants too)
        ("has_cgroup", ctypes.c_uint32),
        ("config_pad", ctypes.c_uint32),
        ("comm_words", ctypes.c_uint64 * 2),  # the comm, NUL-padded
        ("comm_mask", ctypes.c_uint64 * 2),  # the bytes that count: the name and its NUL
        # where a hit's context is read (codegen/interrupt_context.c): the
        # address of __per_cpu_offset, the per-CPU offsets of the preempt
        # count and of x86's nmi_state; 0: not known on this kernel
        ("context_cpu_offsets", ctypes.c_uint64),
        ("context_preempt_count", ctypes.c_uint64),
        ("context_nmi_state", ctypes.c_uint64),
    ]


_C_TYPES = {
    ctypes.c_uint8: "u8", ctypes.c_uint16: "u16", ctypes.c_uint32: "u32",
    ctypes.c_uint64: "u64", ctypes.c_int64: "s64", ctypes.c_char: "char",
}


def _c_field(name: str, ctype) -> str:
    dims = []
    while hasattr(ctype, "_length_"):
        dims.append(ctype._length_)
        ctype = ctype._type_
    base = _C_TYPES.get(ctype) or f"struct ktui_{ctype.__name__.lower()}"
    return f"    {base} {name}" + "".join(f"[{d}]" for d in dims) + ";"


def c_struct(cls) -> str:
    lines = [f"struct ktui_{cls.__name__.lower()} {{"]
    lines += [_c_field(name, ctype) for name, ctype in cls._fields_]
    return "\n".join(lines + ["};"])


def c_declarations() -> str:
    """#defines and structs for program.c, from the definitions above."""
    defines = {
        "KTUI_MAX_PROBES": MAX_PROBES, "KTUI_MAX_FETCHES": MAX_FETCHES,
        "KTUI_MAX_DEREF": MAX_DEREF, "KTUI_MAX_CMPS": MAX_CMPS,
        "KTUI_STRING_MAX": STRING_MAX, "KTUI_PAYLOAD_MAX": PAYLOAD_MAX,
        "KTUI_HEADER_SIZE": HEADER_SIZE, "KTUI_RECORD_MAX": RECORD_MAX,
        "KTUI_HIST_SLOTS": HIST_SLOTS, "KTUI_ENTRY_DEPTH": ENTRY_DEPTH,
        "KTUI_ENTRY_THREADS": ENTRY_THREADS, "KTUI_ENTRY_GUARD": 1, "KTUI_NEST_LEVELS": NEST_LEVELS,
        "KTUI_ERRNO_BUCKETS": ERRNO_BUCKETS, "KTUI_ERRNO_LOW": ERRNO_LOW,
        "KTUI_ERRNO_HIGH_BASE": ERRNO_HIGH_BASE, "KTUI_ERRNO_GUESS": ERRNO_GUESS,
        "KTUI_NREGS": NREGS, "KTUI_TRACE_ARGS": TRACE_ARGS,
        "KTUI_COOKIE_ENTRY": f"{COOKIE_ENTRY}ULL",
        "KTUI_COOKIE_SITE_SHIFT": COOKIE_SITE_SHIFT, "KTUI_MAX_SITES": MAX_SITES, "KTUI_SITE_MASK": SITE_MASK,
        "SRC_REG": SRC_REG, "SRC_ARG": SRC_ARG, "SRC_RETVAL": SRC_RETVAL, "SRC_PID": SRC_PID,
        "SRC_TID": SRC_TID, "SRC_CPU": SRC_CPU, "SRC_RECORD": SRC_RECORD,
        "LOC_DATA": LOC_DATA, "LOC_REL": LOC_REL, "SRC_VAL": SRC_VAL, "SRC_CONST": SRC_CONST,
        "SRC_STRVAL": SRC_STRVAL, "SRC_COMM_STR": SRC_COMM_STR, "SRC_CGROUP": SRC_CGROUP, "SRC_FUNC": SRC_FUNC,
        "SRC_LATENCY": SRC_LATENCY, "SRC_START": SRC_START,
        "K_UINT": K_UINT, "K_SINT": K_SINT, "K_KSTR": K_KSTR, "K_USTR": K_USTR,
        "K_HEADER": K_HEADER, "CMP_INT": CMP_INT, "CMP_STR": CMP_STR,
        "F_RETURN": F_RETURN, "F_EMITS": F_EMITS, "F_REGS": F_REGS, "F_ARGS": F_ARGS,
        "F_TIME": F_TIME, "F_CPU": F_CPU, "F_BARE": F_BARE, "F_GATE": F_GATE, "F_GATE_END": F_GATE_END, "KTUI_GATE_THREADS": GATE_THREADS,
        "F_SPAN_START": F_SPAN_START, "F_SPAN_END": F_SPAN_END, "KTUI_SPAN_KEYS": SPAN_KEYS,
        "KTUI_SPAN_VALS": SPAN_VALS,
        "KTUI_SPAN_MAP": SPAN_MAP,
        "AGG_HIST": AGG_HIST, "AGG_COUNT": AGG_COUNT, "AGG_SUM": AGG_SUM, "AGG_KSTACK": AGG_KSTACK,
        "AGG_USTACK": AGG_USTACK, "AGG_SIGNED_HIST": AGG_SIGNED_HIST, "AGG_SIGNED_SUM": AGG_SIGNED_SUM,
        "AGG_KHIST": AGG_KHIST,
        "KTUI_AGG_KEYS": AGG_KEYS, "KTUI_AGG_MAP_KEYS": AGG_MAP_KEYS, "KTUI_STACK_DEPTH": STACK_DEPTH,
        "KTUI_USTACK_DEPTH": USTACK_DEPTH, "KTUI_STACK_MAP": STACK_MAP, "KTUI_USTACK_MAP": USTACK_MAP,
        "KTUI_COMM_EXACT": COMM_EXACT, "KTUI_COMM_KEYS": COMM_KEYS, "KTUI_COMM_EVERY": COMM_EVERY, "KTUI_MAX_ERRNO": MAX_ERRNO,
    }
    out = ["/* Generated by ktui.kernel.generic.abi: the plan and config layout. */"]
    out += [f"#define {name} {value}" for name, value in defines.items()]
    out.append("")
    for cls in (Fetch, Cmp, Plan, Config, AggKey, AggVal, StackKey, UStackKey):
        out += [c_struct(cls), ""]
    # the record header, from the decoders' own definition (record/layout.py)
    out += ["struct ktui_event_header {", *(f"    {decl}" for _, _, decl in HEADER_FIELDS), "};", ""]
    # pt_regs into an array indexed like REG_INDEX (a context field can only
    # be read at a constant offset; the array can be indexed by the plan)
    copy = " ".join(f"(st)->regs[{i}] = (ctx)->{name};" for i, name in enumerate(PT_REGS))
    out += [f"#define KTUI_COPY_REGS(st, ctx) do {{ {copy} }} while (0)", ""]
    # the six argument registers of x86-64's calling convention, from the copy
    args = " ".join(f"(st)->args[{i}] = (st)->regs[{REG_INDEX[name]}];"
                    for i, name in enumerate(("di", "si", "dx", "cx", "r8", "r9")))
    out += [f"#define KTUI_ARGS_FROM_REGS(st) do {{ {args} }} while (0)", ""]
    out += log2_slot_helper()  # the histogram's slots, as the compiled programs count them
    return "\n".join(out)
