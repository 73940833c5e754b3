"""Session: the user's edits while it runs: add, remove, switch a probe.

An added probe goes to the generic engine where it can run there (nothing
compiles), else into a unit of its own, so adding never disturbs what is
running; switching a probe off closes its fds and keeps its program.
"""

from __future__ import annotations

import dataclasses

from ktui.kernel.quiet import log_line
from ktui.lang.bind import bind_alone, bind_probe, needs_binding
from ktui.lang.cgroups import filter_paths, uses_cgroup
from ktui.lang.latency import uses_latency
from ktui.lang.model import GateSpan, Kind, KtuiError, Probe
from ktui.record.feed import FeedError, ProbeState, ProbeStatus

# why a tracepoint or user-space probe cannot run where the generic engine does not
GENERIC_ONLY = ("runs on the generic engine only (attach cookies, kernel 5.15+, "
                "and events by ring buffer: not --engine compiled or --buffer perf)")


def generic_only(probe: Probe) -> str:
    """Why `probe` is never compiled ("" when it may be): a tracepoint runs on
    the generic program's own variant, and a uprobe's reads of user memory
    are the generic program's alone."""
    if probe.kind is Kind.TRACEPOINT:
        return f"a tracepoint {GENERIC_ONLY}"
    if probe.target.is_user:
        return f"a user-space probe {GENERIC_ONLY}"
    if probe.target.is_wildcard:
        return f"a wildcard {GENERIC_ONLY}"
    if probe.within is not None:
        return f"a probe with within: {GENERIC_ONLY}"
    if probe.since is not None:
        return f"a span (since:) {GENERIC_ONLY}"
    if uses_cgroup(probe):
        return f"a probe that reads cgroup {GENERIC_ONLY}"
    if uses_latency(probe):
        return f"a probe that reads latency {GENERIC_ONLY}"
    if probe.agg is not None and probe.agg.hist_keys:
        return f"a histogram by key (hist(VALUE, KEY)) {GENERIC_ONLY}"
    return ""


def _check_cgroup_paths(probe: Probe) -> None:
    """`cgroup == "PATH"`: the directory exists and is cgroup v2, before
    anything attaches (the plan resolves it again, kernel/generic/plan)."""
    for path in filter_paths(probe):
        from ktui.kernel.attach.cgroup_scope import cgroup_id

        cgroup_id(path)


