"""The generic engine: every probe of a session in one program, by plan.

A probe here is a slot: its plan in ktui_plans, its counters at its index,
its kprobe(s) linked to dispatcher programs of its own (one per kprobe,
see dispatch.py: so the kernel's run-time statistics and recursion misses
are the probe's) with a cookie naming the slot. The
dispatcher tail-calls the program routed to the slot (the generic program,
once it is loaded) and counts hits itself until then. So a probe is live
the moment it is attached, and adding, editing or removing one is a plan
write and a perf_event_open: no compiler, no new buffer, whatever its
fetches and filter.

Each probe's events are exactly as long as its own fields (header
included: plan.record_size), so the ring holds records of
several sizes, interleaved. The reader copies them out grouped by size, in
numpy (kernel/ringbuf.py), and they decode by the history of probes: a
record's tag names its probe, and it is decoded only at that probe's own
size; anything else is counted in `unreadable`, never decoded with the
wrong layout.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
from dataclasses import dataclass, field

from ktui.kernel.maps import bpfsys
from ktui.kernel.attach import kprobe_pmu, tracepoint_pmu, uprobe_pmu
from ktui.kernel.maps.runstats import probe_runs
from ktui.kernel.generic import abi
from ktui.kernel.generic.counter import Counters
from ktui.kernel.generic.who import forget_slot, hitters_by_slot, top_cgroups, top_comms
from ktui.kernel.generic.dispatch import Dispatcher
from ktui.kernel.generic.loader import LoadedProgram
from ktui.kernel.codegen.runtime import COMM_EXACT
from ktui.kernel.generic.plan import NotGeneric, as_span_end, as_span_start, build_plan, errno_check
from ktui.lang.model import Kind, Probe
from ktui.record.feed import ProbeStats
from ktui.record.histogram import HIST_SLOTS
from ktui.record.layout import HEADER_SIZE

__all__ = ["GenericEngine", "NotGeneric", "Slot"]

TOP_COMMS = 5  # and cgroups: the same sample's other half
# per-CPU counters indexed by slot: zeroed when a slot is reused
_SLOT_COUNTERS = ("ktui_hits", "ktui_emitted", "ktui_lost", "ktui_sampled", "ktui_window", "ktui_hist",
                  "ktui_lat_sum", "ktui_comms_drop", "ktui_unpaired", "ktui_unstored", "ktui_nested",
                  "ktui_errno_rest", "ktui_vhist", "ktui_vhist_sum", "ktui_agg_drops", "ktui_lost_full", "ktui_stack_drop",
                  "ktui_replaced", "ktui_matched", "ktui_unmatched")
# the aggregations' shared hash maps, keyed by the probe's tag first (abi.AggKey...)
_TAGGED_MAPS = (("ktui_aggs", abi.AggKey), ("ktui_agg_lost", abi.AggKey), ("ktui_stacks", abi.StackKey),
                ("ktui_ustacks", abi.UStackKey))


@dataclass
class Slot:
    """One probe in the engine."""

    index: int
    gen: int
    probe: Probe
    probe_id: int  # the session's id for it
    fds: list[int] = field(default_factory=list)  # perf and link fds while attached
    # its dispatcher programs, for as long as the slot lives: [return or
    # call, entry half (return probes)]; the first one's runs are the probe's
    progs: list[int] = field(default_factory=list)
    # by fentry/fexit (kernel/attach_choice): the FUNC's BTF id and argument
    # count its tracing copies are loaded for; 0: by kprobe
    btf_id: int = 0
    nargs: int = 0
    # its tracing copies (loaded on first attach, kept while the slot
    # lives): [fexit or fentry, fentry entry half (return probes)]
    tprogs: list[int] = field(default_factory=list)
    # a counting probe (a call, plan F_BARE, no --comm): its programs are
    # counter.py's, which count by themselves (no dispatcher, no plan)
    counter: bool = False
    # a wildcard (probe.members): each match's site, in the members' order
    # and in a row (abi.COOKIE_SITE_SHIFT: its hits by function, and
    # SRC_FUNC: which function an event's hit came from); `multi`: all of them
    # in kprobe_multi links (5.18+), run by the slot's own copy of the
    # kprobe variant (slot.progs), else one perf probe each
    sites: tuple[int, ...] = ()
    multi: bool = False
    # `within:` a gate's own slot (on its function's entry and return: each
    # thread's depth inside it), or the index of the gate a probe counts
    # inside (-1: none)
    gate: bool = False
    gated_by: int = -1
    # a gate between two events (`within(START .. END)`): each end is a gate
    # slot of its own, "start" or "end", and the START's index keys the
    # depths of both ("": a gate on one function, keyed by itself)
    gate_side: str = ""
    gate_key: int = -1
    # a gate removed: how many threads were still inside it (their depths
    # deleted with it: a thread that ended inside never leaves)
    left_inside: int = 0
    # a span's start (`since:`): the slot of the span's end, whose key it
    # stores under (program.c: ktui_spans); None: not a start. A span's end
    # is the slot whose probe has `since`.
    span_end: "Slot | None" = None
    # its filter's cgroup paths -> ids, resolved when it was added: a plan
    # written again (the program loaded late) keeps comparing with those
    # cgroups, even if their directories have gone since (then no task is
    # in them); a probe edited (added anew) resolves again
    cgroup_ids: dict[str, int] = field(default_factory=dict)

    @property
    def tracing(self) -> bool:
        return self.btf_id != 0

    @property
    def tracepoint(self) -> bool:
        """It runs its own copy of the tracepoint variant (slot.progs),
        attached to a tracepoint: no dispatcher, no early count."""
        return self.probe.kind is Kind.TRACEPOINT

    @property
    def waits_for_program(self) -> bool:
        """It attaches once the generic program is in, not before: nothing
        would count its hits meanwhile (a tracepoint's program is its own
        copy; a wildcard's hits by function are the program's to count; a
        gate's depths and a gated probe's check are the program's too)."""
        return self.tracepoint or bool(self.sites) or self.gate or self.gated_by >= 0 or self.in_span

    @property
    def in_span(self) -> bool:
        """One end of a span: its hits are the program's to join."""
        return self.span_end is not None or self.probe.since is not None

    @property
    def via(self) -> str:
        """What the probe runs on: fentry, fexit, kprobe, kretprobe,
        kprobe_multi, kretprobe_multi, tracepoint, uprobe, uretprobe or usdt."""
        if self.tracepoint:
            return "tracepoint"
        if self.multi:
            return "kretprobe_multi" if self.probe.kind is Kind.RETURN else "kprobe_multi"
        if self.probe.kind is Kind.USDT:
            return "usdt"
        ret = self.probe.kind is Kind.RETURN
        if self.probe.target.is_user:
            return "uretprobe" if ret else "uprobe"
        if self.tracing:
            return "fexit" if ret else "fentry"
        return "kretprobe" if ret else "kprobe"

    @property
    def tag(self) -> int:
        """What its events carry in the record header's probe field."""
        return self.index | self.gen << abi.COOKIE_GEN_SHIFT

    def cookie(self, early: bool) -> int:
        return self.tag | (abi.COOKIE_EARLY if early else 0)

    def site_cookies(self, entry: bool = False) -> list[int]:
        """A wildcard's cookies, one per member: the slot and the member's site."""
        base = self.cookie(False) | (abi.COOKIE_ENTRY if entry else 0)
        return [base | site << abi.COOKIE_SITE_SHIFT for site in self.sites]


def slot_cgroup_id(slot: Slot):
    """A filter's cgroup path -> its id, each resolved the first time the
    slot's plan is built (Slot.cgroup_ids); CgroupError, one line, where
    it names no cgroup v2 directory."""
    def resolve(path: str) -> int:
        if path not in slot.cgroup_ids:
            from ktui.kernel.attach.cgroup_scope import cgroup_id

            slot.cgroup_ids[path] = cgroup_id(path)
        return slot.cgroup_ids[path]
    return resolve


class GenericEngine:
    # False: no plan writes events (SessionOptions.events; the session sets it)
    events: bool = True

    def __init__(self, *, exclude_pids: tuple[int, ...], pid: int | None, comm: str | None) -> None:
        """`exclude_pids`: ktui's own processes (itself, its compile helper),
        whose hits no count takes; `pid`, `comm`: the set-wide filters."""
        self.pid = pid
        self.comm = comm
        self.cgroup_fd: int | None = None  # --cgroup: its directory (limit_to_cgroup)
        self.exclude_pids = tuple(exclude_pids)
        # where a hit's context is read (kernel/symbols/interrupt_context): 0s, not known
        self.context: tuple[int, int, int] = (0, 0, 0)
        self.dispatcher = Dispatcher(self.exclude_pids, pid)
        # counting probes' own programs (counter.py); None where they cannot
        # run (a --comm filter, which they do not read; a kernel refusing them)
        self.counters: Counters | None = None
        self.counters_refused = ""  # why the kernel refused them: the session logs it
        if comm is None:
            self.counters, self.counters_refused = _counters_if_loadable(self.dispatcher.exclude_fd, pid)
        self.program: LoadedProgram | None = None
        self.tracing = None  # the tracing variant's CompiledProgram, once loaded (fentry slots)
        self.tracepoint = None  # the tracepoint variant's CompiledProgram, once loaded (tracepoint slots)
        self.slots: dict[int, Slot] = {}
        self._lost_keys = None  # aggregates.LostKeys, made at the first read of a probe losing keys
        self._gens = [0] * abi.MAX_PROBES  # a slot's generation: 0 = never used
        # sites held by wildcards; site 0 means "not a wildcard"
        self._sites_used = bytearray(abi.MAX_SITES)
        self._sites_used[0] = 1
        self._next = 0  # where the search for a free slot starts
        self._lock = threading.RLock()
        self._ncpus = bpfsys.possible_cpus()
        # every probe the session ran, by the tag its events carry: events of
        # a removed probe may still be in the ring when its slot is reused
        self._history: dict[int, tuple[Probe, int]] = {}
        self._decoders = None  # record.decode.SizedDecoders of the current history
        self.reader = None
        # names user frames of `stack: user`/`both` (kernel/symbols/usyms.UserSymbols), or None
        self.user_symbols = None
        # records drained that no probe of the history could have written at
        # their size (never from ktui's program): counted, not decoded
        self.unreadable = 0

    # the cgroup fetch's id -> path (cgroup_names), made when first asked
    # (a class default: tests and benchmarks make engines without __init__)
    _cgroup_names = None

    @property
    def cgroup_names(self):
        """id -> path under the cgroup v2 mount, for events and count keys."""
        if self._cgroup_names is None:
            from ktui.kernel.attach.cgroup_scope import cgroup2_root
            from ktui.kernel.symbols.cgroup_names import CgroupNames

            self._cgroup_names = CgroupNames(cgroup2_root())
        return self._cgroup_names

    def limit_to_cgroup(self, cgroup_fd: int) -> None:
        """--cgroup, before any probe: only tasks under this cgroup v2
        directory count (the engine owns the fd from now on). Neither the
        dispatcher's early counts nor the counting probes' own programs read
        it, so, as with --comm, there are none: every hit goes through the
        generic program's set-wide filter."""
        self.cgroup_fd = cgroup_fd
        if self.counters is not None:
            self.counters.close()
            self.counters, self.counters_refused = None, "a --cgroup filter, which they do not read"

    def counts_early(self, slot: Slot) -> bool:
        """Whether the dispatcher counts the slot's hits until the program is
        in: only where no filter of the program's is needed to count them."""
        return (self.comm is None and self.cgroup_fd is None and slot.probe.filter is None
                and not slot.gate and slot.gated_by < 0 and not slot.in_span)

    # ------------------------------------------------------------ slots

    def add(self, probe: Probe, probe_id: int, btf_id: int = 0, nargs: int = 0, *, multi: bool = False,
            gate: bool = False, gated_by: int = -1, span_end: Slot | None = None, gate_side: str = "",
            gate_start: Slot | None = None) -> Slot:
        """A slot for `probe` (not attached yet). NotGeneric if the generic
        program cannot run it; then nothing was allocated. `btf_id`: it goes
        by fentry/fexit to that function (of `nargs` arguments). A wildcard
        (probe.members bound) gets a site per member; `multi`: its
        functions go in kprobe_multi links. `gate`: the slot is a gate (a
        return probe on its function, keeping threads' depths inside it);
        `gated_by`: the gate slot the probe counts inside. `span_end`: the
        slot is the start of that span's end. `gate_side`: the slot is the
        "start" or the "end" of a gate between two events (with `gate`), the
        end's `gate_start` the start's slot."""
        with self._lock:
            # Round robin: a freed slot comes back only after every other one
            # was used, so its old errno and comm entries (cleared by a scan
            # of those maps) rarely need clearing.
            index = next((i % abi.MAX_PROBES for i in range(self._next, self._next + abi.MAX_PROBES)
                          if i % abi.MAX_PROBES not in self.slots), None)
            if index is None:
                raise NotGeneric(f"more than {abi.MAX_PROBES} probes at once")
            gen = (self._gens[index] + 1) & 0xFFFF
            slot = Slot(index, gen, probe, probe_id, btf_id=btf_id, nargs=nargs, gate=gate, gated_by=gated_by,
                        span_end=span_end, gate_side=gate_side,
                        gate_key=gate_start.index if gate_start is not None else index if gate_side else -1)
            # NotGeneric (or a filter's CgroupError) before anything is taken
            plan = build_plan(probe, gen=gen, tracing=slot.tracing, cgroup_id=slot_cgroup_id(slot),
                              events=self.events)
            members = probe.members or ()
            base = self._free_sites(len(members)) if members else 0
            if base is None:
                raise NotGeneric(f"{len(members)} matches, and the wildcards running leave no "
                                 f"{len(members)} of the {abi.MAX_SITES - 1} places to count them in a row")
            slot.multi = multi and bool(members)
            slot.counter = bool(self.counters is not None and probe.kind is Kind.CALL and plan.flags & abi.F_BARE
                                and not members and gated_by < 0 and not slot.in_span and not gate)
            # (a counter's program: no function, no gate, no span)
            halves = 2 if probe.kind is Kind.RETURN else 1
            if slot.tracepoint or slot.multi:
                halves = 0  # its own copy of the program, loaded when it attaches
            try:
                if slot.counter:
                    slot.progs.append(self.counters.load(index, f"ktui_c{index}"))
                for half in range(0 if slot.counter else halves):
                    slot.progs.append(self.dispatcher.load(f"ktui_d{index}{'e' if half else ''}"))
            except BaseException:
                _close_all(slot.progs)
                raise
            self._next = index + 1
            slot.sites = tuple(range(base, base + len(members)))
            self._sites_used[base:base + len(members)] = b"\1" * len(members)
            self._gens[index] = gen
            self.slots[index] = slot
            self._history[slot.tag] = (probe, probe_id)
            self._clear_counters(index)  # a reused slot starts from zero
            if self.program is not None:
                self._install(slot)
            return slot

    def _free_sites(self, count: int) -> int | None:
        """The first of `count` free sites in a row (a wildcard's, in its
        members' order: a hit's function is its site less the first), or
        None where no such run is left."""
        run = bytes(count)
        at = self._sites_used.find(run, 1)
        return at if at > 0 else None

    def _write_plan(self, slot: Slot) -> None:
        plan = build_plan(slot.probe, gen=slot.gen, tracing=slot.tracing, cgroup_id=slot_cgroup_id(slot),
                          events=self.events)
        plan.site_base = slot.sites[0] if slot.sites else 0
        if slot.gate:  # its hits keep depths: no event, never the bare paths (which keep none)
            plan.flags = (plan.flags | abi.F_GATE) & ~(abi.F_BARE | abi.F_EMITS)
            if slot.gate_side:  # one end of a gate between two events: its START's slot keys the depths
                plan.gate = slot.gate_key + 1
                plan.flags |= abi.F_GATE_END if slot.gate_side == "end" else 0
        if slot.gated_by >= 0:
            plan.gate = slot.gated_by + 1
            plan.flags &= ~abi.F_BARE  # the bare paths do not look at the gate
        if slot.span_end is not None:  # its key, then the values its end reads (lang.spans.start_with_values)
            as_span_start(plan, slot.span_end.index, slot.span_end.gen, len(slot.span_end.probe.since.fetches))
        if slot.probe.since is not None:
            as_span_end(plan, slot.index, slot.gen, len(slot.probe.since.fetches))
        bpfsys.map_update(self._map("ktui_plans"), struct.pack("<I", slot.index), bytes(plan))

    def _install(self, slot: Slot) -> None:
        """Plan, then the route: the slot is the program's (a counting
        probe's is its own program: nothing to route)."""
        if slot.counter:
            return
        self._write_plan(slot)
        self._clear_sites(slot)
        if not (slot.tracepoint or slot.multi):  # its own program reads the plan itself
            self.dispatcher.route(slot.index, self.program.prog_fd)

    def remove(self, slot: Slot) -> None:
        self.detach(slot)
        with self._lock:
            if slot.probe.agg is not None and self.program is not None:
                self._forget(slot.index)  # its keys and stacks would take room from the others
            if slot.probe.since is not None and self.program is not None:
                self._forget_starts(slot.index)  # starts that never ended would fill the map for good
            if slot.gate and slot.gate_side != "end" and self.program is not None:
                # threads still inside (a thread that ended inside, or one
                # between START and END now): a gate made later in this slot
                # would read them as inside it
                slot.left_inside = self._forget_depths(slot.index)
            self.dispatcher.unroute(slot.index)
            self.slots.pop(slot.index, None)
            if slot.sites:
                self._sites_used[slot.sites[0]:slot.sites[-1] + 1] = bytes(len(slot.sites))
            slot.sites = ()
            progs, slot.progs = slot.progs + slot.tprogs, []
            slot.tprogs = []
            _close_all(progs)  # nothing links to them now

    def to_kprobe(self, slot: Slot) -> None:
        """A fentry slot the kernel refused: by kprobe from now on (its plan
        reads registers again; its tracing copies, if any, go)."""
        with self._lock:
            slot.btf_id = slot.nargs = 0
            progs, slot.tprogs = slot.tprogs, []
            _close_all(progs)
            if self.program is not None:
                self._write_plan(slot)

    # ------------------------------------------------------------ attach

    def attach(self, slot: Slot, symbol: str | None, offset: int, address: int | None,
               open_return=None) -> None:
        """kprobe (and for a return probe, its entry kprobe first), linked
        to the dispatcher with the slot's cookie. `open_return() -> perf fd`
        opens a return probe's kretprobe (its tracefs event, where misses
        are counted: kretprobe_events); None: through the PMU. Raises OSError."""
        def open_pmu(retprobe: bool):
            return lambda: kprobe_pmu.open_kprobe(symbol, offset, retprobe, address)

        self._attach_halves(slot, open_pmu, open_return)

    def attach_wildcard(self, slot: Slot) -> None:
        """Every function of a wildcard, each with its site in the cookie:
        in kprobe_multi links (a return probe's entry half in one, its
        returns in another) run by the slot's own copy of the kprobe
        variant, or one perf kprobe (two for a return probe) per function,
        linked to the slot's dispatchers. Raises OSError; nothing stays
        attached then."""
        if slot.fds:
            return
        members = list(slot.probe.members or ())
        retprobe = slot.probe.kind is Kind.RETURN
        fds: list[int] = []
        try:
            if slot.multi:
                from ktui.kernel.generic.loader import load_kprobe_multi_copy

                assert self.program is not None and self.program.compiled is not None
                if not slot.progs:
                    slot.progs = [load_kprobe_multi_copy(self.program.compiled, self.program.maps,
                                                         name=f"ktui_m{slot.index}")]
                if retprobe:
                    fds.append(bpfsys.link_kprobe_multi(slot.progs[0], members, slot.site_cookies(entry=True)))
                fds.append(bpfsys.link_kprobe_multi(slot.progs[0], members, slot.site_cookies(), retprobe))
            else:
                entries = slot.site_cookies(entry=True)
                for member, cookie, entry in zip(members, slot.site_cookies(), entries):
                    if retprobe:
                        fds += self._link(slot.progs[1], entry,
                                          lambda m=member: kprobe_pmu.open_kprobe(m, 0, False, None))
                    fds += self._link(slot.progs[0], cookie,
                                      lambda m=member: kprobe_pmu.open_kprobe(m, 0, retprobe, None))
        except BaseException:
            kprobe_pmu.detach_all(fds)
            raise
        slot.fds = fds

    def attach_user(self, slot: Slot, path: str, file_offsets: tuple[int, ...], pid: int | None,
                    ref_ctr_offset: int = 0) -> None:
        """Uprobes at `file_offsets` of `path` (a USDT probe point inlined
        in several places has several; a return probe one, and its entry
        uprobe first), linked to the dispatcher as a kprobe is (a uprobe
        runs kprobe programs), each with the slot's cookie; `pid`: only that
        process takes the breakpoint (a pid-scoped perf event);
        `ref_ctr_offset`: a USDT semaphore's, raised while attached.
        Raises OSError; nothing stays attached then."""
        if slot.probe.kind is Kind.RETURN:
            (offset,) = file_offsets
            self._attach_halves(slot, lambda retprobe: lambda: uprobe_pmu.open_uprobe(
                path, offset, retprobe, pid, ref_ctr_offset), None)
            return
        if slot.fds:
            return
        early = self.counts_early(slot)
        fds: list[int] = []
        try:
            for offset in file_offsets:
                fds += self._link(slot.progs[0], slot.cookie(early), lambda offset=offset: uprobe_pmu.open_uprobe(
                    path, offset, False, pid, ref_ctr_offset))
        except BaseException:
            kprobe_pmu.detach_all(fds)
            raise
        slot.fds = fds

    def _attach_halves(self, slot: Slot, open_pmu, open_return) -> None:
        if slot.fds:
            return
        early = self.counts_early(slot)
        retprobe = slot.probe.kind is Kind.RETURN
        fds: list[int] = []
        try:
            if retprobe:
                fds += self._link(slot.progs[1], slot.cookie(False) | abi.COOKIE_ENTRY, open_pmu(False))
            fds += self._link(slot.progs[0], slot.cookie(early),
                              open_return if retprobe and open_return else open_pmu(retprobe))
        except BaseException:
            kprobe_pmu.detach_all(fds)
            raise
        slot.fds = fds

    def attach_tracing(self, slot: Slot) -> None:
        """fentry (fexit, and an fentry entry half first, for a return
        probe): a copy of the tracing variant per half, loaded for the
        slot's function on first use. The fds are links: closing them
        detaches. Raises OSError (the verifier, EBUSY, ENOTSUPP...)."""
        from ktui.kernel.generic.loader import load_tracing_copy

        if slot.fds:
            return
        if slot.counter and not slot.tprogs:
            slot.tprogs = [self.counters.load(slot.index, f"ktui_cf{slot.index}", slot.btf_id,
                                              bpfsys.BPF_TRACE_FENTRY)]
        assert slot.counter or (self.program is not None and self.tracing is not None)
        retprobe = slot.probe.kind is Kind.RETURN
        if not slot.tprogs:
            halves = [(bpfsys.BPF_TRACE_FEXIT if retprobe else bpfsys.BPF_TRACE_FENTRY, slot.cookie(False))]
            if retprobe:
                halves.append((bpfsys.BPF_TRACE_FENTRY, slot.cookie(False) | abi.COOKIE_ENTRY))
            progs: list[int] = []
            try:
                for half, (attach_type, cookie) in enumerate(halves):
                    progs.append(load_tracing_copy(
                        self.tracing, self.program.maps, cookie=cookie, nargs=slot.nargs,
                        btf_id=slot.btf_id, attach_type=attach_type,
                        name=f"ktui_f{slot.index}{'e' if half else ''}"))
            except BaseException:
                _close_all(progs)
                raise
            slot.tprogs = progs
        fds: list[int] = []
        try:
            for prog in reversed(slot.tprogs):  # the entry half before the exit
                fds.append(bpfsys.attach_tracing(prog))
        except BaseException:
            _close_all(fds)
            raise
        slot.fds = fds

    def attach_tracepoint(self, slot: Slot, event_ids: list[int]) -> None:
        """The slot's own copy of the tracepoint variant (loaded on first
        attach, kept while the slot lives), linked to each tracepoint of
        `event_ids` (one, or a wildcard's, each with its site) with the
        slot's cookie. Raises OSError (the verifier, EACCES...); nothing
        stays attached then."""
        from ktui.kernel.generic.loader import load_tracepoint_program

        if slot.fds:
            return
        assert self.program is not None and self.tracepoint is not None
        if not slot.progs:
            slot.progs = [load_tracepoint_program(self.tracepoint, self.program.maps, name=f"ktui_t{slot.index}")]
        cookies = slot.site_cookies() if slot.sites else [slot.cookie(False)]
        fds: list[int] = []
        try:
            for event_id, cookie in zip(event_ids, cookies, strict=True):
                fds += self._link(slot.progs[0], cookie, lambda e=event_id: tracepoint_pmu.open_tracepoint(e))
        except BaseException:
            kprobe_pmu.detach_all(fds)
            raise
        slot.fds = fds

    def _link(self, prog_fd: int, cookie: int, open_event) -> list[int]:
        perf_fd = open_event()
        try:
            link_fd = bpfsys.link_perf_event(prog_fd, perf_fd, cookie)
            kprobe_pmu.ioctl(perf_fd, kprobe_pmu.PERF_EVENT_IOC_ENABLE, 0)
        except BaseException:
            os.close(perf_fd)
            raise
        return [link_fd, perf_fd]

    def detach(self, slot: Slot) -> None:
        fds, slot.fds = slot.fds, []
        kprobe_pmu.detach_all(fds)

    # ------------------------------------------------------------ the program

    def install_program(self, program: LoadedProgram) -> None:
        """The generic program is loaded: configure it and route every slot
        to it (each slot's early count stops as its route goes in)."""
        from ktui.kernel.buffers.ringbuf import RingBufReader

        with self._lock:
            self.program = program
            ring = program.specs["ktui_events"]["max_entries"]
            self.reader = RingBufReader(self._map("ktui_events"), ring, HEADER_SIZE)
            if self.cgroup_fd is not None:
                bpfsys.map_update(self._map("ktui_cgroup"), b"\0\0\0\0", struct.pack("<I", self.cgroup_fd))
            bpfsys.map_update(self._map("ktui_config"), b"\0\0\0\0", bytes(self._config()))
            for slot in list(self.slots.values()):
                self._install(slot)

    def exclude(self, pids: tuple[int, ...]) -> None:
        """Leave these processes of ktui's out from now on (a compile helper
        started after the probes: compile_child.py)."""
        with self._lock:
            self.exclude_pids = tuple(pids)
            self.dispatcher.exclude(self.exclude_pids)
            if self.program is not None:
                bpfsys.map_update(self._map("ktui_config"), b"\0\0\0\0", bytes(self._config()))

    def _config(self) -> abi.Config:
        config = abi.Config()
        config.pid = self.pid or 0
        config.has_cgroup = int(self.cgroup_fd is not None)
        config.exclude_pids[:len(self.exclude_pids)] = self.exclude_pids
        config.context_cpu_offsets, config.context_preempt_count, config.context_nmi_state = self.context
        if self.comm is not None:
            data = self.comm.encode("utf-8") + b"\0"
            padded = data.ljust(16, b"\0")[:16]
            mask = (b"\xff" * len(data)).ljust(16, b"\0")[:16]
            config.has_comm = 1
            for w in range(2):
                config.comm_words[w] = int.from_bytes(padded[w * 8:w * 8 + 8], "little")
                config.comm_mask[w] = int.from_bytes(mask[w * 8:w * 8 + 8], "little")
        return config

    def _map(self, name: str) -> int:
        assert self.program is not None
        return self.program.maps[name]

    def _clear_counters(self, index: int) -> None:
        """Zero a slot's counters: the dispatcher's, and the program's once
        it is in (its maps start zeroed)."""
        key = struct.pack("<I", index)
        bpfsys.map_update(self.dispatcher.early_fd, key, bytes(self._percpu_size(8)))
        if self.counters is not None:
            self.counters.clear(index, reused=self._gens[index] > 1)
        if self.program is None:
            return
        for name in _SLOT_COUNTERS:
            spec = self.program.specs[name]
            bpfsys.map_update(self._map(name), key, bytes(self._percpu_size(spec["value_size"])))
        bpfsys.map_update(self._map("ktui_agg_nkeys"), key, bytes(8))
        if self._gens[index] <= 1:
            return  # first use of the slot: no errno, comm or aggregation entry can be its
        zero = bytes(8)
        errnos = self._map("ktui_errnos")
        for k in range(index * abi.ERRNO_BUCKETS, (index + 1) * abi.ERRNO_BUCKETS):
            bpfsys.map_update(errnos, struct.pack("<I", k), zero)
        forget_slot(self._map("ktui_comms"), index)
        self._forget(index)
        # its old entry stacks need no clearing: a new generation starts them empty

    def _clear_sites(self, slot: Slot) -> None:
        """A wildcard's sites start from zero (they may be a removed one's)."""
        zero = bytes(self._percpu_size(self.program.specs["ktui_sites"]["value_size"]))
        for site in slot.sites:
            bpfsys.map_update(self._map("ktui_sites"), struct.pack("<I", site), zero)

    def _forget(self, index: int) -> None:
        """Delete a slot's entries from the aggregations' shared maps (every
        generation's: a key's tag is the slot and its generation)."""
        for name, key_type in _TAGGED_MAPS:
            fd = self._map(name)
            for raw in bpfsys.map_keys(fd, ctypes.sizeof(key_type)):
                if struct.unpack_from("<I", raw)[0] & abi.COOKIE_SLOT_MASK == index:
                    bpfsys.map_delete(fd, raw)

    def _forget_depths(self, index: int) -> int:
        """Delete the depths kept in ktui_gates by the gate whose key is
        slot `index`: how many threads were inside it."""
        fd = self._map("ktui_gates")
        gone = 0
        for raw in bpfsys.map_keys(fd, 8):
            if struct.unpack_from("<I", raw)[0] == index:
                bpfsys.map_delete(fd, raw)
                gone += 1
        return gone

    def _forget_starts(self, index: int) -> None:
        """Delete the starts still waiting in ktui_spans for the span whose
        end is slot `index` (any generation's)."""
        fd = self._map("ktui_spans")
        for raw in bpfsys.map_keys(fd, 8 + 8 * abi.SPAN_KEYS):
            if struct.unpack_from("<I", raw)[0] == index:
                bpfsys.map_delete(fd, raw)

    def _percpu_size(self, value_size: int) -> int:
        return ((value_size + 7) // 8 * 8) * self._ncpus

    # ------------------------------------------------------------ reading

    def drain(self):
        """Every event since the last call, as one batch in ring order
        (EmptyBatch when the program is not in yet)."""
        from ktui.record.decode import EmptyBatch

        with self._lock:
            reader = self.reader
            if reader is None:
                return EmptyBatch()
            raw = reader.drain()
            if not len(raw):
                return EmptyBatch()
            batch, unreadable = self._decoders_now().split(raw)
            self.unreadable += unreadable
        return batch

    def capacity(self) -> int | None:
        """Records the event ring holds, at the sizes lately drained (None
        before the program is in)."""
        with self._lock:
            return self.reader.capacity() if self.reader is not None else None

    def _decoders_now(self):
        """Decoders for every probe the session ran (events of a removed one
        may still be in the ring when its slot is reused), by tag."""
        tags = sorted(self._history)
        if self._decoders is None or self._decoders_tags != tags:
            from ktui.record.decode import SizedDecoders

            self._decoders = SizedDecoders([self._history[t][0] for t in tags],
                                           [self._history[t][1] for t in tags], tags=tags,
                                           cgroup_name=self.cgroup_names)
            self._decoders_tags = tags
        return self._decoders

    def _decoder(self, size: int):
        """The decoder of records of `size` bytes (for tests and benchmarks)."""
        return self._decoders_now().decoder(size)

    def stats(self, timed: bool = False, *, detail: bool = True) -> dict[int, ProbeStats]:
        """Counters of every slot, by the session's probe id; with `timed`
        (the run-time statistics are on) run_ns and run_count too.
        `detail=False` leaves out keys_dropped and the stacks (see
        _aggregates)."""
        import numpy as np

        with self._lock:
            slots = dict(self.slots)
            runs = {i: self._runs(s, timed) for i, s in slots.items()}
        if not slots:
            return {}
        count = max(slots) + 1
        early = self._sum_counters(self.dispatcher.early_fd, count, np)
        counting = {i: s for i, s in slots.items() if s.counter}
        out = self._counting_stats(counting, count, runs) if counting else {}
        if self.program is None:
            out.update({s.probe_id: ProbeStats(probe_id=s.probe_id, hits=int(early[i]), counted_only=int(early[i]),
                                               **runs[i])
                        for i, s in slots.items() if not s.counter})
            return out
        slots = {i: s for i, s in slots.items() if not s.counter}
        per_cpu_hits = self._per_cpu_counters(self._map("ktui_hits"), count, np)
        hits = per_cpu_hits.sum(axis=1)
        counters = {name: self._sum_counters(self._map(name), count, np)
                    for name in ("ktui_emitted", "ktui_lost", "ktui_lat_sum", "ktui_unpaired", "ktui_unstored",
                                 "ktui_nested", "ktui_errno_rest", "ktui_replaced", "ktui_matched",
                                 "ktui_unmatched")}
        hitters = hitters_by_slot(self._map("ktui_comms")) if slots else {}
        aggregates = self._aggregates(slots, count, np, detail)
        members = self._members(slots, np)
        for i, slot in slots.items():
            hist: tuple[int, ...] = ()
            errnos: dict[int, int] = {}
            ret = slot.probe.kind is Kind.RETURN
            if slot.probe.timed:  # a return probe, a span's end: latencies
                hist = self._hist(i, np)
            if ret:
                errnos = self._errnos(i, np)
            out[slot.probe_id] = ProbeStats(
                probe_id=slot.probe_id, hits=int(early[i] + hits[i]), emitted=int(counters["ktui_emitted"][i]),
                lost=int(counters["ktui_lost"][i]),
                counted_only=int(early[i]),
                hist=hist,
                latency_sum_ns=int(counters["ktui_lat_sum"][i]) if hist else 0,
                errnos=tuple(sorted(errnos.items(), key=lambda kv: -kv[1])),
                errnos_other=int(counters["ktui_errno_rest"][i]),
                errno_check=errno_check(slot.probe) if ret else "",
                top_comms=top_comms(hitters, i, TOP_COMMS),
                top_cgroups=top_cgroups(hitters, i, TOP_COMMS, self.cgroup_names),
                # exact while no CPU has counted past its exact first hits
                top_comms_exact=bool((per_cpu_hits[i] <= COMM_EXACT).all()),
                unpaired=int(counters["ktui_unpaired"][i]),
                entries_unstored=int(counters["ktui_unstored"][i]),
                nest_dropped=int(counters["ktui_nested"][i]),
                span_replaced=int(counters["ktui_replaced"][i]),
                span_matched=int(counters["ktui_matched"][i]),
                span_unmatched=int(counters["ktui_unmatched"][i]),
                **runs[i],
                **aggregates.get(i, {}),
                **members.get(i, {}),
            )
        return out

    def _members(self, slots: dict[int, Slot], np) -> dict[int, dict]:
        """Wildcards' hits (and latencies) by function, from ktui_sites: one
        read of each wildcard's own sites (they are in a row), never of the
        whole array, whose per-CPU values grow with the machine's CPUs."""
        out = {}
        for i, slot in slots.items():
            if not slot.sites:
                continue
            raw = bpfsys.array_lookup_all(self._map("ktui_sites"), len(slot.sites), 16 * self._ncpus,
                                          start=slot.sites[0])
            counts = np.frombuffer(raw, dtype=np.uint64).reshape(len(slot.sites), self._ncpus, 2).sum(axis=1)
            hit = [(name, int(h), int(lat)) for name, (h, lat) in zip(slot.probe.members or (), counts.tolist())
                   if h]
            hit.sort(key=lambda m: (-m[1], m[0]))
            out[i] = {"members": tuple(hit), "member_count": len(slot.sites)}
        return out

    def _counting_stats(self, slots: dict[int, Slot], count: int, runs: dict) -> dict[int, ProbeStats]:
        """Counting probes' stats, from their own maps (counter.py): exact
        top processes while the count is within its exact first hits."""
        hits = self.counters.hits(count)
        hitters = self.counters.hitters()
        return {s.probe_id: ProbeStats(
                    probe_id=s.probe_id, hits=int(hits[i]),
                    top_comms=top_comms(hitters, i, TOP_COMMS),
                    top_cgroups=top_cgroups(hitters, i, TOP_COMMS, self.cgroup_names),
                    top_comms_exact=bool(hits[i] <= COMM_EXACT), **runs[i])
                for i, s in slots.items()}

    @staticmethod
    def _runs(slot: Slot, timed: bool) -> dict[str, int]:
        """The kernel's counts of the slot's own programs (see dispatch.py):
        run time of both halves of a return probe, runs of its return half
        (one per return, as `hits`), recursion misses of both."""
        progs = slot.tprogs if slot.tracing else slot.progs
        return probe_runs([bpfsys.prog_run(fd) for fd in progs], timed)

    def _per_cpu_counters(self, fd: int, count: int, np):
        raw = bpfsys.array_lookup_all(fd, count, 8 * self._ncpus)
        return np.frombuffer(raw, dtype=np.uint64).reshape(count, self._ncpus)

    def _sum_counters(self, fd: int, count: int, np):
        return self._per_cpu_counters(fd, count, np).sum(axis=1)

    def _hist(self, index: int, np, name: str = "ktui_hist") -> tuple[int, ...]:
        size = HIST_SLOTS * 8
        raw = bpfsys.map_lookup(self._map(name), struct.pack("<I", index), size * self._ncpus)
        if raw is None:
            return (0,) * HIST_SLOTS
        per_cpu = np.frombuffer(raw, dtype=np.uint64).reshape(self._ncpus, HIST_SLOTS)
        return tuple(int(x) for x in per_cpu.sum(axis=0))

    def _errnos(self, index: int, np) -> dict[int, int]:
        """The slot's errno table (program.c's ktui_errno_bucket), by errno."""
        raw = bpfsys.array_lookup_all(self._map("ktui_errnos"), abi.ERRNO_BUCKETS, 8,
                                      start=index * abi.ERRNO_BUCKETS)
        counts = np.frombuffer(raw, dtype=np.uint64)
        out = {}
        for bucket in np.flatnonzero(counts).tolist():
            err = bucket if bucket < abi.ERRNO_LOW else abi.ERRNO_HIGH_BASE + bucket - abi.ERRNO_LOW
            out[err] = int(counts[bucket])
        return out

    def _aggregates(self, slots: dict[int, Slot], count: int, np, detail: bool = True) -> dict[int, dict]:
        """ProbeStats fields of every slot's aggregations: one pass over
        each shared map a probe uses, entries of other tags (a removed
        probe's, not yet deleted) left out. Without `detail`, two reads
        are skipped: the lost keys' map (keys_dropped, the distinct keys
        of the dropped hits: a walk of up to KTUI_AGG_MAP_KEYS keys, and
        their decoded copies kept) and the stacks (a walk and a
        symbolization): the exporter exports neither, and it reads every
        second, where the dashboard's reader is a person."""
        mine = {i: s for i, s in slots.items() if s.probe.agg is not None}
        if not mine:
            return {}
        from ktui.kernel.generic import aggregates as read

        dropped = self._sum_counters(self._map("ktui_agg_drops"), count, np)
        out = {i: {"values_dropped": int(dropped[i])} for i in mine}
        tags = {s.tag: i for i, s in mine.items()}
        plain = {i for i, s in mine.items() if s.probe.agg.hist is not None and not s.probe.agg.hist_keys}
        if plain:  # (a keyed histogram is in the count map: read with the counts)
            hist_sums = self._sum_counters(self._map("ktui_vhist_sum"), count, np)
            for i, s in mine.items():
                if i in plain:
                    out[i]["value_hist"] = self._hist(i, np, "ktui_vhist")
                    out[i]["value_hist_sum"] = int(hist_sums[i])
        counting = {t: i for t, i in tags.items() if mine[i].probe.agg.counts or mine[i].probe.agg.hist_keys}
        if counting:
            entries, hists = read.agg_entries(self._map("ktui_aggs"), {t: mine[i].probe for t, i in counting.items()},
                                              self.cgroup_names)
            lost_full = self._sum_counters(self._map("ktui_lost_full"), count, np)
            losing = {t: i for t, i in counting.items() if dropped[i]} if detail else {}
            lost = {}
            if losing:
                if self._lost_keys is None:
                    self._lost_keys = read.LostKeys()
                lost = self._lost_keys.read(self._map("ktui_agg_lost"),
                                            {t: mine[i].probe for t, i in losing.items()})
            for tag, i in counting.items():
                if mine[i].probe.agg.counts:
                    out[i].update(read.count_fields(mine[i].probe, entries.get(tag, {})))
                if mine[i].probe.agg.hist_keys:
                    out[i].update(read.hist_fields(hists.get(tag, {})))
                if tag in losing:
                    out[i]["keys_dropped"] = lost.get(tag, 0)
                    out[i]["keys_dropped_unknown"] = int(lost_full[i])
        stacking = {t: i for t, i in tags.items() if mine[i].probe.agg.stack is not None} if detail else {}
        if stacking:
            stacks = read.stacks(self._map("ktui_stacks"), self._map("ktui_ustacks"), stacking,
                                 {mine[i].probe.agg.stack for i in stacking.values()}, self.user_symbols)
            stacks_dropped = self._sum_counters(self._map("ktui_stack_drop"), count, np)
            for tag, i in stacking.items():
                out[i].update(read.stack_fields(stacks.get(tag, []), int(stacks_dropped[i])))
        return out

    # ------------------------------------------------------------ closing

    def close(self) -> None:
        with self._lock:
            fds = [fd for slot in self.slots.values() for fd in slot.fds]
            for slot in self.slots.values():
                slot.fds = []
            kprobe_pmu.detach_all(fds)
            for slot in self.slots.values():
                progs, slot.progs = slot.progs + slot.tprogs, []
                slot.tprogs = []
                _close_all(progs)
            self.dispatcher.close()
            if self.counters is not None:
                self.counters.close()
            if self.reader is not None:
                self.reader.close()
                self.reader = None
            if self.program is not None:
                self.program.close()
                self.program = None
            if self.cgroup_fd is not None:
                os.close(self.cgroup_fd)
                self.cgroup_fd = None



def _counters_if_loadable(exclude_fd: int, pid: int | None) -> tuple[Counters | None, str]:
    """The counting probes' maps, where the kernel takes their program (5.12+:
    atomic fetch-and-add); else None, and the kernel's word: counting
    probes go through the dispatcher."""
    counters = Counters(exclude_fd, pid)
    try:
        os.close(counters.load(0, "ktui_c"))
    except OSError as exc:
        counters.close()
        return None, str(exc).splitlines()[0] if str(exc) else repr(exc)
    return counters, ""


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
