"""A live probe set in the kernel: compile, attach, toggle, read, detach.

`Session` is the live `Feed`. The set is compiled once (one clang run for
every probe); each probe is then attached through the kprobe PMU
(`kprobe_pmu`), so switching it off closes its perf fds and the kernel drops
the probe, and switching it on again re-attaches the already-loaded program
without recompiling. A probe added later is compiled on its own into a
second program ("unit"), so adding never disturbs what is running.

Every attachment is an fd owned by this process: `close()` releases them
all, and if the process dies (even by SIGKILL) the kernel does it.

The jobs live beside it: `unit` (a compiled program and its reader),
`attach` (one probe, or why not), `statmaps` (the counters), and `loader`,
the kernel side Session talks to, which host tests replace with a fake.

Where the kernel has attach cookies on kprobe links (probed once per
kernel, kernel/features.py; 5.15+ upstream), probes go to the generic
engine instead (kernel/generic): one program compiled once per kernel and
ktui version, cached, that runs every probe from a plan. Then opening a
set, adding, editing or switching a probe compiles nothing: the probes are
attached at once, behind a hand-assembled dispatcher that counts their hits
while the generic program loads (from the cache, or compiled the first
time, in the background). Probes it cannot run (a filter of more than six
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
import mmap
import os
import resource
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ktui.kernel.attach import kprobe_pmu
from ktui.kernel.session.unit_attach import attach_probe
from ktui.kernel.buffers.buffer_choice import resolve_buffer
from ktui.kernel.codegen import PERF, generate
from ktui.kernel.symbols.ksyms import KernelSymbols
from ktui.kernel.session.loader import BccLoader, Loader
from ktui.kernel.quiet import log_line, open_log
from ktui.kernel.session.unit import Unit, compile_unit, start_reading
from ktui.lang.bind import Kernel, bind_probe, needs_binding
from ktui.lang.model import Kind, KtuiError, Probe, ProbeSet
from ktui.record.feed import (
    EventBatch,
    FeedError,
    ProbeState,
    ProbeStats,
    ProbeStatus,
    StatsSnapshot,
    SystemInfo,
)


@dataclass
class SessionOptions:
    buffer: str = "auto"  # "auto" (ring buffer where the kernel has it), "ringbuf", "perf"
    ringbuf_pages: int = 2048  # 8 MiB of 4 KiB pages; a power of two
    perf_pages: int = 256  # per CPU; a power of two
    log_path: Path | None = None
    include_self: bool = False  # probe ktui's own process too
    engine: str = "auto"  # "auto" (generic where the kernel allows), "generic", "compiled"
    cache: bool = True  # keep the compiled generic program for later starts (--no-cache: not)
    cache_dir: Path | None = None  # default ~/.cache/ktui
    # open() returns once every probe runs its full program. The dashboard
    # and the headless commands say False: their probes count from the
    # first moment, and events follow when the generic program is in.
    wait_loaded: bool = True
    # the kernel's BPF run-time statistics from the start (--cost; the
    # dashboard switches them with a key): see runstats
    timing: bool = False
    # how probes enter the kernel where neither they nor their set say
    # (`attach:`): "auto" (fentry/fexit where the kernel allows, the
    # default), "kprobe" or "fentry" (see kernel/attach_choice)
    attach: str = "auto"


ENGINES = ("auto", "generic", "compiled")




class Session:
    def __init__(self, probeset: ProbeSet, options: SessionOptions | None = None,
                 loader: Loader | None = None, names: Kernel | None = None) -> None:
        """`loader`: the kernel side (bcc and the kprobe PMU by default);
        `names`: where parameter names get their meaning (the running
        kernel's BTF by default, opened when a probe names one)."""
        self.options = options or SessionOptions()
        self._names = names
        probeset = dataclasses.replace(probeset, probes=tuple(self._bind(p) for p in probeset.probes))
        self.probeset = probeset
        self.loader = loader or BccLoader()
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
        # what this kernel can do (kernel/features): cached per kernel, probed once
        self.features = self.loader.features(self.options.cache_dir, self.options.cache)
        self.buffer = self._pick_buffer()
        self._engine = None  # the GenericEngine, where the session uses one
        self._slots: dict = {}  # probe id -> its generic engine Slot
        self.loaded = threading.Event()  # the generic program is in (or failed, or none is used)
        self.load_error = ""
        self._returns = None  # the tracefs kretprobes (kretprobe_events.ReturnEvents), None: none
        self._ret_events: dict[int, tuple[str, int]] = {}  # probe id -> (event, its maxactive)
        # misses of a return probe's earlier events: switching it off removes
        # its event (off means gone from the kernel), its count lives on here
        self._missed_before: dict[int, tuple[int, int]] = {}  # probe id -> (missed, maxactive)
        self._btf = None  # vmlinux's BTF, opened when a probe may go by fentry
        self._btf_opened = False
        # probes told `attach: fentry` that cannot have it: id -> why (they fail)
        self._refused: dict[int, str] = {}
        # an `auto` probe went by kprobe because the tracing variant was not
        # compiled: it compiles in the background once the kprobe variant is in
        self._compile_tracing_later = False
        self._tracing_compiling = False  # that compile is under way (or done): once per session
        # ktui's compile helper (generic/compile_child.py), started before
        # the first probe where a start may compile: left out of the counts
        # as ktui itself is (_own_pids)
        self._helper = None
        self._helper_lock = threading.Lock()
        from ktui.kernel.maps.runstats import RunTimeStats

        self._timing = RunTimeStats(self.loader.enable_run_stats)

    # ------------------------------------------------------------ lifecycle

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

    def _open_return_events(self) -> None:
        """Where return probes' kretprobes come from; first, the events a
        SIGKILLed ktui left behind go."""
        self._returns = self.loader.return_events()
        if self._returns is None:
            log_line(self._log_fd, "ktui: no tracefs: return probes use the kprobe PMU "
                     "(maxactive cannot be set, missed returns are not counted)")
            return
        stale = self._returns.sweep_stale()
        if stale:
            log_line(self._log_fd, f"ktui: removed {len(stale)} kretprobe event(s) left by "
                     f"ktui processes that are gone: {' '.join(stale)}")

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

    # ------------------------------------------------------------ generic engine

    def _start_engine(self):
        engine = self.options.engine
        if engine not in ENGINES:
            raise KtuiError(f"unknown engine {engine!r}: use auto, generic or compiled")
        if engine == "compiled" or (engine == "auto" and self.buffer == PERF):
            return None
        self._start_helper()
        started = time.monotonic()
        made = self.loader.generic_engine(exclude_pids=self._own_pids(), pid=self.probeset.pid,
                                          comm=self.probeset.comm, features=self.features)
        if made is None:
            self._stop_helper()  # the compiled path compiles in ktui itself
        if made is None and engine == "generic":
            cookies = self.features["kprobe_cookie"]
            state = "could not be checked" if cookies.have is None else "are missing"
            raise KtuiError(f"the generic engine needs attach cookies on kprobe links, and on this kernel "
                            f"they {state}: {cookies.detail} (see `ktui doctor`)")
        if made is not None:
            log_line(self._log_fd, f"ktui: dispatcher loaded in {time.monotonic() - started:.2f} s")
        return made

    # ------------------------------------------------------------ ktui's own processes

    def _own_pids(self) -> tuple[int, ...]:
        """ktui and its compile helper: left out of every count (unless
        --include-self)."""
        if self.options.include_self:
            return ()
        return (os.getpid(),) + ((self._helper.pid,) if self._helper is not None else ())

    def _start_helper(self) -> None:
        """The compile helper, before any probe is attached, where this start
        may compile (a variant not in the cache): its pid is known, and left
        out, from the first hit on. Without one, a compile starts a helper
        when it must (`_compile`)."""
        from ktui.kernel.attach.attach_choice import fentry_possible

        try:
            tracing = fentry_possible(features=self.features, btf=self._kernel_btf())
            self._helper = self.loader.compile_helper(self._log_fd, self.options.cache_dir,
                                                      self.options.cache, tracing,
                                                      func_arg_helpers=self.features.func_arg_helpers)
        except Exception as exc:  # noqa: BLE001 - a compile will start its own
            log_line(self._log_fd, f"ktui: the compile helper did not start: {exc}")
            self._helper = None
        if self._helper is not None:
            log_line(self._log_fd, f"ktui: compile helper started (pid {self._helper.pid}), left out of the counts")

    def _stop_helper(self) -> None:
        with self._helper_lock:
            helper, self._helper = self._helper, None
        if helper is not None:
            helper.close()

    def _compile(self, text: str, key: str):
        """A compile (generic/loader.Compiler) by the helper; one started
        now when none runs yet (the kernel refused the cached program): its
        pid is left out from the moment it is known."""
        from ktui.kernel.generic.compile_child import CompileHelper

        with self._helper_lock:
            helper = self._helper
            if helper is None and self._closed:
                raise RuntimeError("compiling the generic program: the session has ended")
            if helper is None:
                helper = self._helper = CompileHelper(self._log_fd)
                if self._engine is not None and not self.options.include_self:
                    self._engine.exclude(self._own_pids())
                log_line(self._log_fd, f"ktui: compile helper started late (pid {helper.pid}): its first "
                         "moments, before ktui knew its pid, may be counted")
        return helper.compile(text, key)

    def _open_generic(self, ids: list[int]) -> list[int]:
        """Give every probe it can run to the engine and attach them (they
        count at once); start loading the program. Returns the ids left for
        a compiled unit."""
        from ktui.kernel.generic.engine import NotGeneric

        rest = []
        started = time.monotonic()
        for pid_ in ids:
            probe = self._probes[pid_]
            if not self._add_generic(pid_, probe):
                rest.append(pid_)
                continue
            if probe.enabled:
                self._attach(pid_)
            else:
                self._set_status(pid_, ProbeState.OFF)
        log_line(self._log_fd, f"ktui: {len(self._slots)} probe(s) attached to the dispatcher "
                 f"in {time.monotonic() - started:.2f} s")
        threading.Thread(target=self._load_generic, name="ktui-generic-load", daemon=True).start()
        return rest

    def _load_generic(self) -> None:
        """In the background: the generic program, then every slot routed to
        it; then the fentry/fexit variant, where a probe goes that way, or
        (after `loaded`: nothing waits for it) compiled for later starts."""
        self._load_kprobe_variant()
        try:
            if any(slot.tracing for slot in list(self._slots.values())) and not self.load_error:
                self._attach_waiting_fentry()
        finally:
            self.loaded.set()
        if self._compile_tracing_later and not self.load_error:
            self._compile_tracing_variant()

    def _compile_tracing_variant(self) -> None:
        """The tracing variant compiled into the cache (an `auto` probe went
        by kprobe for want of it): later starts, and probes added from now
        on, go by fentry. The log gets its own fd: the session may close
        meanwhile, and its fd number be reused."""
        with self._lock:
            if self._closed or self._log_fd < 0 or self._tracing_compiling:
                return
            self._tracing_compiling = True
            log_fd = os.dup(self._log_fd)
        try:
            try:
                tracing = self.loader.tracing_variant(log_fd, self.options.cache_dir, True, self._compile,
                                                      func_arg_helpers=self.features.func_arg_helpers)
            except Exception as exc:  # noqa: BLE001 - the probes run by kprobe: nothing else to do
                log_line(log_fd, f"ktui: the fentry/fexit variant did not compile: {exc}")
                return
            with self._lock:
                if not self._closed and self._engine is not None and self._engine.tracing is None:
                    self._engine.tracing = tracing
            log_line(log_fd, "ktui: fentry/fexit variant compiled and cached: probes added from now on "
                     "and later starts go by fentry/fexit where `attach: auto` allows")
        finally:
            os.close(log_fd)

    def _attach_waiting_fentry(self) -> None:
        """The tracing variant (compiled or from the cache), then every
        fentry probe waiting for it attaches (or falls back to a kprobe)."""
        error = ""
        tracing = self._engine.tracing  # read from the cache when the probes were chosen
        try:
            if tracing is None:
                tracing = self.loader.tracing_variant(self._log_fd, self.options.cache_dir, self.options.cache,
                                                      self._compile, func_arg_helpers=self.features.func_arg_helpers)
        except Exception as exc:  # noqa: BLE001 - each probe falls back, saying why
            error = f"the fentry/fexit variant did not compile: {exc}"
            log_line(self._log_fd, f"ktui: {error}")
        with self._lock:
            if self._closed or self._engine is None:
                return
            if not error:
                self._engine.tracing = tracing
            for pid_, slot in list(self._slots.items()):
                if slot.tracing and self._status[pid_].state is ProbeState.LOADING:
                    if error:
                        self._fall_back(pid_, error)
                    else:
                        self._attach_generic(pid_)

    def _load_kprobe_variant(self) -> None:
        try:
            program = self.loader.load_generic(self._log_fd, self.options.cache_dir, self.options.cache,
                                               self.options.ringbuf_pages * mmap.PAGESIZE, self._compile,
                                               func_arg_helpers=self.features.func_arg_helpers)
        except Exception as exc:  # noqa: BLE001 - reported on each probe, not lost
            reason = f"the generic program did not load: {exc}"
            log_line(self._log_fd, f"ktui: {reason}")
            with self._lock:
                self.load_error = reason
                for pid_ in list(self._slots):
                    if self._status[pid_].state is ProbeState.LOADING:
                        self._set_status(pid_, ProbeState.FAILED, reason)
            return
        with self._lock:
            if self._closed:
                program.close()
                return
            self._engine.install_program(program)
            for pid_, slot in list(self._slots.items()):
                if self._status[pid_].state is ProbeState.LOADING and not slot.tracing:
                    self._set_status(pid_, ProbeState.ATTACHED, via=slot.via)

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
            for slot in self._slots.values():
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
            self._stop_helper()  # once a compile under way is done (it fills the cache)
            self._timing.close()
            if self._log_fd >= 0:  # not opened when open() was never called
                log_line(self._log_fd, f"ktui: freed the programs in {time.monotonic() - started:.2f} s "
                         f"(at {time.monotonic():.3f})")
                os.close(self._log_fd)
                self._log_fd = -1

    def _remove_return_events(self) -> None:
        """Every kretprobe event of the session, once its fds are closed."""
        self._ret_events.clear()
        if self._returns is None:
            return
        stayed = self._returns.remove_all()
        if stayed and self._log_fd >= 0:
            log_line(self._log_fd, f"ktui: kretprobe event(s) still busy, not removed: {' '.join(stayed)}")

    # ------------------------------------------------------------ compile

    def _pick_buffer(self) -> str:
        return resolve_buffer(self.options.buffer, self.features.has("ringbuf"))

    def _new_id(self, probe: Probe) -> int:
        pid_ = self._next_id
        self._next_id += 1
        self._probes[pid_] = probe
        self._status[pid_] = ProbeStatus(pid_, probe, ProbeState.PENDING)
        return pid_

    def _compile_unit(self, probes: list[Probe], ids: list[int], read_now: bool = True) -> Unit:
        program = generate(
            probes,
            buffer=self.buffer,
            ringbuf_pages=self.options.ringbuf_pages,
            pid=self.probeset.pid,
            comm=self.probeset.comm,
            exclude_pids=self._own_pids(),
        )
        unit = compile_unit(self.loader, program, ids, self._log_fd)
        if read_now:
            try:
                self._start_reading(unit)
            except Exception:
                self.loader.free(unit.bpf, self._log_fd)
                raise
        with self._lock:
            self._units = (*self._units, unit)
            for local, pid_ in enumerate(ids):
                self._where[pid_] = (unit, local)
        return unit

    def _start_reading(self, unit: Unit) -> None:
        start_reading(unit, self.loader, [self._probes[i] for i in unit.ids], self.options)

    # ------------------------------------------------------------ attach

    def _set_status(self, pid_: int, state: ProbeState, reason: str = "", via: str = "") -> ProbeStatus:
        status = ProbeStatus(pid_, self._probes[pid_], state, reason, via)
        self._status[pid_] = status
        return status

    def _attach(self, pid_: int) -> ProbeStatus:
        with self._lock:
            if pid_ in self._fds:
                return self._status[pid_]
            if self._detached:
                raise FeedError("the probes were detached: the session is ending")
            if pid_ in self._refused:
                return self._set_status(pid_, ProbeState.FAILED, self._refused[pid_])
            if pid_ in self._slots:
                return self._attach_generic(pid_)
            unit, local = self._where[pid_]
            attach_return, reason = self._return_event(pid_)
            if not reason:
                fds, reason = attach_probe(self.loader, unit, local, self._probes[pid_], self.symbols,
                                           self._log_fd, attach_return and attach_return[0])
            if reason:
                return self._set_status(pid_, ProbeState.FAILED, reason)
            self._fds[pid_] = fds
            ret = self._probes[pid_].kind is Kind.RETURN
            return self._set_status(pid_, ProbeState.ATTACHED, via="kretprobe" if ret else "kprobe")

    def _attach_generic(self, pid_: int) -> ProbeStatus:
        from ktui.kernel.session.unit_attach import location, precheck
        from ktui.kernel.attach.explain import explain_attach_error

        slot, probe = self._slots[pid_], self._probes[pid_]
        if slot.fds:
            return self._status[pid_]
        if slot.tracing:
            return self._attach_fentry(pid_)
        reason = precheck(probe)
        opener = None
        if not reason:
            opener, reason = self._return_event(pid_)
        if not reason:
            symbol, offset, address = location(probe, self.symbols)
            try:
                self._engine.attach(slot, symbol, offset, address, opener and opener[1])
            except OSError as exc:
                reason = explain_attach_error(probe, exc, None, self.symbols)
        if reason:
            log_line(self._log_fd, f"ktui: {probe.spec_text}: {reason}")
            return self._set_status(pid_, ProbeState.FAILED, reason)
        if self.load_error:
            return self._set_status(pid_, ProbeState.FAILED, self.load_error)
        if self._engine.program is None:
            return self._set_status(pid_, ProbeState.LOADING, via=slot.via)
        return self._set_status(pid_, ProbeState.ATTACHED, via=slot.via)

    # ------------------------------------------------------------ fentry/fexit

    def _choose(self, probe: Probe, generic: bool):
        """fentry/fexit or kprobe for `probe` (kernel/attach_choice), the
        reason logged in one line where fentry was wanted and is not had."""
        from ktui.kernel.attach.attach_choice import KPROBE, Choice, choose, without_compile
        from ktui.lang.attach_rules import effective_mode

        mode = effective_mode(probe, self.probeset.attach, self.options.attach)
        if mode == KPROBE:
            return Choice(KPROBE)
        choice = choose(probe, mode, features=self.features, btf=self._kernel_btf(), generic=generic)
        if generic and not choice.reason:
            choice = without_compile(choice, mode, variant_ready=self._tracing_ready(), cache=self.options.cache)
            if choice.reason and self.options.cache:
                self._compile_tracing_later = True
                if self.loaded.is_set() and not self.load_error:  # added live: compile now
                    threading.Thread(target=self._compile_tracing_variant, name="ktui-tracing-compile",
                                     daemon=True).start()
        if choice.reason:
            verdict = "refused" if choice.refused else "kprobe"
            log_line(self._log_fd, f"ktui: {probe.spec_text}: attach: {mode}: {verdict}: {choice.reason}")
        return choice

    def _tracing_ready(self) -> bool:
        """The tracing variant is at hand without a compile: loaded by this
        session already, or in the cache (then read now, once)."""
        if self._engine.tracing is None and self.options.cache:
            self._engine.tracing = self.loader.cached_tracing_variant(
                self.options.cache_dir, func_arg_helpers=self.features.func_arg_helpers)
        return self._engine.tracing is not None

    def _kernel_btf(self):
        if not self._btf_opened:
            self._btf_opened = True
            self._btf = self.loader.kernel_btf()
        return self._btf

    def _attach_fentry(self, pid_: int) -> ProbeStatus:
        """A probe that goes by fentry/fexit: its copies loaded and linked
        once the tracing variant is in (until then it waits, LOADING: it
        has no dispatcher to count through). A refusal means a kprobe."""
        slot, probe = self._slots[pid_], self._probes[pid_]
        if self.load_error:
            return self._set_status(pid_, ProbeState.FAILED, self.load_error)
        if self._engine.program is not None and self._engine.tracing is None and self.loaded.is_set():
            # a probe added after the start, the first to want fentry
            try:
                self._engine.tracing = self.loader.tracing_variant(
                    self._log_fd, self.options.cache_dir, self.options.cache, self._compile,
                    func_arg_helpers=self.features.func_arg_helpers)
            except Exception as exc:  # noqa: BLE001 - the probe falls back, saying why
                return self._fall_back(pid_, f"the fentry/fexit variant did not compile: {exc}")
        if self._engine.program is None or self._engine.tracing is None:
            return self._set_status(pid_, ProbeState.LOADING, via=slot.via)
        via = slot.via
        started = time.monotonic()
        try:
            self._engine.attach_tracing(slot)
        except OSError as exc:
            return self._fall_back(pid_, f"the kernel refused {via}: {_first_line(exc)}")
        maxactive = probe.maxactive or self.probeset.maxactive
        if maxactive:
            log_line(self._log_fd, f"ktui: {probe.spec_text}: maxactive {maxactive} unused: "
                     "fexit sees every return")
        log_line(self._log_fd, f"ktui: {probe.spec_text}: attached by {via} in "
                 f"{time.monotonic() - started:.3f} s")
        return self._set_status(pid_, ProbeState.ATTACHED, via=via)

    def _fall_back(self, pid_: int, reason: str) -> ProbeStatus:
        """fentry could not be had: a kprobe (the log says why), or, where
        the probe was told `attach: fentry`, a failure."""
        from ktui.lang.attach_rules import effective_mode

        slot, probe = self._slots[pid_], self._probes[pid_]
        self._engine.to_kprobe(slot)
        if effective_mode(probe, self.probeset.attach, self.options.attach) == "fentry":
            log_line(self._log_fd, f"ktui: {probe.spec_text}: attach: fentry: {reason}")
            self._refused[pid_] = f"attach: fentry: {reason}"
            return self._set_status(pid_, ProbeState.FAILED, self._refused[pid_])
        log_line(self._log_fd, f"ktui: {probe.spec_text}: kprobe, not fentry: {reason}")
        return self._attach_generic(pid_)

    def _return_event(self, pid_: int):
        """For a return probe: ((attach(prog_fd) -> perf fd, open() -> perf
        fd) of its tracefs kretprobe, made on first use, ""), or (None, why
        not). (None, "") for a call probe, or when return probes take the PMU."""
        from ktui.kernel.session.unit_attach import precheck
        from ktui.kernel.attach.explain import explain_attach_error
        from ktui.kernel.attach.kretprobe_events import default_maxactive

        probe = self._probes[pid_]
        if probe.kind is not Kind.RETURN or precheck(probe):
            return None, ""
        maxactive = probe.maxactive or self.probeset.maxactive
        if self._returns is None:
            if maxactive:
                return None, "maxactive needs tracefs (mount it on /sys/kernel/tracing)"
            return None, ""
        if pid_ not in self._ret_events:
            try:
                name = self._returns.create(str(probe.target.symbol), maxactive)
            except OSError as exc:
                reason = explain_attach_error(probe, exc, None, self.symbols)
                log_line(self._log_fd, f"ktui: {probe.spec_text}: {reason}")
                return None, reason
            self._ret_events[pid_] = (name, maxactive or default_maxactive(_possible_cpus()))
        name = self._ret_events[pid_][0]
        returns = self._returns
        return (lambda prog_fd: returns.attach(prog_fd, name), lambda: returns.open(name)), ""

    def _drop_return_event(self, pid_: int) -> None:
        """The probe is gone (its fds closed): so is its kretprobe event."""
        event = self._ret_events.pop(pid_, None)
        if event is not None and not self._returns.remove(event[0]):
            log_line(self._log_fd, f"ktui: kretprobe event {event[0]} still busy, not removed")

    def _retire_return_event(self, pid_: int) -> None:
        """Switched off: its kretprobe event goes too (a disarmed event still
        sits in the kernel's kprobe list), its missed returns so far kept."""
        event = self._ret_events.get(pid_)
        if event is None or self._returns is None:
            return
        try:
            missed = self._returns.counts().get(event[0], (0, 0))[1]
        except OSError:
            missed = 0
        before = self._missed_before.get(pid_, (0, 0))[0]
        self._missed_before[pid_] = (before + missed, event[1])
        self._drop_return_event(pid_)

    def _detach(self, pid_: int) -> None:
        if pid_ in self._slots:
            self._engine.detach(self._slots[pid_])
            return
        fds = self._fds.pop(pid_, [])
        if fds:
            self.loader.detach(fds)  # closing a perf fd removes its kprobe

    # ------------------------------------------------------------ Feed API

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

    def symbolize(self, addr: int) -> str:
        return self.symbols.symbolize(addr)

    def drain(self) -> EventBatch:
        from ktui.record.decode import EmptyBatch, merged_by_time

        parts = []
        for unit in self._units:  # a unit freed meanwhile returns None
            raw = unit.drain_raw()
            if raw is not None and len(raw):
                parts.append(unit.decoder.batch(raw))
        engine = self._engine
        if engine is not None:
            batch = engine.drain()
            if len(batch):
                parts.append(batch)
        if not parts:
            return EmptyBatch()
        # several buffers: one batch in time order, each buffer's own order kept
        return parts[0] if len(parts) == 1 else merged_by_time(parts)

    def drain_capacity(self) -> int | None:
        """Records the smallest event buffer holds, so a collector can drain
        a flood less often without letting any buffer fill (drain_pacing);
        None when no buffer can say."""
        sizes = [unit.capacity() for unit in self._units]
        if self._engine is not None:
            sizes.append(self._engine.capacity())
        sizes = [s for s in sizes if s]
        return min(sizes) if sizes else None

    def stats(self) -> StatsSnapshot:
        now = time.monotonic()
        timed = self._timing.on
        out: dict[int, ProbeStats] = {}
        for unit in self._units:
            out.update(unit.read_stats(self.loader, timed))
        engine = self._engine
        if engine is not None:
            out.update(engine.stats(timed))
        self._add_missed_returns(out)
        # off meanwhile: what was read may have stopped growing partway
        return StatsSnapshot(now, out, timed=timed and self._timing.on)

    @property
    def timing(self) -> bool:
        return self._timing.on

    def set_timing(self, on: bool) -> None:
        """BPF run-time statistics on or off (runstats): FeedError if the
        kernel refuses them."""
        with self._lock:
            if self._closed and on:
                raise FeedError("the session is closed")
            try:
                self._timing.set(on)
            except OSError as exc:
                need = ("this kernel has none" if self.features.has("run_stats") is False
                        else "they need CAP_SYS_ADMIN and a kernel that has them")
                raise FeedError(f"the kernel refused BPF run-time statistics ({exc.strerror or exc}; "
                                f"{need})") from None
            if self._log_fd >= 0:
                log_line(self._log_fd, f"ktui: BPF run-time statistics {'on' if on else 'off'}")

    def _add_missed_returns(self, out: dict[int, ProbeStats]) -> None:
        """Each return probe's missed returns, as the kernel counted them:
        one read of kprobe_profile for all of them."""
        events = dict(self._ret_events)
        before = dict(self._missed_before)
        counts: dict[str, tuple[int, int]] = {}
        if events and self._returns is not None:
            try:
                counts = self._returns.counts()
            except OSError:
                pass
        for pid_ in set(events) | set(before):
            if pid_ not in out:
                continue
            missed, maxactive = before.get(pid_, (0, 0))
            if pid_ in events and events[pid_][0] in counts:
                missed += counts[events[pid_][0]][1]
                maxactive = events[pid_][1]
            if maxactive:
                out[pid_] = dataclasses.replace(out[pid_], missed_returns=missed, maxactive=maxactive)

    def set_enabled_now(self, probe_id: int, enabled: bool) -> ProbeStatus:
        with self._lock:
            if probe_id not in self._probes or (probe_id not in self._where and probe_id not in self._slots):
                raise FeedError(f"no probe {probe_id}")
            probe = dataclasses.replace(self._probes[probe_id], enabled=enabled)
            self._probes[probe_id] = probe
            self._sync_probeset()
            if enabled:
                return self._attach(probe_id)
            self._detach(probe_id)
            self._retire_return_event(probe_id)
            return self._set_status(probe_id, ProbeState.OFF)

    async def set_enabled(self, probe_id: int, enabled: bool) -> ProbeStatus:
        import asyncio

        return await asyncio.to_thread(self.set_enabled_now, probe_id, enabled)

    def _bind(self, probe: Probe) -> Probe:
        """`probe` with its parameter names bound to the kernel's BTF: codegen
        and the generic program read what the binding says (a name the
        kernel does not know is the user's error, one line). A return probe
        also learns what its function returns (errno counting, lang.errnos)."""
        if not needs_binding(probe) and (probe.kind is not Kind.RETURN or probe.errno_width is not None):
            return probe
        if self._names is None:
            from ktui.lang.kernel_names import KernelNames

            self._names = KernelNames()
        return bind_probe(probe, self._names)

    def add_probe_now(self, probe: Probe) -> ProbeStatus:
        try:
            probe = self._bind(probe)
        except KtuiError as exc:
            raise FeedError(str(exc)) from exc
        with self._lock:
            pid_ = self._new_id(probe)
            if self._engine is not None and self._add_generic(pid_, probe):
                self._sync_probeset()
                if probe.enabled:
                    return self._attach(pid_)
                return self._set_status(pid_, ProbeState.OFF)
        if self._engine is None:
            self._note_compiled(pid_, probe)
        try:
            self._compile_unit([probe], [pid_])
        except KtuiError as exc:
            with self._lock:
                del self._probes[pid_]
                del self._status[pid_]
            raise FeedError(str(exc)) from exc
        self._sync_probeset()
        if probe.enabled:
            return self._attach(pid_)
        return self._set_status(pid_, ProbeState.OFF)

    def _add_generic(self, pid_: int, probe: Probe) -> bool:
        """Give the probe to the generic engine: False if it cannot run it."""
        from ktui.kernel.generic.engine import NotGeneric

        choice = self._choose(probe, generic=True)
        if choice.refused:
            self._refused[pid_] = f"attach: fentry: {choice.reason}"
        try:
            self._slots[pid_] = self._engine.add(probe, pid_, choice.btf_id, choice.nargs)
        except NotGeneric as why:
            log_line(self._log_fd, f"ktui: {probe.spec_text}: compiled ({why})")
            self._refused.pop(pid_, None)
            self._note_compiled(pid_, probe)
            return False
        return True

    def _note_compiled(self, pid_: int, probe: Probe) -> None:
        """A compiled probe goes by kprobe: one told `attach: fentry` fails."""
        choice = self._choose(probe, generic=False)
        if choice.refused:
            self._refused[pid_] = f"attach: fentry: {choice.reason}"

    async def add_probe(self, probe: Probe) -> ProbeStatus:
        import asyncio

        return await asyncio.to_thread(self.add_probe_now, probe)

    def remove_probe_now(self, probe_id: int) -> None:
        with self._lock:
            if probe_id in self._slots:
                self._engine.remove(self._slots.pop(probe_id))
                self._drop_return_event(probe_id)
                del self._probes[probe_id]
                del self._status[probe_id]
                self._sync_probeset()
                return
            if probe_id not in self._where:
                raise FeedError(f"no probe {probe_id}")
            self._detach(probe_id)
            self._drop_return_event(probe_id)
            unit, local = self._where.pop(probe_id)
            del self._probes[probe_id]
            del self._status[probe_id]
            if unit.drop(local):
                self._units = tuple(u for u in self._units if u is not unit)
                unit.close(self.loader, self._log_fd)
            self._sync_probeset()

    async def remove_probe(self, probe_id: int) -> None:
        import asyncio

        await asyncio.to_thread(self.remove_probe_now, probe_id)

    def _sync_probeset(self) -> None:
        self.probeset = dataclasses.replace(
            self.probeset, probes=tuple(self._probes[i] for i in sorted(self._probes))
        )


def _first_line(exc: OSError) -> str:
    """The error, and the verifier's last word where it said one."""
    text = str(exc)
    log = getattr(exc, "log", "")
    lines = [line for line in log.splitlines() if line.strip()]
    return f"{text} ({lines[-1][:160]})" if lines else text


def _possible_cpus() -> int:
    from ktui.kernel.maps import bpfsys

    return bpfsys.possible_cpus()


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