class EditsMixin:
    """Session's edits methods (state: Session.__init__)."""

    def set_enabled_now(self, probe_id: int, enabled: bool) -> ProbeStatus:
        with self._lock:
            if probe_id not in self._probes or (probe_id not in self._where and probe_id not in self._slots
                                                and probe_id not in self._refused):
                raise FeedError(f"no probe {probe_id}")
            probe = dataclasses.replace(self._probes[probe_id], enabled=enabled)
            self._probes[probe_id] = probe
            self._sync_probeset()
            if enabled:
                return self._attach(probe_id)
            self._detach(probe_id)
            self._retire_return_event(probe_id)
            return self._set_status(probe_id, ProbeState.OFF)

    def _bind(self, probe: Probe) -> Probe:
        """`probe` with its parameter names bound to the kernel's BTF: codegen
        and the generic program read what the binding says (a name the
        kernel does not know is the user's error, one line). A return probe
        also learns what its function returns (errno counting, lang.errnos).
        A probe with alternatives is first given the one this kernel has
        (lang.alternatives): by BTF in bind_probe, by kallsyms here where
        there is no BTF. A USDT probe's a1..aN are bound to where its
        probe point's note places them (kernel/symbols/usdt). A filter's cgroup
        path must name a cgroup v2 directory here (one line, CgroupError)."""
        _check_cgroup_paths(probe)
        if isinstance(probe.within, GateSpan):  # a gate between two events: each end bound as the probe it is
            ends = []
            for end in (probe.within.start, probe.within.end):
                try:
                    ends.append(self._bind(end))
                except KtuiError as exc:
                    raise KtuiError(f"within: {exc}") from None
            return dataclasses.replace(self._bind(dataclasses.replace(probe, within=None)), within=GateSpan(*ends))
        if probe.since is not None:  # a span: each end bound as the probe it is
            try:
                start = self._bind(probe.since)
            except KtuiError as exc:
                raise KtuiError(f"since: {exc}") from None
            # the end keeps its since(...) while it is bound: its filter's
            # `latency` is a span's (lang.latency); the values it reads of
            # its start (start.X) are bound as the start reads them
            from ktui.lang.bind import bind_start_values

            return bind_start_values(dataclasses.replace(self._bind_alone(probe), since=start), self._bind_alone)
        return self._bind_alone(probe)

    def _bind_alone(self, probe: Probe) -> Probe:
        """_bind of one probe: a span's end as itself, its since(...) left as it is."""
        if probe.kind is Kind.USDT:
            from ktui.kernel.symbols.usdt import bind_usdt

            return bind_usdt(probe)[0]
        if probe.target.is_wildcard:
            return self._bind_wildcard(probe)
        alternatives = probe.target.alternatives
        if not alternatives and not needs_binding(probe) and (
                probe.kind is not Kind.RETURN or probe.errno_width is not None):
            return probe
        if alternatives and self._kernel_names().problem() is not None:
            from ktui.kernel.symbols.ksyms import KernelSymbols
            from ktui.lang.alternatives import choose_alternative

            symbols = KernelSymbols()
            if symbols.available:
                probe = choose_alternative(probe, symbols.exists, symbols.close_names)
        return bind_alone(probe, self._kernel_names(), text=None, filter_text=None)

    def _generic_only(self, probe: Probe) -> str:
        """Why `probe` may not be compiled in this session ("" when it may):
        its own kind (generic_only), or the set's --cgroup, which compiled
        programs do not read."""
        if self.probeset.cgroup is not None and not generic_only(probe):
            return f"with --cgroup a probe {GENERIC_ONLY}"
        return generic_only(probe)

    def _bind_wildcard(self, probe: Probe) -> Probe:
        """A wildcard with its matches on this kernel (Probe.members), up to
        what this kernel attaches at once: one kprobe_multi link, or one
        perf probe per match. A tracepoint pattern's fields are bound in
        every event it matches, and must read alike in all (the same
        offset and type), or it is refused naming the first that differs."""
        from ktui.kernel.symbols.wildcard_matches import function_matches
        from ktui.lang.limits import WILDCARD_MAX_MULTI, WILDCARD_MAX_SINGLE
        from ktui.lang.model import SpecError
        from ktui.lang.wildcards import too_many

        pattern = str(probe.target)
        if probe.kind is Kind.TRACEPOINT:
            probe = bind_probe(probe, self._kernel_names())  # its matches, each one's fields alike
            members, cap, what = probe.members or (), WILDCARD_MAX_SINGLE, "tracepoints"
        else:
            members = function_matches(pattern)
            cap = WILDCARD_MAX_MULTI if self._wildcard_multi() else WILDCARD_MAX_SINGLE
            what = "kernel functions"
            probe = dataclasses.replace(bind_probe(probe, self._kernel_names()), members=members)
        if len(members) > cap:
            raise SpecError(too_many(pattern, len(members), cap, what, members), col=1)
        return probe

    def _wildcard_multi(self) -> bool:
        """A wildcard of kernel functions goes in kprobe_multi links where
        the kernel makes them (5.18+ with CONFIG_FPROBE: not Debian's 6.1)."""
        return self.features.has("kprobe_multi")

    def _kernel_names(self):
        """Where names get their meaning (bind.Kernel): the running kernel's
        BTF and tracepoint formats, each read once, opened when first asked."""
        if self._names is None:
            from ktui.lang.kernel_names import KernelNames

            self._names = KernelNames()
        return self._names

    def _log_notes(self, probe: Probe) -> None:
        """What the log should say about a probe before it runs: a sys_enter
        tracepoint's user string may read as empty (lang.tracepoints)."""
        if probe.kind is Kind.TRACEPOINT:
            from ktui.lang.tracepoints import sys_enter_user_string_note

            note = sys_enter_user_string_note(probe)
            if note is not None:
                log_line(self._log_fd, f"ktui: {probe.spec_text}: {note}")

    def add_probe_now(self, probe: Probe) -> ProbeStatus:
        try:
            probe = self._bind(probe)
        except KtuiError as exc:
            raise FeedError(str(exc)) from exc
        self._log_notes(probe)
        with self._lock:
            pid_ = self._new_id(probe)
            if self._engine is not None and self._add_generic(pid_, probe):
                self._sync_probeset()
                if probe.enabled:
                    return self._attach(pid_)
                return self._set_status(pid_, ProbeState.OFF)
        if self._engine is None:
            self._note_compiled(pid_, probe)
        if self._generic_only(probe):  # no compiled unit takes it
            with self._lock:
                del self._probes[pid_]
                del self._status[pid_]
                self._refused.pop(pid_, None)
            raise FeedError(self._generic_only(probe))
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
        multi = probe.target.is_wildcard and probe.kind is not Kind.TRACEPOINT and self._wildcard_multi()
        try:
            gated_by = self._gate_for(pid_, probe.within) if probe.within is not None else -1
            self._slots[pid_] = self._engine.add(probe, pid_, choice.btf_id, choice.nargs, multi=multi,
                                                 gated_by=gated_by)
            if probe.since is not None:
                self._add_span_start(pid_, self._slots[pid_])
        except NotGeneric as why:
            self._release_gate(pid_, probe.within)
            if pid_ in self._slots and probe.since is not None:
                self._engine.remove(self._slots.pop(pid_))  # its end: its start could not be had
            if self._generic_only(probe):
                self._refused[pid_] = f"{self._generic_only(probe)}: {why}"
                return True
            log_line(self._log_fd, f"ktui: {probe.spec_text}: compiled ({why})")
            self._refused.pop(pid_, None)
            self._note_compiled(pid_, probe)
            return False
        return True

    def _note_compiled(self, pid_: int, probe: Probe) -> None:
        """A compiled probe goes by kprobe: one told `attach: fentry` fails.
        A tracepoint or user-space probe is never compiled: it fails, saying why."""
        if self._generic_only(probe):
            self._refused[pid_] = self._generic_only(probe)
            return
        choice = self._choose(probe, generic=False)
        if choice.refused:
            self._refused[pid_] = f"attach: fentry: {choice.reason}"

    def remove_probe_now(self, probe_id: int) -> None:
        with self._lock:
            if probe_id in self._slots:
                self._remove_span_start(probe_id)  # (first: its starts would wait for no end)
                self._engine.remove(self._slots.pop(probe_id))
                self._release_gate(probe_id, self._probes[probe_id].within)
                self._drop_return_event(probe_id)
                del self._probes[probe_id]
                del self._status[probe_id]
                self._sync_probeset()
                return
            if probe_id not in self._where and probe_id in self._refused:
                # a probe that never ran (a tracepoint with no engine for it)
                del self._probes[probe_id]
                del self._status[probe_id]
                self._refused.pop(probe_id)
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

    def _sync_probeset(self) -> None:
        self.probeset = dataclasses.replace(
            self.probeset, probes=tuple(self._probes[i] for i in sorted(self._probes))
        )
