"""Session: fentry/fexit or kprobe for each probe, and the fall-back.

The choice (kernel/attach/attach_choice) is made per probe from its
`attach:` mode, the kernel's BTF and features; a probe whose fentry the
kernel refuses falls back to a kprobe, unless it was told `attach: fentry`.
"""

from __future__ import annotations

import threading
import time

from ktui.kernel.quiet import log_line
from ktui.lang.model import Kind, Probe
from ktui.record.feed import ProbeState, ProbeStatus


class FentryMixin:
    """Session's fentry methods (state: Session.__init__)."""

    def _choose(self, probe: Probe, generic: bool):
        """fentry/fexit or kprobe for `probe` (kernel/attach/attach_choice), the
        reason logged in one line where fentry was wanted and is not had."""
        from ktui.kernel.attach.attach_choice import KPROBE, Choice, choose, without_compile
        from ktui.lang.attach_rules import effective_mode

        if probe.kind is Kind.TRACEPOINT or probe.target.is_user or probe.target.is_wildcard:
            # neither: a tracepoint's own program type, a uprobe (kprobe
            # programs), a wildcard (one program for all its functions)
            return Choice(KPROBE)
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

    def _load_tracing_variant(self) -> None:
        """The tracing variant into the engine now, where it is not yet
        (from the cache, or compiled). Raises what loading raises."""
        if self._engine.tracing is None:
            self._engine.tracing = self.loader.tracing_variant(
                self._log_fd, self.options.cache_dir, self.options.cache, self._compile,
                func_arg_helpers=self.features.func_arg_helpers)

    def _attach_fentry(self, pid_: int) -> ProbeStatus:
        """A probe that goes by fentry/fexit: its copies loaded and linked
        once the tracing variant is in (until then it waits, LOADING: it
        has no dispatcher to count through). A refusal means a kprobe."""
        slot, probe = self._slots[pid_], self._probes[pid_]
        if self.load_error:
            return self._set_status(pid_, ProbeState.FAILED, self.load_error)
        # a counting probe's own program needs neither the generic program
        # nor its tracing variant (generic/counter.py): it attaches now
        waits = not slot.counter
        if waits and self._engine.program is not None and self._engine.tracing is None and self.loaded.is_set():
            # a probe added after the start, the first to want fentry
            try:
                self._load_tracing_variant()
            except Exception as exc:  # noqa: BLE001 - the probe falls back, saying why
                return self._fall_back(pid_, f"the fentry/fexit variant did not compile: {exc}")
        if waits and (self._engine.program is None or self._engine.tracing is None):
            return self._set_status(pid_, ProbeState.LOADING, via=slot.via)
        via = slot.via
        started = time.monotonic()
        try:
            self._engine.attach_tracing(slot)
        except OSError as exc:
            return self._fall_back(pid_, f"the kernel refused {via}: {first_line(exc)}")
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


def first_line(exc: OSError) -> str:
    """The error, and the verifier's last word where it said one."""
    text = str(exc)
    log = getattr(exc, "log", "")
    lines = [line for line in log.splitlines() if line.strip()]
    return f"{text} ({lines[-1][:160]})" if lines else text
