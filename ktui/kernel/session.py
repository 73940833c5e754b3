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
"""

from __future__ import annotations

import dataclasses
import os
import resource
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ktui.kernel import kprobe_pmu
from ktui.kernel.attach import attach_probe
from ktui.kernel.buffer_choice import resolve_buffer
from ktui.kernel.codegen import PERF, generate
from ktui.kernel.ksyms import KernelSymbols
from ktui.kernel.loader import BccLoader, Loader
from ktui.kernel.quiet import log_line, open_log
from ktui.kernel.unit import Unit, compile_unit, start_reading
from ktui.lang.model import KtuiError, Probe, ProbeSet
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




class Session:
    def __init__(self, probeset: ProbeSet, options: SessionOptions | None = None,
                 loader: Loader | None = None) -> None:
        """`loader`: the kernel side (bcc and the kprobe PMU by default)."""
        self.options = options or SessionOptions()
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

    def detach_all(self) -> None:
        """Detach every probe; keep the programs, maps and buffers. When it
        returns no probe program runs any more (closing a kprobe's perf fd
        waits until its handlers are done), so draining to the end and then
        reading stats gives every event emitted and exact counters. No probe
        can be attached again; close() frees the rest."""
        with self._lock:
            self._detached = True
            fds = [fd for pid_ in list(self._fds) for fd in self._fds.pop(pid_)]
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
            started = time.monotonic()
            units, self._units = self._units, ()
            for unit in units:
                unit.close(self.loader, self._log_fd)
            if self._log_fd >= 0:  # not opened when open() was never called
                log_line(self._log_fd, f"ktui: freed the programs in {time.monotonic() - started:.2f} s "
                         f"(at {time.monotonic():.3f})")
                os.close(self._log_fd)
                self._log_fd = -1

    # ------------------------------------------------------------ compile

    def _pick_buffer(self) -> str:
        return resolve_buffer(self.options.buffer)

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
            exclude_pid=None if self.options.include_self else os.getpid(),
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

    def _set_status(self, pid_: int, state: ProbeState, reason: str = "") -> ProbeStatus:
        status = ProbeStatus(pid_, self._probes[pid_], state, reason)
        self._status[pid_] = status
        return status

    def _attach(self, pid_: int) -> ProbeStatus:
        with self._lock:
            if pid_ in self._fds:
                return self._status[pid_]
            if self._detached:
                raise FeedError("the probes were detached: the session is ending")
            unit, local = self._where[pid_]
            fds, reason = attach_probe(self.loader, unit, local, self._probes[pid_],
                                       self.symbols, self._log_fd)
            if reason:
                return self._set_status(pid_, ProbeState.FAILED, reason)
            self._fds[pid_] = fds
            return self._set_status(pid_, ProbeState.ATTACHED)

    def _detach(self, pid_: int) -> None:
        fds = self._fds.pop(pid_, [])
        if fds:
            self.loader.detach(fds)  # closing a perf fd removes its kprobe

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
        for unit in self._units:  # a unit freed meanwhile returns None
            raw = unit.drain_raw()
            if raw is not None and len(raw):
                parts.append(unit.decoder.batch(raw))
        if not parts:
            return EmptyBatch()
        return parts[0] if len(parts) == 1 else MultiBatch(parts)

    def stats(self) -> StatsSnapshot:
        now = time.monotonic()
        out: dict[int, ProbeStats] = {}
        for unit in self._units:
            out.update(unit.read_stats(self.loader))
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
