"""Session: gates, `within: FUNC` ("count only while this thread is inside FUNC").

A gate is a slot of the generic engine on FUNC's entry and return whose
hits keep each thread's depth inside FUNC (program.c, ktui_gate_step);
a gated probe's plan names the gate, and its hits count only while the
depth of their thread is above 0. Every probe gated by the same function
shares one gate, made with the first and removed with the last. It is no
probe of the table: its id is negative, and its stats are not shown as a
probe's, only what it could not keep, on the probes it gates.

It goes by fentry/fexit where the kernel allows (fexit sees every return,
and an fentry/fexit pair needs no kretprobe instance), else by kprobe and
kretprobe, whose missed returns would leave a thread's depth up for good:
those are the kernel's to count, and the depth of a thread that found no
room for its entry is counted as not kept. Calls already in progress when
the gate attaches are not seen: their returns are counted as unpaired.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ktui.kernel.quiet import log_line
from ktui.lang.model import Kind, Probe, Target


@dataclass
class Gate:
    slot: object  # its generic engine Slot
    users: set[int] = field(default_factory=set)  # the session ids of the probes it gates
    attached: bool = False


class GatesMixin:
    """Session's gates (state: Session.__init__: _gates)."""

    def _gate_for(self, pid_: int, function: str) -> int:
        """The engine index of the gate on `function`, made now if no probe
        uses one yet; `pid_` is one more user of it."""
        gate = self._gates.get(function)
        if gate is None:
            probe = Probe(Target(symbol=function), Kind.RETURN, label=f"within {function}")
            choice = self._choose(probe, generic=True)
            slot = self._engine.add(probe, self._hidden_id(), choice.btf_id, choice.nargs, gate=True)
            gate = self._gates[function] = Gate(slot)
        gate.users.add(pid_)
        return gate.slot.index

    def _hidden_id(self) -> int:
        """An id for a slot no table shows (a gate, a span's start): no
        probe of the table has one below 0."""
        self._gates_made += 1
        return -self._gates_made

    def _attach_gate(self, function: str) -> str:
        """The gate on `function` in the kernel (once: it stays while a probe
        uses it); "" or why it could not be."""
        gate = self._gates[function]
        if gate.attached:
            return ""
        slot = gate.slot
        if slot.tracing:
            try:
                self._load_tracing_variant()
                self._engine.attach_tracing(slot)
            except Exception as exc:  # noqa: BLE001 - the gate goes by kprobe, the log says why
                log_line(self._log_fd, f"ktui: within {function}: fentry/fexit refused ({exc}): by kprobe")
                self._engine.to_kprobe(slot)
        if not slot.tracing:
            try:
                self._engine.attach(slot, function, 0, None)
            except OSError as exc:
                from ktui.kernel.attach.explain import explain_attach_error

                return f"within {function}: {explain_attach_error(slot.probe, exc, None, self.symbols)}"
        gate.attached = True
        log_line(self._log_fd, f"ktui: within {function}: gate attached by {slot.via}")
        return ""

    def _release_gate(self, pid_: int, function: str | None) -> None:
        """`pid_` no longer uses its gate: the last user removes it."""
        gate = self._gates.get(function) if function else None
        if gate is None:
            return
        gate.users.discard(pid_)
        if not gate.users:
            self._engine.remove(gate.slot)
            del self._gates[function]

    def _gate_health(self, stats: dict) -> None:
        """Gate slots' counters onto the probes they gate (`gate_unkept`:
        entries whose thread found no room, so hits inside those calls were
        not counted; `gate_unpaired`: returns with no entry seen), and the
        gates' own stats out of what the session shows."""
        import dataclasses

        for gate in self._gates.values():
            own = stats.pop(gate.slot.probe_id, None)
            if own is None:
                continue
            for pid_ in gate.users:
                if pid_ in stats:
                    stats[pid_] = dataclasses.replace(stats[pid_], gate_unkept=own.entries_unstored,
                                                      gate_unpaired=own.unpaired)
