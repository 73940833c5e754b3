"""A live probe set in the kernel: compile, attach, toggle, read, detach.

`Session` is the live `Feed`. The set is compiled once (one clang run for
every probe); each probe is then attached through the kprobe PMU
(`kprobe_pmu`), so switching it off closes its perf fds and the kernel drops
the probe, and switching it on again re-attaches the already-loaded program
without recompiling. A probe added later is compiled on its own into a
second program ("unit"), so adding never disturbs what is running.

Every attachment is an fd owned by this process: `close()` releases them
all, and if the process dies (even by SIGKILL) the kernel does it.

This module holds the class, its state and its opening and closing; its
methods live by job beside it, one mixin each: `engine_start` (the generic
engine and its program loading in the background), `attaching` (a probe
in and out, by unit or engine slot), `fentry` (fentry/fexit or kprobe, and
the fall-back), `return_events` (tracefs kretprobes, missed returns),
`reading` (drain, stats, costs) and `edits` (add, remove, switch). Below
them: `unit` (a compiled program and its reader), `unit_attach` (one probe
of a unit, or why not), `maps.statmaps` (the counters), and `loader`, the
kernel side Session talks to, which host tests replace with a fake.

Where the kernel has attach cookies on kprobe links (probed once per
kernel, kernel/machine/features.py; 5.15+ upstream), probes go to the generic
engine instead (kernel/generic): one program, shipped prebuilt in the
package, that runs every probe from a plan. Then opening a set, adding,
editing or switching a probe compiles nothing: the probes are attached at
once, behind a hand-assembled dispatcher that counts their hits while the
generic program loads (shipped; or, where a kernel's verifier refuses it,
from the cache or compiled, in the background). Probes it cannot run (a filter of more than six
comparisons) are compiled into a unit as before.

A return probe's kretprobe is a tracefs event (`kretprobe_events`) rather
than a PMU kprobe: only there can its maxactive be set and its missed
returns be read on every kernel. The event lives as long as the probe
(switching it off closes the fd, the event stays disarmed), and is removed
after its fd closes: when the probe is removed and when the session
closes. Events a SIGKILLed ktui left are removed when the next one opens.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import threading
import time
from pathlib import Path

from ktui.kernel.attach import kprobe_pmu
from ktui.kernel.buffers.buffer_choice import resolve_buffer
from ktui.kernel.codegen import PERF
from ktui.kernel.symbols.ksyms import KernelSymbols
from ktui.kernel.session.loader import BccLoader, Loader
from ktui.kernel.quiet import log_line, open_log
from ktui.kernel.session.unit import Unit
from ktui.lang.bind import Kernel
from ktui.lang.model import KtuiError, Probe, ProbeSet
from ktui.record.feed import FeedError, ProbeState, ProbeStatus, SystemInfo
from ktui.kernel.session.engine_start import EngineStartMixin
from ktui.kernel.session.attaching import AttachingMixin
from ktui.kernel.session.fentry import FentryMixin
from ktui.kernel.session.return_events import ReturnEventsMixin
from ktui.kernel.session.reading import ReadingMixin
from ktui.kernel.session.edits import EditsMixin
from ktui.kernel.session.gates import GatesMixin
from ktui.kernel.session.spans import SpansMixin
from ktui.kernel.session.options import SessionOptions


class Session(EngineStartMixin, AttachingMixin, FentryMixin, ReturnEventsMixin, ReadingMixin, EditsMixin,
              GatesMixin, SpansMixin):
    def __init__(self, probeset: ProbeSet, options: SessionOptions | None = None,
                 loader: Loader | None = None, names: Kernel | None = None) -> None:
        """`loader`: the kernel side (bcc and the kprobe PMU by default);
        `names`: where parameter names get their meaning (the running
        kernel's BTF by default, opened when a probe names one)."""
        self.options = options or SessionOptions()
        self._names = names
        self.loader = loader or BccLoader()
        # what this kernel can do (kernel/machine/features): cached per kernel,
        # probed once; before binding: a wildcard's cap is the kernel's (kprobe_multi)
        self.features = self.loader.features(self.options.cache_dir, self.options.cache)
        probeset = dataclasses.replace(probeset, probes=tuple(self._bind(p) for p in probeset.probes))
        self.probeset = probeset
        self.symbols = KernelSymbols()
        self._log_fd = -1
        # Replaced whole under _lock, never changed in place: drain() and
        # stats() take the tuple as it is, without the session's lock.
        self._units: tuple[Unit, ...] = ()
        self._where: dict[int, tuple[Unit, int]] = {}
        self._probes: dict[int, Probe] = {}
        self._status: dict[int, ProbeStatus] = {}
        self._fds: dict[int, list[int]] = {}
        self._next_id = 0
        self._lock = threading.RLock()
        self._closed = False
        self._detached = False  # detach_all() ran: nothing attaches again
        self.buffer = self._pick_buffer()
        self._engine = None  # the GenericEngine, where the session uses one
        self._slots: dict = {}  # probe id -> its generic engine Slot
        self._gates: dict = {}  # `within:` its text (a function, `START .. END`) -> its gates.Gate
        self._gates_made = 0  # slots no table shows, made so far (gates.GatesMixin._hidden_id)
        self._span_starts: dict = {}  # a span's probe id -> its START's slot (spans.SpansMixin)
        self.loaded = threading.Event()  # the generic program is in (or failed, or none is used)
        self.load_error = ""
        self._returns = None  # the tracefs kretprobes (kretprobe_events.ReturnEvents), None: none
        self._ret_events: dict[int, tuple[str, int]] = {}  # probe id -> (event, its maxactive)
        # misses of a return probe's earlier events: switching it off removes
        # its event (off means gone from the kernel), its count lives on here
        self._missed_before: dict[int, tuple[int, int]] = {}  # probe id -> (missed, maxactive)
        self._btf = None  # vmlinux's BTF, opened when a probe may go by fentry
        self._btf_opened = False
        self._context = None  # where a hit's context is read (ContextAddresses), found once
        self._cgroup_names = None  # compiled units' cgroup namer without an engine (_cgroup_namer)
        # probes told `attach: fentry` that cannot have it: id -> why (they fail)
        self._refused: dict[int, str] = {}
        # an `auto` probe went by kprobe because the tracing variant was not
        # compiled: it compiles in the background once the kprobe variant is in
        self._compile_tracing_later = False
        self._tracing_compiling = False  # that compile is under way (or done): once per session
        self._tracing_compile_running = False  # under way now: close() leaves the helper to it
        # ktui's compile helper (generic/compile_child.py), started before
        # the first probe where a start may compile: left out of the counts
        # as ktui itself is (_own_pids)
        self._helper = None
        self._helper_lock = threading.Lock()
        from ktui.kernel.maps.runstats import RunTimeStats

        self._timing = RunTimeStats(self.loader.enable_run_stats)

    def __enter__(self) -> "Session":
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        """Attach every enabled probe: through the generic engine at once
        (its program loads in the background), the rest compiled as one set."""
        if self._log_fd < 0:
            self._log_fd = open_log(self.options.log_path)
            self._log_features()
        _raise_fd_limit()
        self._open_return_events()
        probes = list(self.probeset.probes)
        for probe in probes:
            self._log_notes(probe)
        ids = [self._new_id(p) for p in probes]
        try:
            if self.options.timing:
                try:
                    self.set_timing(True)
                except FeedError as exc:
                    raise KtuiError(f"--cost: {exc}") from None
            self._engine = self._start_engine()
            if self._engine is not None:
                ids = self._open_generic(ids)
                probes = [self._probes[i] for i in ids]
            else:
                for pid_ in ids:
                    self._note_compiled(pid_, self._probes[pid_])
                self.loaded.set()
            # a probe only the generic engine runs (edits.generic_only, --cgroup) joins no compiled unit
            for pid_ in [i for i in ids if self._generic_only(self._probes[i])]:
                ids.remove(pid_)
                self._set_status(pid_, ProbeState.FAILED, self._refused[pid_])
                probes = [self._probes[i] for i in ids]
            if ids:
                self._open_compiled(probes, ids)
            if self.options.wait_loaded:
                self.wait_loaded()
        except BaseException:  # KeyboardInterrupt too: nothing stays attached
            self.close()
            raise

    def _log_features(self) -> None:
        """Where the kernel's features came from, and any that could not be
        checked (the log; `ktui doctor` says all of it)."""
        f = self.features
        where = f" ({f.path})" if f.path else ""
        took = f" in {f.probe_seconds:.2f} s" if "probed" in f.source else ""
        log_line(self._log_fd, f"ktui: kernel features: {f.source}{took}{where}")
        for name, finding in f.unknown().items():
            log_line(self._log_fd, f"ktui: kernel feature {name} not checked: {finding.detail}")

    def _open_compiled(self, probes: list[Probe], ids: list[int]) -> None:
        """Compile `probes` into one unit and attach them."""
        # A ring buffer keeps what the probes write until it is read, so its
        # reader (and numpy, a second of imports under emulation) can come
        # after the probes are live. Perf buffers drop events while no reader
        # has opened them: their reader comes first.
        read_first = self.buffer == PERF
        unit = self._compile_unit(probes, ids, read_now=read_first)
        started = time.monotonic()
        for pid_ in ids:
            if self._probes[pid_].enabled:
                self._attach(pid_)
            else:
                self._set_status(pid_, ProbeState.OFF)
        log_line(self._log_fd, f"ktui: attached in {time.monotonic() - started:.2f} s")
        if not read_first:
            self._start_reading(unit)

    def wait_loaded(self, timeout: float | None = None) -> bool:
        """Wait until every probe runs its full program (True), or `timeout`."""
        return self.loaded.wait(timeout)

    def detach_all(self) -> None:
        """Detach every probe; keep the programs, maps and buffers. When it
        returns no probe program runs any more (closing a kprobe's perf fd
        waits until its handlers are done), so draining to the end and then
        reading stats gives every event emitted and exact counters. No probe
        can be attached again; close() frees the rest."""
        with self._lock:
            self._detached = True
            fds = [fd for pid_ in list(self._fds) for fd in self._fds.pop(pid_)]
            # every slot of the engine: the probes', their gates' and their spans' starts
            for slot in (self._engine.slots.values() if self._engine is not None else ()):
                fds += slot.fds
                slot.fds = []
            if not fds:
                return
            started = time.monotonic()
            self.loader.detach(fds)
            if self._log_fd >= 0:
                log_line(self._log_fd, f"ktui: detached {len(fds)} kprobe(s) in "
                         f"{time.monotonic() - started:.2f} s (at {time.monotonic():.3f})")

    def close(self) -> None:
        """Detach everything and free the programs. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.detach_all()
            self._remove_return_events()
            started = time.monotonic()
            units, self._units = self._units, ()
            for unit in units:
                unit.close(self.loader, self._log_fd)
            if self._engine is not None:
                self._engine.close()
            if not self._tracing_compile_running:  # else that compile stops the helper when done
                self._stop_helper()  # it ends once a compile asked for is done (it fills the cache)
            self._timing.close()
            if self._log_fd >= 0:  # not opened when open() was never called
                log_line(self._log_fd, f"ktui: freed the programs in {time.monotonic() - started:.2f} s "
                         f"(at {time.monotonic():.3f})")
                os.close(self._log_fd)
                self._log_fd = -1

    def _pick_buffer(self) -> str:
        return resolve_buffer(self.options.buffer, self.features.has("ringbuf"))

    def _new_id(self, probe: Probe) -> int:
        pid_ = self._next_id
        self._next_id += 1
        self._probes[pid_] = probe
        self._status[pid_] = ProbeStatus(pid_, probe, ProbeState.PENDING)
        return pid_

    def _set_status(self, pid_: int, state: ProbeState, reason: str = "", via: str = "") -> ProbeStatus:
        status = ProbeStatus(pid_, self._probes[pid_], state, reason, via)
        self._status[pid_] = status
        return status

    def statuses(self) -> dict[int, ProbeStatus]:
        return dict(self._status)

    def system_info(self) -> SystemInfo:
        from ktui.kernel.machine.preflight import preflight_warnings

        return SystemInfo(
            notes=tuple(p.message for p in preflight_warnings()),
            kernel=os.uname().release,
            kprobes=kprobe_pmu.pmu_available(),
            btf=Path("/sys/kernel/btf/vmlinux").exists(),
            root=os.geteuid() == 0,
            buffer=self.buffer,
        )

    async def set_enabled(self, probe_id: int, enabled: bool) -> ProbeStatus:
        import asyncio

        return await asyncio.to_thread(self.set_enabled_now, probe_id, enabled)

    async def add_probe(self, probe: Probe) -> ProbeStatus:
        import asyncio

        return await asyncio.to_thread(self.add_probe_now, probe)

    async def remove_probe(self, probe_id: int) -> None:
        import asyncio

        await asyncio.to_thread(self.remove_probe_now, probe_id)


def _raise_fd_limit() -> None:
    """Every probe holds a perf fd (two for a return probe) and its program's
    fd: lift the soft RLIMIT_NOFILE (often 1024) to the hard limit, as a big
    set would otherwise fail at a few hundred probes."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass  # keep the soft limit; probes past it fail with their reason
