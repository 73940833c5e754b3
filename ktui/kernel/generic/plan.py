"""A probe as the generic program runs it: its `abi.Plan`.

Built from the parse tree (never from text) with the same meaning the
compiled programs give it (kernel/codegen): the same payload offsets
(record.layout), the same widths and sign extension, the same filter
name resolution and signed/unsigned comparisons. A probe the generic
program cannot run (a filter of more than abi.MAX_CMPS distinct
comparisons) raises NotGeneric with the reason: such a probe is compiled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ktui.kernel.generic import abi
from ktui.kernel.returns import errno_check, errno_mode  # both engines' rule, kept importable from here
from ktui.lang import filters
from ktui.lang.aggregate import is_comm, is_signed
from ktui.lang.bind import names_label
from ktui.lang.cgroups import is_cgroup
from ktui.lang.names import REGISTER_SPELLINGS
from ktui.lang.spans import start_value_of, value_index, value_key
from ktui.lang.model import (
    ARG_REGISTERS,
    Aggregate,
    STRING_TYPES,
    And,
    Arg,
    Builtin,
    Compare,
    Const,
    DataLoc,
    Deref,
    Fetch,
    Field,
    FilterExpr,
    IntLit,
    Kind,
    Not,
    Or,
    Probe,
    Record,
    Reg,
    RetVal,
    StartValue,
    StrLit,
    positional,
)
from ktui.record.layout import HEADER_SIZE, ProbeLayout, probe_layout, probe_record_size


class NotGeneric(Exception):
    """The generic program cannot run this probe; str() says why."""


@dataclass(frozen=True)
class _Operand:
    src: int
    reg: int = 0
    imm: int = 0
    signed: bool = False


def payload_size(probe: Probe) -> int:
    return probe_layout(probe).payload_size


def record_size(probe: Probe) -> int:
    """The size of `probe`'s records: the header and its own payload, every
    byte of it written by each hit (no padding of another probe's size):
    the size the readers and decoders expect of it (record.layout)."""
    return probe_record_size(probe)


def build_plan(probe: Probe, *, gen: int, tracing: bool = False,
               cgroup_id: Callable[[str], int] | None = None, events: bool = True) -> abi.Plan:
    """The plan of `probe`. `tracing`: the probe goes by fentry/fexit, whose
    program has the arguments (st->args), not the registers, in a call
    probe too. `cgroup_id`: a filter's cgroup path -> the id the kernel
    gives its tasks (default: attach.cgroup_scope.cgroup_id, on this
    machine); CgroupError, one line, where the path is no cgroup v2
    directory. `events=False`: no hit is written out (no F_EMITS): the
    fetches only an event holds are never read, and neither the time nor
    the CPU is taken for a call; hits, aggregations and latencies as ever."""
    layout = probe_layout(probe)
    size = record_size(probe)
    if size > abi.RECORD_MAX or len(probe.fetches) > abi.MAX_FETCHES:
        raise NotGeneric("more fetches than the generic program holds")
    plan = abi.Plan()
    ret = probe.kind is Kind.RETURN
    flags = abi.F_RETURN if ret else 0
    ret = ret or tracing  # where arguments are read from: st->args
    user = probe.target.is_user  # a uprobe: its memory is the process's
    if probe.emits_events and events:
        flags |= abi.F_EMITS
    # a span's end: the values of its start it reads (start.X), by their
    # place in what the start stores (SRC_START)
    starts = value_index(probe) if probe.since is not None else {}
    for i, slot in enumerate(layout.slots):
        _fill_fetch(plan.fetch[i], slot.fetch, slot.offset, slot.kind, ret, user, starts)
    plan.nfetch = len(layout.slots)
    scratch = _Scratch(plan, layout, ret, user, starts)
    if probe.agg is not None:
        _fill_aggregate(plan, probe.agg, layout, scratch)
    plan.truth = 1  # no filter: every hit passes (a filter's table replaces this)
    if probe.filter is not None:
        _fill_filter(plan, probe, layout, scratch, tracing, cgroup_id)
    _fetch_passes(plan, emits=bool(flags & abi.F_EMITS))
    plan.sample = max(1, probe.sample)
    plan.rate_limit = probe.rate_limit or 0
    plan.flags = flags | work_flags(plan, flags)
    plan.errno_mode = errno_mode(probe)
    plan.record_size = size
    plan.gen = gen
    return plan


def _fetch_passes(plan: abi.Plan, emits: bool = True) -> None:
    """Which fetches run before the filter (those its comparisons read),
    which after it for the aggregations, and which only for a hit that
    passed and is written out: a hit the filter turns away reads nothing it
    does not need (a user string of a hit nobody asked for, say). A plan
    that writes no event (events off) reads none of the last."""
    needed = 0
    for c in plan.cmps[:plan.ncmps]:
        for src, reg in ((c.lsrc, c.lreg), (c.rsrc, c.rreg)):
            if src == abi.SRC_VAL:
                needed |= 1 << reg
            elif src == abi.SRC_STRVAL and c.kind == abi.CMP_STR:
                for i in range(plan.nfetch):
                    if plan.fetch[i].dest == reg and plan.fetch[i].kind in (abi.K_KSTR, abi.K_USTR):
                        needed |= 1 << i
    real = sum(1 << i for i in range(plan.nfetch) if plan.fetch[i].kind != abi.K_HEADER)
    plan.fetch_before = needed & real
    aggregated = _aggregate_fetches(plan) & real & ~needed
    plan.fetch_agg = aggregated
    plan.fetch_after = real & ~needed & ~aggregated if emits else 0


def _aggregate_fetches(plan: abi.Plan) -> int:
    """The mask of fetches the aggregations read."""
    mask = 0
    if plan.agg & (abi.AGG_HIST | abi.AGG_KHIST):
        mask |= 1 << plan.agg_hist
    if plan.agg & abi.AGG_SUM:
        mask |= 1 << plan.agg_sum
    for i in range(plan.agg_nkeys):
        mask |= 1 << plan.agg_key[i]
    return mask


class _Scratch:
    """Fetches of the plan's own, after the event's: values the
    aggregations or the filter read that no event field holds (a field
    only compared, a key only counted), each into payload words past the
    probe's record, scratch no record holds. One per value and type."""

    def __init__(self, plan: abi.Plan, layout: ProbeLayout, ret: bool, user: bool,
                 starts: dict | None = None) -> None:
        self.plan, self.ret, self.user, self.starts = plan, ret, user, starts or {}
        self.dest = (layout.payload_size + 7) // 8 * 8
        self.own: dict[tuple, int] = {}

    def fetch(self, fetch, kind: str) -> int:
        """The index of a fetch of `fetch`'s value stored as `kind` ("uint",
        "sint" or "str")."""
        key = (fetch.expr, fetch.effective_type)
        if key in self.own:
            return self.own[key]
        i = self.plan.nfetch
        if i >= abi.MAX_FETCHES or self.dest > abi.PAYLOAD_MAX - abi.STRING_MAX:
            raise NotGeneric("the fetches, aggregations and filter hold more values than the generic program does")
        _fill_fetch(self.plan.fetch[i], fetch, self.dest, kind, self.ret, self.user, self.starts)
        self.dest += abi.STRING_MAX if kind == "str" else 8
        self.plan.nfetch = i + 1
        self.own[key] = i
        return i


def _fill_aggregate(plan: abi.Plan, agg: Aggregate, layout: ProbeLayout, scratch: _Scratch) -> None:
    """The aggregations: which fetch each reads (an event fetch of the same
    value, or one of the scratch's), the count's keys, the cap."""
    if agg.max_keys > abi.AGG_MAP_KEYS and (agg.counts or agg.hist_keys):
        raise NotGeneric(f"max_keys({agg.max_keys}) is more than the generic program's count map holds "
                         f"({abi.AGG_MAP_KEYS} keys of every probe)")

    labels = {slot.fetch.label for slot in layout.slots if slot.fetch.label is not None}

    def index_of(fetch) -> int:
        label = names_label(fetch, labels)  # `count(dev)`: the fetch labelled dev
        for i, slot in enumerate(layout.slots):
            if slot.kind in ("uint", "sint", "func", "cgroup") and (
                    slot.fetch.label == label if label is not None else
                    slot.fetch.expr == fetch.expr and slot.fetch.effective_type == fetch.effective_type):
                return i
        return scratch.fetch(fetch, "sint" if is_signed(fetch) else "uint")

    flags = 0
    if agg.hist is not None:
        # keyed: its slots under each key in the count map, no histogram of all
        flags |= abi.AGG_KHIST if agg.hist_keys else abi.AGG_HIST
        plan.agg_hist = index_of(agg.hist)
        if is_signed(agg.hist):
            plan.agg_signed |= abi.AGG_SIGNED_HIST
    if agg.counts:
        flags |= abi.AGG_COUNT
    if agg.counts or agg.hist_keys:
        ints = [k for k in agg.key_fetches if not is_comm(k)]
        if len(ints) > abi.AGG_KEYS:
            raise NotGeneric(f"more than {abi.AGG_KEYS} count keys")
        for j, key in enumerate(ints):
            plan.agg_key[j] = index_of(key)
        plan.agg_nkeys = len(ints)
        plan.agg_comm = int(any(is_comm(k) for k in agg.key_fetches))
        plan.agg_max_keys = agg.max_keys
    if agg.sum is not None:
        flags |= abi.AGG_SUM
        plan.agg_sum = index_of(agg.sum)
        if is_signed(agg.sum):
            plan.agg_signed |= abi.AGG_SIGNED_SUM
    if agg.stack in ("kernel", "both"):
        flags |= abi.AGG_KSTACK
    if agg.stack in ("user", "both"):
        flags |= abi.AGG_USTACK
    plan.agg = flags


def sources(plan: abi.Plan) -> set[int]:
    """Every SRC_* the plan's fetches and comparisons read: the fetches
    one of its passes runs (a fetch only an event holds is read by none
    when the plan writes no event)."""
    run = plan.fetch_before | plan.fetch_agg | plan.fetch_after
    used = {f.src for i, f in enumerate(plan.fetch[:plan.nfetch]) if f.kind != abi.K_HEADER and run >> i & 1}
    for c in plan.cmps[:plan.ncmps]:
        used.add(c.lsrc)
        if c.kind == abi.CMP_INT:
            used.add(c.rsrc)
    return used


def work_flags(plan: abi.Plan, flags: int) -> int:
    """What a hit must gather before the plan runs (F_REGS, F_ARGS,
    F_TIME, F_CPU), derived from the filled plan itself so it cannot
    disagree with what the fetches and comparisons read. The program
    skips the rest: under emulation every helper call and copy costs, and
    a counting probe needs none of them. F_BARE: the hit does nothing
    but the set-wide filters and the count, and a return probe's latency
    (no scratch state at all).
    `flags`: F_RETURN and F_EMITS."""
    used = sources(plan)
    emits = bool(flags & abi.F_EMITS)
    out = 0
    if abi.SRC_REG in used:
        out |= abi.F_REGS
    if abi.SRC_ARG in used:  # tracing: every argument; a return probe: saved at entry
        out |= abi.F_ARGS
    if emits or flags & abi.F_RETURN or plan.rate_limit:  # event time, latency, rate window
        out |= abi.F_TIME
    if emits or abi.SRC_CPU in used:  # the record header, or a fetch or filter on cpu
        out |= abi.F_CPU
    passes = plan.ncmps == 0 and plan.truth & 1  # no filter (or one known to pass)
    if passes and not (emits or plan.rate_limit or plan.agg or out & (abi.F_REGS | abi.F_ARGS | abi.F_CPU)):
        out |= abi.F_BARE  # a call counts; a return counts and times
    return out


# ---------------------------------------------------------------- fetches


def _source(expr, ret: bool) -> _Operand:
    """Where a fetch or filter name's raw 64 bits come from."""
    if isinstance(expr, Record):  # a tracepoint's fields are read from it
        return _Operand(abi.SRC_RECORD)
    if isinstance(expr, Const):  # its value is in the fetch (offs[0])
        return _Operand(abi.SRC_CONST)
    if isinstance(expr, Arg):
        if ret:  # a return probe sees the arguments as they were at entry
            return _Operand(abi.SRC_ARG, expr.index - 1)
        return _Operand(abi.SRC_REG, abi.REG_INDEX[ARG_REGISTERS[expr.index - 1]])
    if isinstance(expr, Reg):
        return _Operand(abi.SRC_REG, abi.REG_INDEX[expr.name])
    if isinstance(expr, RetVal):
        return _Operand(abi.SRC_RETVAL, signed=True)
    if isinstance(expr, Builtin):
        return _Operand({"pid": abi.SRC_PID, "tid": abi.SRC_TID, "cpu": abi.SRC_CPU, "func": abi.SRC_FUNC,
                         "cgroup": abi.SRC_CGROUP, "latency": abi.SRC_LATENCY}[expr.name])
    raise AssertionError(expr)


def _fill_fetch(f: abi.Fetch, fetch, offset: int, slot_kind: str, ret: bool, user: bool = False,
                starts: dict | None = None) -> None:
    """Fill one abi.Fetch. `user`: a user-space probe's, whose pointers and
    strings are all the probed process's memory (`:string` too). `starts`:
    a span end's values of its start (lang.spans.value_index)."""
    if slot_kind == "header":
        f.kind = abi.K_HEADER
        return
    if isinstance(fetch.expr, StartValue):
        # read at the start, extended to 64 bits there: taken with it
        if slot_kind not in ("uint", "sint"):
            raise NotGeneric(f"{fetch.expr}: a span's start carries integers to its end")
        f.src, f.reg, f.dest = abi.SRC_START, (starts or {})[value_key(fetch)], offset
        f.kind = abi.K_SINT if slot_kind == "sint" else abi.K_UINT
        ftype = fetch.effective_type
        f.width = (64 if ftype == "symbol" else int(ftype[1:])) // 8
        return
    chain: list[int] = []  # dereference offsets, innermost first
    expr = positional(fetch.expr)  # a name reads what the kernel's BTF says it is
    outer: list[int] = []
    while isinstance(expr, Deref):
        outer.append(expr.offset)
        expr = expr.inner
    chain = list(reversed(outer))
    if isinstance(expr, Const) and chain:
        raise NotGeneric(f"{fetch.name}: a constant cannot be dereferenced")
    if isinstance(expr, DataLoc):
        # a tracepoint's dynamic field: the u32 at its offset says where
        # the text is (program.c ktui_fetch_one); nothing dereferences it
        if chain:
            raise NotGeneric(f"{fetch.name}: a dynamic field cannot be dereferenced")
        f.loc = abi.LOC_REL if expr.relative else abi.LOC_DATA
        chain, expr = [expr.offset], Record()
    if len(chain) > abi.MAX_DEREF:
        raise NotGeneric("dereferences nest deeper than the generic program follows")
    source = _source(expr, ret)
    f.src = source.src
    f.reg = source.reg
    f.nderef = len(chain)
    for d, off in enumerate(chain):
        f.offs[d] = off
    if isinstance(expr, Const):
        # a USDT argument the compiler wrote as a constant ($N): no source
        # to read, the value itself (program.c ktui_fetch_one: offs[0])
        f.offs[0] = expr.value
    f.dest = offset
    f.user = int(user)
    ftype = fetch.effective_type
    if isinstance(expr, Builtin) and expr.name == "func":
        f.kind, f.width = abi.K_UINT, 8  # the member's place: its name is the reader's (Probe.members)
        return
    if is_cgroup(expr):
        f.kind, f.width = abi.K_UINT, 8  # the cgroup's id: its path is the reader's (record.cgroups)
        return
    if ftype in STRING_TYPES:
        f.kind = abi.K_USTR if ftype == "ustring" or user else abi.K_KSTR
    else:
        f.kind = abi.K_SINT if slot_kind == "sint" else abi.K_UINT
        f.width = (64 if ftype == "symbol" else int(ftype[1:])) // 8


# ---------------------------------------------------------------- filter


class _Names:
    """Filter names as the compiled programs resolve them (codegen.fetch):
    a fetch of that name first, then retval, pid/tid/cpu, aN, registers."""

    def __init__(self, probe: Probe, layout: ProbeLayout, scratch: _Scratch, tracing: bool = False,
                 cgroup_id: Callable[[str], int] | None = None) -> None:
        self.probe = probe
        self.starts = scratch.starts  # a span end's values of its start
        self.layout = layout
        self.scratch = scratch
        self.ret = probe.kind is Kind.RETURN or tracing  # arguments from st->args
        self.cgroup_id = cgroup_id

    def is_cgroup(self, name: str) -> bool:
        """Whether a filter name is the task's cgroup (or a fetch of it)."""
        found = self._slot(name)
        return is_cgroup(found[1].fetch.expr) if found is not None else name == "cgroup"

    def cgroup(self, path: str) -> int:
        """The id of the cgroup `path` names, on this machine."""
        if self.cgroup_id is None:
            from ktui.kernel.attach.cgroup_scope import cgroup_id

            return cgroup_id(path)
        return self.cgroup_id(path)

    def _slot(self, name: str):
        for i, slot in enumerate(self.layout.slots):
            if slot.fetch.name == name:
                return i, slot
        return None

    def integer(self, name: str) -> _Operand:
        found = self._slot(name)
        if found is not None:
            i, slot = found
            if slot.kind == "header":
                return _source(slot.fetch.expr, self.ret)
            if isinstance(slot.fetch.expr, StartValue):  # known once the end took its start: read there
                return self._start(slot.fetch)
            if slot.kind == "str":
                raise NotGeneric(f"{name} is a string")
            return _Operand(abi.SRC_VAL, i, signed=slot.kind == "sint")
        if name == "retval":
            return _Operand(abi.SRC_RETVAL, signed=True)
        if name in ("pid", "tid", "cpu"):
            return _source(Builtin(name), self.ret)
        if name == "latency":  # read where it is compared: a span's end knows it only after its fetches
            return _Operand(abi.SRC_LATENCY)
        value = start_value_of(name)
        if value is not None:  # a value of the span's start (no fetch of the end has that name)
            bound = (self.probe.bindings or {}).get(name)
            return self._start(Fetch(bound if isinstance(bound, StartValue) else value))
        if self.probe.kind is Kind.USDT and name in (self.probe.bindings or {}):
            return self._bound(name)  # a USDT probe's aN: where its note places it, not a register
        if len(name) == 2 and name[0] == "a" and name[1] in "123456":
            return _source(Arg(int(name[1])), self.ret)
        canonical = filters.canonical_name(name)
        if canonical is not None and canonical in REGISTER_SPELLINGS:
            return _source(Reg(REGISTER_SPELLINGS[canonical]), self.ret)
        bound = (self.probe.bindings or {}).get(name)
        if bound is not None and bound.binding is not None:
            return self._bound(name)
        raise NotGeneric(f"unknown name {name!r} in filter")

    def _start(self, fetch: Fetch) -> _Operand:
        """A span end's value of its start, as the start read it."""
        key = value_key(fetch)
        if key not in self.starts:
            raise NotGeneric(f"{fetch.expr}: not a value this span's start reads")
        return _Operand(abi.SRC_START, self.starts[key], signed=fetch.effective_type.startswith("s"))

    def _bound(self, name: str) -> _Operand:
        """A name the filter alone reads (lang.bind; a USDT probe's aN),
        compared as its C type: a 64-bit argument is its raw register;
        anything else (narrower, a member, a tracepoint's field, a USDT
        argument on the stack) is fetched first."""
        bound = self.probe.bindings[name]
        kind = bound.binding.type
        if kind in STRING_TYPES:
            raise NotGeneric(f"{name} is a string")
        expr = positional(bound)
        if kind in ("u64", "s64", "x64") and isinstance(expr, (Arg, Reg)):
            source = _source(expr, self.ret)
            return _Operand(source.src, source.reg, signed=kind == "s64")
        signed = kind.startswith("s")
        i = self.scratch.fetch(Fetch(bound), "sint" if signed else "uint")
        return _Operand(abi.SRC_VAL, i, signed=signed)

    def string(self, name: str) -> tuple[int, int]:
        """(SRC_COMM_STR or SRC_STRVAL, payload offset) of a string name."""
        if name == "comm":
            return abi.SRC_COMM_STR, 0
        found = self._slot(name)
        if found is not None and found[1].kind == "str":
            return abi.SRC_STRVAL, found[1].offset
        bound = (self.probe.bindings or {}).get(name)
        if found is None and bound is not None and bound.binding is not None \
                and bound.binding.type in STRING_TYPES:
            # a string the filter alone reads: into the scratch, compared there
            i = self.scratch.fetch(Fetch(bound), "str")
            return abi.SRC_STRVAL, self.scratch.plan.fetch[i].dest
        raise NotGeneric(f"{name} is not a string")


def _fill_filter(plan: abi.Plan, probe: Probe, layout: ProbeLayout, scratch: _Scratch,
                 tracing: bool = False, cgroup_id: Callable[[str], int] | None = None) -> None:
    """Comparisons and truth table."""
    names = _Names(probe, layout, scratch, tracing, cgroup_id)
    distinct: list[Compare] = []
    for compare in filters.comparisons(probe.filter):
        if compare not in distinct:
            distinct.append(compare)
    # A string longer than its field can hold never matches (as in
    # codegen.str_equals): a constant, not a comparison for the kernel.
    constant = {c: _never_equal(c, names) for c in distinct}
    known = {c: (c.op == "!=") for c, never in constant.items() if never}
    distinct = [c for c in distinct if c not in known]
    if len(distinct) > abi.MAX_CMPS:
        raise NotGeneric(f"the filter has {len(distinct)} distinct comparisons; the generic "
                         f"program evaluates at most {abi.MAX_CMPS}")
    for i, compare in enumerate(distinct):
        _fill_compare(plan.cmps[i], compare, names)
    plan.ncmps = len(distinct)
    truth = 0
    for bits in range(1 << len(distinct)):
        results = {c: bool(bits >> i & 1) for i, c in enumerate(distinct)}
        if _evaluate(probe.filter, {**known, **results}):
            truth |= 1 << bits
    plan.truth = truth


def _fill_compare(c: abi.Cmp, compare: Compare, names: _Names) -> None:
    left, right = compare.left, compare.right
    c.op = abi.CMP_OPS.index(compare.op)
    if isinstance(left, StrLit) or isinstance(right, StrLit):
        field, lit = (right, left) if isinstance(left, StrLit) else (left, right)
        if not isinstance(field, Field) or not isinstance(lit, StrLit):
            raise NotGeneric(f"cannot compare {left} with {right}")
        if names.is_cgroup(field.name):
            # the task's cgroup id against the id of the directory the path
            # names: that cgroup exactly (--cgroup takes its descendants too)
            c.kind, c.sign = abi.CMP_INT, 0
            c.lsrc, c.rsrc, c.imm = abi.SRC_CGROUP, abi.SRC_CONST, names.cgroup(lit.value)
            return
        c.kind = abi.CMP_STR
        c.lsrc, c.lreg = names.string(field.name)
        counted = lit.value.encode("utf-8") + b"\0"
        nwords = (len(counted) + 7) // 8
        padded = counted.ljust(nwords * 8, b"\0")
        for w in range(nwords):
            c.str[w] = int.from_bytes(padded[w * 8:(w + 1) * 8], "little")
        c.nwords = nwords
        tail = len(counted) - (nwords - 1) * 8
        c.last_mask = (1 << (8 * tail)) - 1
        return
    a, b = _int_operand(left, names), _int_operand(right, names)
    c.kind = abi.CMP_INT
    c.sign = int(a.signed or b.signed)
    c.lsrc, c.lreg = a.src, a.reg
    c.rsrc, c.rreg = b.src, b.reg
    c.imm = (a.imm if a.src == abi.SRC_CONST else b.imm) & (2**64 - 1)


def _never_equal(compare: Compare, names: _Names) -> bool:
    """A string comparison whose literal cannot fit the field it is compared with."""
    left, right = compare.left, compare.right
    if not (isinstance(left, StrLit) or isinstance(right, StrLit)):
        return False
    field, lit = (right, left) if isinstance(left, StrLit) else (left, right)
    if not isinstance(field, Field) or not isinstance(lit, StrLit) or names.is_cgroup(field.name):
        return False
    src, _ = names.string(field.name)
    capacity = 16 if src == abi.SRC_COMM_STR else abi.STRING_MAX
    return len(lit.value.encode("utf-8")) >= capacity


def _int_operand(operand, names: _Names) -> _Operand:
    if isinstance(operand, IntLit):
        return _Operand(abi.SRC_CONST, imm=operand.value, signed=operand.value < 0)
    if isinstance(operand, Field):
        return names.integer(operand.name)
    raise NotGeneric(f"cannot use {operand} as a number")


def _evaluate(node: FilterExpr, results: dict[Compare, bool]) -> bool:
    if isinstance(node, And):
        return _evaluate(node.left, results) and _evaluate(node.right, results)
    if isinstance(node, Or):
        return _evaluate(node.left, results) or _evaluate(node.right, results)
    if isinstance(node, Not):
        return not _evaluate(node.operand, results)
    return results[node]


def as_span_start(plan: abi.Plan, end_index: int, end_gen: int, nkeys: int | None = None) -> None:
    """`plan` (of a span's START probe) made the start of the span whose
    end is slot `end_index` of generation `end_gen`: its first `nkeys`
    fetches are the key (None: all of them), the rest the values its end
    reads of it (`start.X`, lang.spans.start_with_values), all read before
    it is stored; it emits nothing."""
    nkeys = plan.nfetch if nkeys is None else nkeys
    _span_keys(plan, nkeys)
    if plan.nfetch - nkeys > abi.SPAN_VALS:  # (before the values are checked as keys: this is what is wrong)
        raise NotGeneric(f"a span's start carries at most {abi.SPAN_VALS} values to its end")
    _span_keys(plan, plan.nfetch, abi.SPAN_KEYS + abi.SPAN_VALS)  # its values are integers too
    plan.flags = (plan.flags | abi.F_SPAN_START) & ~(abi.F_BARE | abi.F_EMITS)
    plan.span, plan.span_gen, plan.span_nkeys = end_index + 1, end_gen, nkeys
    plan.span_nvals = plan.nfetch - nkeys
    plan.fetch_before = (1 << plan.nfetch) - 1
    plan.fetch_agg = plan.fetch_after = 0
    plan.flags |= _gathers(plan)


def as_span_end(plan: abi.Plan, index: int, gen: int, nkeys: int) -> None:
    """`plan` (slot `index`, generation `gen`) made a span's end: its first
    `nkeys` fetches are the key, read before its start is looked up; a hit
    is timed (its latency: since the start)."""
    _span_keys(plan, nkeys)
    keys = (1 << nkeys) - 1
    plan.flags = (plan.flags | abi.F_SPAN_END | abi.F_TIME) & ~abi.F_BARE
    plan.span, plan.span_gen, plan.span_nkeys = index + 1, gen, nkeys
    plan.fetch_before |= keys
    plan.fetch_agg &= ~keys
    plan.fetch_after &= ~keys
    plan.flags |= _gathers(plan)


def _gathers(plan: abi.Plan) -> int:
    """What the hit must gather for the fetches it now runs: a span's
    start or end reads fetches that, with events off, no pass ran when
    build_plan derived its flags."""
    return work_flags(plan, 0) & (abi.F_REGS | abi.F_ARGS | abi.F_CPU)


def _span_keys(plan: abi.Plan, nkeys: int, limit: int = abi.SPAN_KEYS) -> None:
    """The first `nkeys` fetches (a key, or a start's key and values): at
    most `limit`, integers."""
    if nkeys > limit:
        raise NotGeneric(f"a span's key holds at most {abi.SPAN_KEYS} values")
    for i in range(nkeys):
        if plan.fetch[i].kind not in (abi.K_UINT, abi.K_SINT):
            raise NotGeneric("a span's key is integers read by the probe (no string, no builtin)")
