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

Every event of the session carries the same record size (the largest
payload of any probe so far, header included), so a batch decodes with one
numpy view; the size only grows, and the reader takes the few records of
the old size that may still be in the ring on its slower path.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import threading
from dataclasses import dataclass, field

from ktui.kernel import bpfsys, kprobe_pmu
from ktui.kernel.runstats import probe_runs
from ktui.kernel.generic import abi
from ktui.kernel.generic.dispatch import Dispatcher
from ktui.kernel.generic.loader import LoadedProgram
from ktui.kernel.generic.plan import NotGeneric, build_plan, payload_size
from ktui.lang.model import Kind, Probe
from ktui.record.feed import ProbeStats
from ktui.record.histogram import HIST_SLOTS
from ktui.record.layout import HEADER_SIZE

__all__ = ["GenericEngine", "NotGeneric", "Slot"]

TOP_COMMS = 5
MIN_PAYLOAD = 8  # records are 8-byte aligned, and a payload is never empty
_COMM_KEY = struct.Struct("<I16s")
_ERRNO_KEY = struct.Struct("<II")


@dataclass
class Slot:
    """One probe in the engine."""

    index: int
    gen: int
    probe: Probe
    probe_id: int  # the session's id for it
    entry_block: int | None
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

    @property
    def tracing(self) -> bool:
        return self.btf_id != 0

    @property
    def via(self) -> str:
        """What the probe runs on: fentry, fexit, kprobe or kretprobe."""
        ret = self.probe.kind is Kind.RETURN
        if self.tracing:
            return "fexit" if ret else "fentry"
        return "kretprobe" if ret else "kprobe"

    @property
    def tag(self) -> int:
        """What its events carry in the record header's probe field."""
        return self.index | self.gen << abi.COOKIE_GEN_SHIFT

    def cookie(self, early: bool) -> int:
        return self.tag | (abi.COOKIE_EARLY if early else 0)


