"""Session: a probe in and out of the kernel, by either engine.

A compiled unit is generated and compiled (one clang run for its probes)
and its reader started; a probe is attached through its unit
(unit_attach) or its generic engine slot, and detached again by closing
its fds (the kernel drops the probe; the loaded program stays).
"""

from __future__ import annotations

from ktui.kernel.session.fentry import first_line
from ktui.kernel.session.unit_attach import attach_probe
from ktui.kernel.quiet import log_line
from ktui.kernel.session.unit import Unit, compile_unit, start_reading
from ktui.lang.model import Kind, Probe
from ktui.record.feed import FeedError, ProbeState, ProbeStatus


class AttachingMixin:
    """Session's attaching methods (state: Session.__init__)."""

    def _compile_unit(self, probes: list[Probe], ids: list[int], read_now: bool = True) -> Unit:
        from ktui.kernel.codegen import generate  # the C generator is kept off the generic engine's launch path

        program = generate(
            probes,
            buffer=self.buffer,
            ringbuf_pages=self.options.ringbuf_pages,
            pid=self.probeset.pid,
            comm=self.probeset.comm,
            exclude_pids=self._own_pids(),
            context=self._context_addresses(),
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

    def _context_addresses(self) -> tuple[int, int, int]:
        """Where a hit's context (task, softirq, hardirq, NMI) is read, for
        the records: found once per session (kallsyms, and BTF where the
        count sits in pcpu_hot); 0s where this kernel does not say."""
        if self._context is None:
            try:
                self._context = self.loader.context_addresses(self._kernel_btf())
            except Exception as exc:  # noqa: BLE001 - events then say no context
                log_line(self._log_fd, f"ktui: interrupt context not known: {exc}")
                from ktui.kernel.symbols.interrupt_context import NOT_KNOWN

                self._context = NOT_KNOWN
            if not self._context.known:
                log_line(self._log_fd, "ktui: interrupt context not known on this kernel (no preempt count "
                         "address: not root, or an unknown layout): events do not say softirq/hardirq/NMI")
        c = self._context
        return (c.cpu_offsets, c.preempt_count, c.nmi_state)

    def _start_reading(self, unit: Unit) -> None:
        start_reading(unit, self.loader, [self._probes[i] for i in unit.ids], self.options,
                      self._cgroup_namer())

    def _cgroup_namer(self):
        """id -> path for a compiled unit's events (each carries its task's
        cgroup id): the generic engine's namer where there is one (one walk
        of the tree serves both), else the session's own, made once."""
        if self._engine is not None:
            return self._engine.cgroup_names
        if self._cgroup_names is None:
            from ktui.kernel.attach.cgroup_scope import cgroup2_root
            from ktui.kernel.symbols.cgroup_names import CgroupNames

            self._cgroup_names = CgroupNames(cgroup2_root())
        return self._cgroup_names

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
        slot, probe = self._slots[pid_], self._probes[pid_]
        if slot.fds:
            return self._status[pid_]
        if probe.within is not None:
            # its gate first, once the program (which keeps the gate's depths) is in
            waiting = self._until_program(pid_, slot)
            if waiting is not None:
                return waiting
            reason = self._attach_gate(probe.within)
            if reason:
                return self._failed(pid_, reason)
        if probe.since is not None:
            # its start first, once the program (which joins the two) is in
            waiting = self._until_program(pid_, slot)
            if waiting is not None:
                return waiting
            reason = self._attach_span_start(pid_)
            if reason:
                return self._failed(pid_, reason)
            status = self._attach_end(pid_)
            if status.state is ProbeState.FAILED:
                self._detach_span_start(pid_)  # its starts would wait for no end
            return status
        return self._attach_end(pid_)

    def _attach_end(self, pid_: int) -> ProbeStatus:
        """The probe itself (after its gate or its span's start), by its kind."""
        from ktui.kernel.session.unit_attach import location, precheck
        from ktui.kernel.attach.explain import explain_attach_error

        slot, probe = self._slots[pid_], self._probes[pid_]
        if slot.tracing:
            return self._attach_fentry(pid_)
        if slot.tracepoint:
            return self._attach_tracepoint(pid_)
        if probe.target.is_user:
            return self._attach_user(pid_)
        if slot.sites:
            return self._attach_wildcard(pid_)
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
        if self._engine.program is None and not slot.counter:  # a counting probe needs no program
            return self._set_status(pid_, ProbeState.LOADING, via=slot.via)
        return self._set_status(pid_, ProbeState.ATTACHED, via=slot.via)

    def _until_program(self, pid_: int, slot) -> ProbeStatus | None:
        """A probe that attaches only once the generic program is in
        (Slot.waits_for_program): FAILED if it did not load, LOADING until
        it is; None once it is in."""
        if self.load_error:
            return self._set_status(pid_, ProbeState.FAILED, self.load_error)
        if self._engine.program is None:
            return self._set_status(pid_, ProbeState.LOADING, via=slot.via)
        return None

    def _attach_tracepoint(self, pid_: int) -> ProbeStatus:
        """A tracepoint probe: its own copy of the tracepoint variant, linked
        once the generic program (whose maps it shares) is in. Until then it
        waits, LOADING: no dispatcher counts a tracepoint's hits. Its id is
        its format's, read (and kept) when its fields were bound."""
        slot, probe = self._slots[pid_], self._probes[pid_]
        waiting = self._until_program(pid_, slot)
        if waiting is not None:
            return waiting
        try:
            self._link_tracepoint(slot)
        except Exception as exc:  # noqa: BLE001 - OSError, the verifier, a compile: the probe says why
            return self._failed(pid_, f"tracepoint {probe.target.tracepoint}: {first_line(exc)}")
        return self._set_status(pid_, ProbeState.ATTACHED, via=slot.via)

    def _link_tracepoint(self, slot) -> None:
        """A tracepoint slot's perf links (every event of a pattern), on the
        tracepoint variant, loaded the first time one is needed."""
        if self._engine.tracepoint is None:
            self._engine.tracepoint = self.loader.tracepoint_variant(
                self._log_fd, self.options.cache_dir, self.options.cache, self._compile,
                func_arg_helpers=self.features.func_arg_helpers)
        names = self._kernel_names()
        probe = slot.probe
        events = probe.members if slot.sites else (probe.target.tracepoint,)
        self._engine.attach_tracepoint(slot, [names.tracepoint_format(e).id for e in events])

    def _attach_wildcard(self, pid_: int) -> ProbeStatus:
        """A wildcard of kernel functions: every match at once, once the
        generic program (which counts hits by function) is in; until then
        it waits, LOADING."""
        slot = self._slots[pid_]
        waiting = self._until_program(pid_, slot)
        if waiting is not None:
            return waiting
        try:
            self._engine.attach_wildcard(slot)
        except OSError as exc:
            return self._failed(pid_, f"{slot.via} on {len(slot.sites)} functions: {first_line(exc)}")
        return self._set_status(pid_, ProbeState.ATTACHED, via=slot.via)

    def _attach_user(self, pid_: int) -> ProbeStatus:
        """A user-space probe: its file offsets found in its ELF file (read
        again at each attach: a fraction of a millisecond, and a rebuilt file
        is then read as it is now), then uprobes on them, only in the set's
        --pid where it has one. The log gets its notes (a shared library
        probed in every process)."""
        slot = self._slots[pid_]
        reason = self._link_user(slot)
        if reason:
            return self._failed(pid_, reason)
        if self.load_error:
            return self._set_status(pid_, ProbeState.FAILED, self.load_error)
        if self._engine.program is None and not slot.counter:
            return self._set_status(pid_, ProbeState.LOADING, via=slot.via)
        return self._set_status(pid_, ProbeState.ATTACHED, via=slot.via)

    def _failed(self, pid_: int, reason: str) -> ProbeStatus:
        """The probe failed for `reason`: the log and its state say why."""
        log_line(self._log_fd, f"ktui: {self._probes[pid_].spec_text}: {reason}")
        return self._set_status(pid_, ProbeState.FAILED, reason)

    def _link_user(self, slot) -> str:
        """A user-space slot's uprobes (its file offsets found in its ELF
        file, only in the set's --pid where it has one); "" or why not."""
        from ktui.kernel.attach.explain import explain_attach_error
        from ktui.kernel.symbols.uprobe_target import UprobeTargetError, check_probe_target

        probe, pid = slot.probe, self.probeset.pid
        try:
            target, notes = check_probe_target(probe, pid)
        except UprobeTargetError as exc:
            return str(exc)
        for note in notes:
            log_line(self._log_fd, f"ktui: {probe.spec_text}: {note}")
        try:
            self._engine.attach_user(slot, target.path, target.file_offsets, pid, target.ref_ctr_offset)
        except OSError as exc:
            return explain_attach_error(probe, exc, None, self.symbols)
        return ""

    def _detach(self, pid_: int) -> None:
        if pid_ in self._slots:
            self._engine.detach(self._slots[pid_])
            self._detach_span_start(pid_)
            return
        fds = self._fds.pop(pid_, [])
        if fds:
            self.loader.detach(fds)  # closing a perf fd removes its kprobe
