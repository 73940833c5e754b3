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

A gate between two events, `within(START .. END)` (lang.model.GateSpan),
is two such slots, one on each (as a span's start is, by its kind: a
kprobe, a tracepoint, a uprobe or a USDT probe): START's hits put the
thread one deeper, END's one less, under START's slot, which holds the
counters too. The END is attached first: a START without it would keep
threads inside for good. `within(FUNC)` is the same gate from FUNC:c to
FUNC:r, kept by one slot. Gates are shared by their text (`str(within)`).
A thread that ends inside a gate (or is inside when the gate goes) leaves
its depth behind: deleted with the gate, and said in the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ktui.kernel.quiet import log_line
from ktui.lang.model import GateSpan, Kind, Probe, Target


@dataclass
class Gate:
    slot: object  # its generic engine Slot (a gate between two events: its START's)
    users: set[int] = field(default_factory=set)  # the session ids of the probes it gates
    attached: bool = False
    end: object = None  # a gate between two events: its END's Slot


class GatesMixin:
    """Session's gates (state: Session.__init__: _gates)."""

    def _gate_for(self, pid_: int, within: "str | GateSpan") -> int:
        """The engine index of the gate `within` (a function, or two events),
        made now if no probe uses one yet; `pid_` is one more user of it.
        NotGeneric as engine.add raises it (then no gate is made)."""
        name = str(within)
        gate = self._gates.get(name)
        if gate is None:
            if isinstance(within, GateSpan):
                start = self._engine.add(within.start, self._hidden_id(), gate=True, gate_side="start")
                try:
                    end = self._engine.add(within.end, self._hidden_id(), gate=True, gate_side="end",
                                           gate_start=start)
                except BaseException:
                    self._engine.remove(start)
                    raise
                gate = self._gates[name] = Gate(start, end=end)
            else:
                probe = Probe(Target(symbol=within), Kind.RETURN, label=f"within {within}")
                choice = self._choose(probe, generic=True)
                slot = self._engine.add(probe, self._hidden_id(), choice.btf_id, choice.nargs, gate=True)
                gate = self._gates[name] = Gate(slot)
        gate.users.add(pid_)
        return gate.slot.index

    def _hidden_id(self) -> int:
        """An id for a slot no table shows (a gate, a span's start): no
        probe of the table has one below 0."""
        self._gates_made += 1
        return -self._gates_made

    def _attach_gate(self, within: "str | GateSpan") -> str:
        """The gate `within` in the kernel (once: it stays while a probe
        uses it); "" or why it could not be."""
        name = str(within)
        gate = self._gates[name]
        if gate.attached:
            return ""
        slot = gate.slot
        if gate.end is not None:
            # the END first: a START with no END would keep threads inside for good
            reason = self._attach_hidden(gate.end, f"within {name}") or self._attach_hidden(slot, f"within {name}")
            if reason:
                self._engine.detach(slot)
                self._engine.detach(gate.end)
                return reason
            gate.attached = True
            log_line(self._log_fd, f"ktui: within {name}: gate attached, its start by {slot.via}, "
                     f"its end by {gate.end.via}")
            return ""
        if slot.tracing:
            try:
                self._load_tracing_variant()
                self._engine.attach_tracing(slot)
            except Exception as exc:  # noqa: BLE001 - the gate goes by kprobe, the log says why
                log_line(self._log_fd, f"ktui: within {name}: fentry/fexit refused ({exc}): by kprobe")
                self._engine.to_kprobe(slot)
        if not slot.tracing:
            try:
                self._engine.attach(slot, name, 0, None)
            except OSError as exc:
                from ktui.kernel.attach.explain import explain_attach_error

                return f"within {name}: {explain_attach_error(slot.probe, exc, None, self.symbols)}"
        gate.attached = True
        log_line(self._log_fd, f"ktui: within {name}: gate attached by {slot.via}")
        return ""

    def _release_gate(self, pid_: int, within: "str | GateSpan | None") -> None:
        """`pid_` no longer uses its gate: the last user removes it (its
        START first: no thread goes in once its END is gone), and says how
        many threads it left inside."""
        name = str(within) if within is not None else None
        gate = self._gates.get(name) if name else None
        if gate is None:
            return
        gate.users.discard(pid_)
        if not gate.users:
            self._engine.remove(gate.slot)
            if gate.end is not None:
                self._engine.remove(gate.end)
            del self._gates[name]
            if gate.slot.left_inside:
                log_line(self._log_fd, f"ktui: within {name}: removed with {gate.slot.left_inside} thread(s) "
                         "inside (no END seen: a thread that ended inside, or was inside then)")

    def _gate_health(self, stats: dict) -> None:
        """Gate slots' counters onto the probes they gate (`gate_unkept`:
        entries whose thread found no room, so hits inside those calls were
        not counted; `gate_unpaired`: returns with no entry seen), and the
        gates' own stats out of what the session shows."""
        import dataclasses

        for gate in self._gates.values():
            if gate.end is not None:  # (its counters are its START's)
                stats.pop(gate.end.probe_id, None)
            own = stats.pop(gate.slot.probe_id, None)
            if own is None:
                continue
            for pid_ in gate.users:
                if pid_ in stats:
                    stats[pid_] = dataclasses.replace(stats[pid_], gate_unkept=own.entries_unstored,
                                                      gate_unpaired=own.unpaired)