class GenericEngine:
    def __init__(self, *, exclude_pid: int, pid: int | None, comm: str | None) -> None:
        self.pid = pid
        self.comm = comm
        self.exclude_pid = exclude_pid
        self.dispatcher = Dispatcher(exclude_pid, pid)
        self.program: LoadedProgram | None = None
        self.tracing = None  # the tracing variant's CompiledProgram, once loaded (fentry slots)
        self.slots: dict[int, Slot] = {}
        self.record_size = HEADER_SIZE + MIN_PAYLOAD
        self._gens = [0] * abi.MAX_PROBES  # a slot's generation: 0 = never used
        self._next = 0  # where the search for a free slot starts
        self._blocks: set[int] = set()
        self._lock = threading.RLock()
        self._ncpus = bpfsys.possible_cpus()
        # every probe the session ran, by the tag its events carry: events of
        # a removed probe may still be in the ring when its slot is reused
        self._history: dict[int, tuple[Probe, int]] = {}
        self._decoders: dict[int, object] = {}  # record size -> Decoder, for the current history
        self.reader = None

    # ------------------------------------------------------------ slots

    def add(self, probe: Probe, probe_id: int, btf_id: int = 0, nargs: int = 0) -> Slot:
        """A slot for `probe` (not attached yet). NotGeneric if the generic
        program cannot run it; then nothing was allocated. `btf_id`: it goes
        by fentry/fexit to that function (of `nargs` arguments)."""
        needed = HEADER_SIZE + max(MIN_PAYLOAD, payload_size(probe))
        with self._lock:
            # Round robin: a freed slot comes back only after every other one
            # was used, so its old errno and comm entries (cleared by a scan
            # of those maps) rarely need clearing.
            index = next((i % abi.MAX_PROBES for i in range(self._next, self._next + abi.MAX_PROBES)
                          if i % abi.MAX_PROBES not in self.slots), None)
            if index is None:
                raise NotGeneric(f"more than {abi.MAX_PROBES} probes at once")
            block = None
            if probe.kind is Kind.RETURN:
                block = next((b for b in range(abi.ENTRY_BLOCKS) if b not in self._blocks), None)
                if block is None:
                    raise NotGeneric(f"more than {abi.ENTRY_BLOCKS} return probes at once")
            gen = (self._gens[index] + 1) & 0xFFFF
            slot = Slot(index, gen, probe, probe_id, block, btf_id=btf_id, nargs=nargs)
            build_plan(probe, gen=gen, record_size=max(needed, self.record_size),
                       entry_block=block or 0, tracing=slot.tracing)  # NotGeneric before anything is taken
            halves = 2 if probe.kind is Kind.RETURN else 1
            try:
                for half in range(halves):
                    slot.progs.append(self.dispatcher.load(f"ktui_d{index}{'e' if half else ''}"))
            except BaseException:
                _close_all(slot.progs)
                raise
            self._next = index + 1
            self._gens[index] = gen
            self.slots[index] = slot
            self._history[slot.tag] = (probe, probe_id)
            if block is not None:
                self._blocks.add(block)
            if needed > self.record_size:
                self._grow(needed)
            self._clear_counters(index)  # a reused slot starts from zero
            if self.program is not None:
                self._install(slot)
            return slot

    def _grow(self, size: int) -> None:
        """Every record of the session gets bigger (never smaller)."""
        self.record_size = size
        if self.reader is not None:
            self.reader.set_record_size(size)
        if self.program is not None:
            for slot in self.slots.values():
                self._write_plan(slot)

    def _write_plan(self, slot: Slot) -> None:
        plan = build_plan(slot.probe, gen=slot.gen, record_size=self.record_size,
                          entry_block=slot.entry_block or 0, tracing=slot.tracing)
        bpfsys.map_update(self._map("ktui_plans"), struct.pack("<I", slot.index), bytes(plan))

    def _install(self, slot: Slot) -> None:
        """Plan, then the route: the slot is the program's."""
        self._write_plan(slot)
        self.dispatcher.route(slot.index, self.program.prog_fd)

    def remove(self, slot: Slot) -> None:
        self.detach(slot)
        with self._lock:
            self.dispatcher.unroute(slot.index)
            self.slots.pop(slot.index, None)
            if slot.entry_block is not None:
                self._blocks.discard(slot.entry_block)
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
        if slot.fds:
            return
        early = self.comm is None and slot.probe.filter is None
        retprobe = slot.probe.kind is Kind.RETURN

        def open_pmu(retprobe: bool):
            return lambda: kprobe_pmu.open_kprobe(symbol, offset, retprobe, address)

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
        assert self.program is not None and self.tracing is not None
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
        from ktui.kernel.ringbuf import RingBufReader

        with self._lock:
            self.program = program
            ring = program.specs["ktui_events"]["max_entries"]
            self.reader = RingBufReader(self._map("ktui_events"), ring, self.record_size)
            bpfsys.map_update(self._map("ktui_config"), b"\0\0\0\0", bytes(self._config()))
            for slot in list(self.slots.values()):
                self._install(slot)

    def _config(self) -> abi.Config:
        config = abi.Config()
        config.pid = self.pid or 0
        config.exclude_pid = self.exclude_pid
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
        if self.program is None:
            return
        for name in ("ktui_hits", "ktui_emitted", "ktui_lost", "ktui_sampled", "ktui_window",
                     "ktui_hist", "ktui_lat_sum", "ktui_comms_drop"):
            spec = self.program.specs[name]
            bpfsys.map_update(self._map(name), key, bytes(self._percpu_size(spec["value_size"])))
        if self._gens[index] <= 1:
            return  # first use of the slot: no errno or comm entry can be its
        for name, key_struct in (("ktui_errnos", _ERRNO_KEY), ("ktui_comms", _COMM_KEY)):
            fd = self._map(name)
            for raw in bpfsys.map_keys(fd, key_struct.size):
                if key_struct.unpack(raw)[0] == index:
                    bpfsys.map_delete(fd, raw)

    def _percpu_size(self, value_size: int) -> int:
        return ((value_size + 7) // 8 * 8) * self._ncpus

    # ------------------------------------------------------------ reading

    def drain(self):
        """Every event since the last call, as one batch (EmptyBatch when
        the program is not in yet)."""
        from ktui.record.decode import EmptyBatch, MultiBatch

        with self._lock:
            reader = self.reader
            if reader is None:
                return EmptyBatch()
            parts = [self._batch(size, raw) for size, raw in reader.drain_groups()]
        if not parts:
            return EmptyBatch()
        return parts[0] if len(parts) == 1 else MultiBatch(parts)

    def capacity(self) -> int | None:
        """Records of the current size the event ring holds (None before the
        program is in)."""
        with self._lock:
            return self.reader.capacity() if self.reader is not None else None

    def _batch(self, size: int, raw):
        """Records of one size: tags become indices into the history."""
        import numpy as np

        decoder = self._decoder(size)
        # The reader's drain is a fresh copy of ours: rewritten in place.
        records = raw.view(decoder.dtype) if raw.dtype != decoder.dtype else raw
        tags = np.asarray(self._tags, dtype=np.uint32)
        probe = records["probe"]
        if len(tags) == 1:  # one probe so far (a flood's usual case): one pass less
            records["probe"] = probe != tags[0]  # 0: the probe, 1: unknown (skipped)
            return decoder.batch(records)
        found = np.searchsorted(tags, probe)
        found = np.minimum(found, max(len(tags) - 1, 0))
        known = len(tags) > 0
        valid = (tags[found] == probe) if known else np.zeros(len(records), bool)
        records["probe"] = np.where(valid, found, len(tags))  # unknown: skipped by the decoder
        return decoder.batch(records)

    def _decoder(self, size: int):
        from ktui.record.decode import Decoder
        from ktui.record.layout import RecordLayout, probe_layout

        tags = sorted(self._history)
        if getattr(self, "_tags", None) != tags:
            self._tags = tags
            self._decoders.clear()
        decoder = self._decoders.get(size)
        if decoder is None:
            probes = [self._history[t][0] for t in tags]
            ids = [self._history[t][1] for t in tags]
            # Records of an older, smaller size come only from probes that fit
            # in it; a probe added later with a larger payload gets an empty
            # layout here (it emitted none of these records). Seen in the VM:
            # adding `a3,a2` after `a3` failed to decode the `a3` records
            # still in the buffer.
            payload = size - HEADER_SIZE
            layouts = []
            for p in probes:
                one = probe_layout(p)
                if one.payload_size > payload:
                    one = probe_layout(dataclasses.replace(p, fetches=()))
                layouts.append(one)
            layout = RecordLayout(tuple(layouts), payload)
            decoder = self._decoders[size] = Decoder(layout, probes, ids)
        return decoder

    def stats(self, timed: bool = False) -> dict[int, ProbeStats]:
        """Counters of every slot, by the session's probe id; with `timed`
        (the run-time statistics are on) run_ns and run_count too."""
        import numpy as np

        with self._lock:
            slots = dict(self.slots)
            runs = {i: self._runs(s, timed) for i, s in slots.items()}
        if not slots:
            return {}
        count = max(slots) + 1
        early = self._sum_counters(self.dispatcher.early_fd, count, np)
        if self.program is None:
            return {s.probe_id: ProbeStats(probe_id=s.probe_id, hits=int(early[i]), counted_only=int(early[i]),
                                           **runs[i])
                    for i, s in slots.items()}
        hits = self._sum_counters(self._map("ktui_hits"), count, np)
        emitted = self._sum_counters(self._map("ktui_emitted"), count, np)
        lost = self._sum_counters(self._map("ktui_lost"), count, np)
        latency_sums = self._sum_counters(self._map("ktui_lat_sum"), count, np)
        errnos = self._errnos()
        comms = self._comms()
        out = {}
        for i, slot in slots.items():
            hist: tuple[int, ...] = ()
            if slot.probe.kind is Kind.RETURN:
                hist = self._hist(i, np)
            out[slot.probe_id] = ProbeStats(
                probe_id=slot.probe_id, hits=int(early[i] + hits[i]), emitted=int(emitted[i]), lost=int(lost[i]),
                counted_only=int(early[i]),
                hist=hist,
                latency_sum_ns=int(latency_sums[i]) if hist else 0,
                errnos=tuple(sorted(errnos.get(i, {}).items(), key=lambda kv: -kv[1])),
                top_comms=tuple(sorted(comms.get(i, {}).items(), key=lambda kv: -kv[1])[:TOP_COMMS]),
                **runs[i],
            )
        return out

    @staticmethod
    def _runs(slot: Slot, timed: bool) -> dict[str, int]:
        """The kernel's counts of the slot's own programs (see dispatch.py):
        run time of both halves of a return probe, runs of its return half
        (one per return, as `hits`), recursion misses of both."""
        progs = slot.tprogs if slot.tracing else slot.progs
        return probe_runs([bpfsys.prog_run(fd) for fd in progs], timed)

    def _sum_counters(self, fd: int, count: int, np):
        raw = bpfsys.array_lookup_all(fd, count, 8 * self._ncpus)
        return np.frombuffer(raw, dtype=np.uint64).reshape(count, self._ncpus).sum(axis=1)

    def _hist(self, index: int, np) -> tuple[int, ...]:
        size = HIST_SLOTS * 8
        raw = bpfsys.map_lookup(self._map("ktui_hist"), struct.pack("<I", index), size * self._ncpus)
        if raw is None:
            return (0,) * HIST_SLOTS
        per_cpu = np.frombuffer(raw, dtype=np.uint64).reshape(self._ncpus, HIST_SLOTS)
        return tuple(int(x) for x in per_cpu.sum(axis=0))

    def _errnos(self) -> dict[int, dict[int, int]]:
        out: dict[int, dict[int, int]] = {}
        fd = self._map("ktui_errnos")
        for raw in bpfsys.map_keys(fd, _ERRNO_KEY.size):
            value = bpfsys.map_lookup(fd, raw, 8)
            if value is not None:
                index, err = _ERRNO_KEY.unpack(raw)
                out.setdefault(index, {})[err] = struct.unpack("<Q", value)[0]
        return out

    def _comms(self) -> dict[int, dict[str, int]]:
        # bpf_get_current_comm leaves stale bytes after the NUL: add up by name
        out: dict[int, dict[str, int]] = {}
        fd = self._map("ktui_comms")
        for raw in bpfsys.map_keys(fd, _COMM_KEY.size):
            value = bpfsys.map_lookup(fd, raw, 8)
            if value is not None:
                index, comm = _COMM_KEY.unpack(raw)
                name = comm.split(b"\0", 1)[0].decode("utf-8", "replace")
                per = out.setdefault(index, {})
                per[name] = per.get(name, 0) + struct.unpack("<Q", value)[0]
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
            if self.reader is not None:
                self.reader.close()
                self.reader = None
            if self.program is not None:
                self.program.close()
                self.program = None



def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
