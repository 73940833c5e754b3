"""A live probe set in the kernel: compile, attach, toggle, read, detach.

`Session` is the live `Feed`. The set is compiled once (one clang run for
every probe); each probe is then attached through the kprobe PMU
(`kprobe_pmu`), so switching it off closes its perf fds and the kernel drops
the probe, and switching it on again re-attaches the already-loaded program
without recompiling. A probe added later is compiled on its own into a
second program ("unit"), so adding never disturbs what is running.

Every attachment is an fd owned by this process: `close()` releases them
all, and if the process dies (even by SIGKILL) the kernel does it.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ktui.kernel import kprobe_pmu
from ktui.kernel.buffer_choice import resolve_buffer
from ktui.kernel.codegen import PERF, RINGBUF, Program, generate
from ktui.kernel.explain import explain_attach_error
from ktui.kernel.ksyms import KernelSymbols
from ktui.kernel.quiet import captured_stderr, log_line, open_log
from ktui.kernel.statmaps import read_unit_stats
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


@dataclass
class _Unit:
    """One compiled BPF program and its readers."""

    bpf: object
    program: Program
    ids: list[int]  # session probe id by local index
    # Set by _start_reading: numpy (decode, ring views) is imported only then.
    decoder: object | None = None
    reader: object | None = None
    live: set[int] = field(default_factory=set)  # local indices not removed


class Session:
    def __init__(self, probeset: ProbeSet, options: SessionOptions | None = None) -> None:
        self.options = options or SessionOptions()
        self.probeset = probeset
        self.symbols = KernelSymbols()
        self._log_fd = -1
        self._units: list[_Unit] = []
        self._where: dict[int, tuple[_Unit, int]] = {}
        self._probes: dict[int, Probe] = {}
        self._status: dict[int, ProbeStatus] = {}
        self._fds: dict[int, list[int]] = {}
        self._next_id = 0
        self._lock = threading.RLock()
        self._closed = False
        self.buffer = self._pick_buffer()

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> "Session":
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        """Compile the whole set once and attach every enabled probe."""
        if self._log_fd < 0:
            self._log_fd = open_log(self.options.log_path)
        _raise_fd_limit()
        probes = list(self.probeset.probes)
        ids = [self._new_id(p) for p in probes]
        # A ring buffer keeps what the probes write until it is read, so its
        # reader (and numpy, a second of imports under emulation) can come
        # after the probes are live. Perf buffers drop events while no reader
        # has opened them: their reader comes first.
        read_first = self.buffer == PERF
        try:
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
        except BaseException:  # KeyboardInterrupt too: nothing stays attached
            self.close()
            raise

    def close(self) -> None:
        """Detach everything and free the programs. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            fds = [fd for pid_ in list(self._fds) for fd in self._fds.pop(pid_)]
            started = time.monotonic()
            kprobe_pmu.detach_all(fds)
            detached = time.monotonic()
            for unit in self._units:
                self._close_unit(unit)
            self._units.clear()
            if self._log_fd >= 0:  # not opened when open() was never called
                log_line(self._log_fd, f"ktui: detached {len(fds)} kprobe(s) in {detached - started:.2f} s, "
                         f"freed the programs in {time.monotonic() - detached:.2f} s (at {time.monotonic():.3f})")
                os.close(self._log_fd)
                self._log_fd = -1

    def _close_unit(self, unit: _Unit) -> None:
        try:
            if unit.reader is not None:
                unit.reader.close()
        finally:
            with captured_stderr(self._log_fd):
                unit.bpf.cleanup()

    # ------------------------------------------------------------ compile

    def _pick_buffer(self) -> str:
        return resolve_buffer(self.options.buffer)

    def _new_id(self, probe: Probe) -> int:
        pid_ = self._next_id
        self._next_id += 1
        self._probes[pid_] = probe
        self._status[pid_] = ProbeStatus(pid_, probe, ProbeState.PENDING)
        return pid_

    def _compile_unit(self, probes: list[Probe], ids: list[int], read_now: bool = True) -> _Unit:
        from bcc import BPF  # imported late: offline commands need no bcc

        program = generate(
            probes,
            buffer=self.buffer,
            ringbuf_pages=self.options.ringbuf_pages,
            pid=self.probeset.pid,
            comm=self.probeset.comm,
            exclude_pid=None if self.options.include_self else os.getpid(),
        )
        log_line(self._log_fd, f"ktui: compiling {len(probes)} probe(s)")
        started = time.monotonic()
        with captured_stderr(self._log_fd) as cap:
            try:
                bpf = BPF(text=program.text.encode())
            except Exception as exc:  # bcc raises bare Exception on compile errors
                detail = cap.first_error() if cap.text else str(exc)
                raise KtuiError(f"BPF compile failed: {detail or exc}") from exc
        log_line(self._log_fd, f"ktui: compiled in {time.monotonic() - started:.2f} s")
        unit = _Unit(bpf, program, list(ids), live=set(range(len(ids))))
        if read_now:
            try:
                self._start_reading(unit)
            except Exception:
                with captured_stderr(self._log_fd):
                    bpf.cleanup()
                raise
        with self._lock:
            self._units.append(unit)
            for local, pid_ in enumerate(ids):
                self._where[pid_] = (unit, local)
        return unit

    def _start_reading(self, unit: _Unit) -> None:
        """Map the unit's event buffer and build its decoder."""
        from ktui.record.decode import Decoder

        program = unit.program
        probes = [self._probes[i] for i in unit.ids]
        unit.decoder = Decoder(program.layout, probes, unit.ids)
        unit.reader = self._open_reader(unit.bpf, program)

    def _open_reader(self, bpf, program: Program):
        size = program.layout.record_size
        if program.buffer == RINGBUF:
            from ktui.kernel.ringbuf import RingBufReader

            table = bpf[b"ktui_events"]
            return RingBufReader(table.map_fd, self.options.ringbuf_pages * 4096, size)
        from ktui.kernel.perfbuf import PerfBufReader

        return PerfBufReader(bpf, b"ktui_events", size, self.options.perf_pages)

    # ------------------------------------------------------------ attach

    def _set_status(self, pid_: int, state: ProbeState, reason: str = "") -> ProbeStatus:
        status = ProbeStatus(pid_, self._probes[pid_], state, reason)
        self._status[pid_] = status
        return status

    def _attach(self, pid_: int) -> ProbeStatus:
        with self._lock:
            if pid_ in self._fds:
                return self._status[pid_]
            probe = self._probes[pid_]
            reason = self._precheck(probe)
            if reason:
                return self._set_status(pid_, ProbeState.FAILED, reason)
            unit, local = self._where[pid_]
            symbol, offset, address = self._location(probe)
            fds: list[int] = []
            try:
                with captured_stderr(self._log_fd) as cap:
                    try:
                        if probe.kind is Kind.RETURN:
                            entry = unit.bpf.load_func(unit.program.entry_fn(local).encode(), 2).fd
                            fds.append(kprobe_pmu.attach(entry, symbol, offset, False, address))
                        fn = unit.bpf.load_func(unit.program.probe_fn(local).encode(), 2).fd
                        retprobe = probe.kind is Kind.RETURN
                        fds.append(kprobe_pmu.attach(fn, symbol, offset, retprobe, address))
                    except Exception as exc:
                        raise _AttachError(self._explain(probe, exc, cap)) from exc
            except (_AttachError, OSError) as exc:
                # OSError: not even an fd left to capture bcc's stderr (EMFILE)
                reason = str(exc) if isinstance(exc, _AttachError) else self._explain(probe, exc, None)
                for fd in fds:
                    os.close(fd)
                log_line(self._log_fd, f"ktui: {probe.spec_text}: {reason}")
                return self._set_status(pid_, ProbeState.FAILED, reason)
            self._fds[pid_] = fds
            return self._set_status(pid_, ProbeState.ATTACHED)

    def _detach(self, pid_: int) -> None:
        for fd in self._fds.pop(pid_, []):
            try:
                os.close(fd)  # closing the perf fd removes the kprobe
            except OSError:
                pass

    def _location(self, probe: Probe) -> tuple[str | None, int, int | None]:
        t = probe.target
        if t.address is not None:
            found = self.symbols.resolve(t.address)
            if found is not None:
                return found[0], found[1], None
            return None, 0, t.address
        return t.symbol, t.offset, None

    def _precheck(self, probe: Probe) -> str:
        """Reasons to refuse a probe before asking the kernel. Symbol checks
        wait until the kernel refuses: parsing /proc/kallsyms costs seconds
        under emulation, and a probe that attaches needs none of it."""
        t = probe.target
        if probe.kind is Kind.RETURN and (t.address is not None or t.offset):
            return "a return probe needs a function entry: drop the address/offset or use :c"
        return ""

    def _explain(self, probe: Probe, exc: Exception, cap) -> str:
        return explain_attach_error(probe, exc, cap, self.symbols)

    # ------------------------------------------------------------ Feed API

    def statuses(self) -> dict[int, ProbeStatus]:
        return dict(self._status)

    def system_info(self) -> SystemInfo:
        from ktui.kernel.preflight import preflight_warnings

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
        from ktui.record.decode import EmptyBatch, MultiBatch

        parts = []
        for unit in list(self._units):
            if unit.reader is None:
                continue
            raw = unit.reader.drain()
            if len(raw):
                parts.append(unit.decoder.batch(raw))
        if not parts:
            return EmptyBatch()
        return parts[0] if len(parts) == 1 else MultiBatch(parts)

    def stats(self) -> StatsSnapshot:
        now = time.monotonic()
        out: dict[int, ProbeStats] = {}
        for unit in list(self._units):
            out.update(read_unit_stats(unit))
        return StatsSnapshot(now, out)

    def set_enabled_now(self, probe_id: int, enabled: bool) -> ProbeStatus:
        with self._lock:
            if probe_id not in self._probes or probe_id not in self._where:
                raise FeedError(f"no probe {probe_id}")
            probe = dataclasses.replace(self._probes[probe_id], enabled=enabled)
            self._probes[probe_id] = probe
            self._sync_probeset()
            if enabled:
                return self._attach(probe_id)
            self._detach(probe_id)
            return self._set_status(probe_id, ProbeState.OFF)

    async def set_enabled(self, probe_id: int, enabled: bool) -> ProbeStatus:
        import asyncio

        return await asyncio.to_thread(self.set_enabled_now, probe_id, enabled)

    def add_probe_now(self, probe: Probe) -> ProbeStatus:
        with self._lock:
            pid_ = self._new_id(probe)
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

    async def add_probe(self, probe: Probe) -> ProbeStatus:
        import asyncio

        return await asyncio.to_thread(self.add_probe_now, probe)

    def remove_probe_now(self, probe_id: int) -> None:
        with self._lock:
            if probe_id not in self._where:
                raise FeedError(f"no probe {probe_id}")
            self._detach(probe_id)
            unit, local = self._where.pop(probe_id)
            del self._probes[probe_id]
            del self._status[probe_id]
            unit.live.discard(local)
            if not unit.live:
                self._units.remove(unit)
                self._close_unit(unit)
            self._sync_probeset()

    async def remove_probe(self, probe_id: int) -> None:
        import asyncio

        await asyncio.to_thread(self.remove_probe_now, probe_id)

    def _sync_probeset(self) -> None:
        self.probeset = dataclasses.replace(
            self.probeset, probes=tuple(self._probes[i] for i in sorted(self._probes))
        )


class _AttachError(Exception):
    pass




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
