"""Session: return probes' kretprobes as tracefs events, and their missed returns.

Only a tracefs kretprobe can have its maxactive set and its misses read on
every kernel. An event lives as long as its probe; it is removed after its
fd closes (probe removed, session closed), and events a SIGKILLed ktui
left are swept when the next session opens. Misses of a probe's earlier
events live on in the session.
"""

from __future__ import annotations

import dataclasses

from ktui.kernel.quiet import log_line
from ktui.lang.model import Kind
from ktui.record.feed import ProbeStats


class ReturnEventsMixin:
    """Session's return events methods (state: Session.__init__)."""

    def _open_return_events(self) -> None:
        """Where return probes' kretprobes come from; first, the events a
        SIGKILLed ktui left behind go."""
        try:
            self._returns = self.loader.return_events()
        except PermissionError:
            # tracefs is mode 0700: a ktui run with capabilities, not as
            # root, needs CAP_DAC_OVERRIDE to make kretprobe events there
            self._returns = None
            log_line(self._log_fd, "ktui: tracefs is closed to this process (it needs root or CAP_DAC_OVERRIDE): "
                     "return probes use the kprobe PMU (maxactive cannot be set, missed returns are not counted)")
            return
        if self._returns is None:
            log_line(self._log_fd, "ktui: no tracefs: return probes use the kprobe PMU "
                     "(maxactive cannot be set, missed returns are not counted)")
            return
        stale = self._returns.sweep_stale()
        if stale:
            log_line(self._log_fd, f"ktui: removed {len(stale)} kretprobe event(s) left by "
                     f"ktui processes that are gone: {' '.join(stale)}")

    def _remove_return_events(self) -> None:
        """Every kretprobe event of the session, once its fds are closed."""
        self._ret_events.clear()
        if self._returns is None:
            return
        stayed = self._returns.remove_all()
        if stayed and self._log_fd >= 0:
            log_line(self._log_fd, f"ktui: kretprobe event(s) still busy, not removed: {' '.join(stayed)}")

    def _return_event(self, pid_: int):
        """For a return probe: ((attach(prog_fd) -> perf fd, open() -> perf
        fd) of its tracefs kretprobe, made on first use, ""), or (None, why
        not). (None, "") for a call probe, or when return probes take the PMU."""
        from ktui.kernel.session.unit_attach import precheck
        from ktui.kernel.attach.explain import explain_attach_error
        from ktui.kernel.attach.kretprobe_events import default_maxactive

        probe = self._probes[pid_]
        if probe.kind is not Kind.RETURN or precheck(probe) or probe.target.is_user:
            return None, ""  # (a uretprobe goes by the PMU: tracefs events are for kretprobes)
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


def _possible_cpus() -> int:
    from ktui.kernel.maps import bpfsys

    return bpfsys.possible_cpus()
