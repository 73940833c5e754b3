"""Session: starting the generic engine and loading its program in the background.

The dispatcher goes in at once, so probes count from the first moment;
ktui's compile helper starts where a start may compile; the generic
program (kprobe variant, then the fentry/fexit one where probes want it)
loads from the cache or compiles in the background, and the probes that
wait for it are attached once it is in.
"""

from __future__ import annotations

import mmap
import os
import threading
import time

from ktui.kernel.codegen import PERF
from ktui.kernel.quiet import log_line
from ktui.lang.model import KtuiError
from ktui.record.feed import ProbeState
from ktui.kernel.session.options import ENGINES


class EngineStartMixin:
    """Session's engine start methods (state: Session.__init__)."""

    def _start_engine(self):
        engine = self.options.engine
        if engine not in ENGINES:
            raise KtuiError(f"unknown engine {engine!r}: use auto, generic or compiled")
        if engine == "compiled" or (engine == "auto" and self.buffer == PERF):
            if self.probeset.cgroup is not None:
                raise KtuiError("--cgroup runs on the generic engine only (not --engine compiled or --buffer perf)")
            return None
        cgroup_fd = self._open_cgroup()
        self._start_helper()
        started = time.monotonic()
        made = self.loader.generic_engine(exclude_pids=self._own_pids(), pid=self.probeset.pid,
                                          comm=self.probeset.comm, features=self.features)
        if cgroup_fd is not None:
            if made is None:
                os.close(cgroup_fd)
                raise KtuiError("--cgroup runs on the generic engine only, which this kernel cannot run "
                                "(see `ktui doctor`)")
            made.limit_to_cgroup(cgroup_fd)
        if made is None:
            self._stop_helper()  # the compiled path compiles in ktui itself
        if made is None and engine == "generic":
            cookies = self.features["kprobe_cookie"]
            state = "could not be checked" if cookies.have is None else "are missing"
            raise KtuiError(f"the generic engine needs attach cookies on kprobe links, and on this kernel "
                            f"they {state}: {cookies.detail} (see `ktui doctor`)")
        if made is not None:
            made.events = self.options.events
            log_line(self._log_fd, f"ktui: dispatcher loaded in {time.monotonic() - started:.2f} s")
            if made.counters_refused:
                log_line(self._log_fd, f"ktui: probes that only count go through the dispatcher: "
                         f"{made.counters_refused}")
        return made

    def _open_cgroup(self) -> int | None:
        """--cgroup's directory, open (None without one); CgroupError (one
        line) where it is no cgroup v2 directory."""
        if self.probeset.cgroup is None:
            return None
        from ktui.kernel.attach.cgroup_scope import open_cgroup

        return open_cgroup(self.probeset.cgroup)

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
        counting = sum(1 for slot in self._slots.values() if slot.counter)
        log_line(self._log_fd, f"ktui: {len(self._slots)} probe(s) attached ({counting} counting by a program "
                 f"of their own, the rest through the dispatcher) in {time.monotonic() - started:.2f} s")
        threading.Thread(target=self._load_generic, name="ktui-generic-load", daemon=True).start()
        return rest

    def _load_generic(self) -> None:
        """In the background: the generic program, then every slot routed to
        it; then the fentry/fexit variant, where a probe goes that way, or
        (after `loaded`: nothing waits for it) compiled for later starts.
        That compile is claimed before `loaded` is set: a session closed
        the moment it is loaded leaves the helper to the compile (which
        fills the cache), not the compile without a helper."""
        self._load_kprobe_variant()
        log_fd = -1
        try:
            self._attach_waiting_tracepoints()
            if any(s.tracing and not s.counter for s in list(self._slots.values())) and not self.load_error:
                self._attach_waiting_fentry()
            if self._compile_tracing_later and not self.load_error:
                log_fd = self._claim_tracing_compile()
        finally:
            self.loaded.set()
        if log_fd >= 0:
            self._run_tracing_compile(log_fd)

    def _compile_tracing_variant(self) -> None:
        """The tracing variant compiled into the cache (an `auto` probe went
        by kprobe for want of it): later starts, and probes added from now
        on, go by fentry. Once per session."""
        log_fd = self._claim_tracing_compile()
        if log_fd >= 0:
            self._run_tracing_compile(log_fd)

    def _claim_tracing_compile(self) -> int:
        """Claim the session's one compile of the tracing variant: its own
        dup of the log fd (the session may close meanwhile, and its fd
        number be reused), or -1 where it is claimed already or the session
        has ended. From the claim on, close() leaves the compile helper to
        the compile, which stops it when done."""
        with self._lock:
            if self._closed or self._log_fd < 0 or self._tracing_compiling:
                return -1
            self._tracing_compiling = True
            self._tracing_compile_running = True
            return os.dup(self._log_fd)

    def _run_tracing_compile(self, log_fd: int) -> None:
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
            with self._lock:
                self._tracing_compile_running = False
                ended = self._closed
            if ended:  # close() left the helper to this compile
                self._stop_helper()

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
        # Where a hit's context is read goes into the program's config when
        # it is installed. Found here, after the probes are attached, not
        # before: it reads /proc/kallsyms (a second under emulation), which
        # a probe counting from the first moment does not need.
        context = self._context_addresses()
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
            self._engine.context = context
            self._engine.install_program(program)
            for pid_, slot in list(self._slots.items()):
                if self._status[pid_].state is ProbeState.LOADING and not (slot.tracing or slot.waits_for_program):
                    self._set_status(pid_, ProbeState.ATTACHED, via=slot.via)

    def _attach_waiting_tracepoints(self) -> None:
        """The generic program is in: every tracepoint probe and wildcard
        waiting for it attaches."""
        with self._lock:
            if self._closed or self._engine is None or self.load_error:
                return
            for pid_, slot in list(self._slots.items()):
                if slot.waits_for_program and self._status[pid_].state is ProbeState.LOADING:
                    self._attach_generic(pid_)
