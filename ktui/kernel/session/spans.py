"""Session: spans, `END since(START)` (lang.spans).

A span is its END, a probe of the table, plus its START: a slot of the
generic engine of its own, which no table shows (its id is negative, as a
gate's). The START's hits store when and who under the key in the
kernel (program.c, ktui_span_begin); the END's take that back and count
the time between as a return probe counts its latency. The START goes
as its kind goes (a kprobe, a tracepoint, a uprobe or a USDT probe),
attached before the END: an END that comes first would only find no
start. It reads its key, then the values its END reads of it (`start.X`),
which it stores with the time and the task. It is detached and removed with its END. Its counters (starts,
not kept, replaced) are shown on the END's stats.
"""

from __future__ import annotations

import dataclasses

from ktui.kernel.quiet import log_line
from ktui.lang.model import Kind
from ktui.lang.spans import start_with_values


class SpansMixin:
    """Session's spans (state: Session.__init__: _span_starts)."""

    def _add_span_start(self, pid_: int, end_slot) -> None:
        """The START of probe `pid_`'s span, a hidden slot of the engine
        joined to `end_slot` (NotGeneric as engine.add raises it)."""
        # the START with the values its end reads of it (start.X) after its key
        slot = self._engine.add(start_with_values(end_slot.probe), self._hidden_id(), span_end=end_slot)
        self._span_starts[pid_] = slot

    def _attach_span_start(self, pid_: int) -> str:
        """The START of `pid_`'s span in the kernel (once the program is
        in); "" or why it could not be."""
        slot = self._span_starts[pid_]
        if slot.fds:
            return ""
        reason = self._attach_hidden(slot, "since")
        if not reason:
            log_line(self._log_fd, f"ktui: {self._probes[pid_].spec_text}: its start {slot.probe.spec_text} "
                     f"attached by {slot.via}")
        return reason

    def _attach_hidden(self, slot, what: str) -> str:
        """A hidden slot (a span's start, an end of a gate between two
        events) in the kernel, as its kind goes (a kprobe, a tracepoint, a
        uprobe or a USDT probe); "" or why it could not be, after `what`."""
        probe = slot.probe
        try:
            if probe.kind is Kind.TRACEPOINT:
                self._link_tracepoint(slot)
            elif probe.target.is_user:
                reason = self._link_user(slot)
                if reason:
                    return f"{what}: {reason}"
            else:
                from ktui.kernel.session.unit_attach import location, precheck

                reason = precheck(probe)
                if reason:
                    return f"{what}: {reason}"
                symbol, offset, address = location(probe, self.symbols)
                self._engine.attach(slot, symbol, offset, address)
        except OSError as exc:
            from ktui.kernel.attach.explain import explain_attach_error

            return f"{what}: {explain_attach_error(probe, exc, None, self.symbols)}"
        except Exception as exc:  # noqa: BLE001 - a tracepoint's copy refused: the probe says why
            from ktui.kernel.session.fentry import first_line

            return f"{what}: {probe.spec_text}: {first_line(exc)}"
        return ""

    def _detach_span_start(self, pid_: int) -> None:
        slot = self._span_starts.get(pid_)
        if slot is not None:
            self._engine.detach(slot)

    def _remove_span_start(self, pid_: int) -> None:
        slot = self._span_starts.pop(pid_, None)
        if slot is not None:
            self._engine.remove(slot)

    def _span_health(self, stats: dict) -> None:
        """START slots' counters onto their END's stats (starts, not kept,
        replaced), and the STARTs' own stats out of what the session shows."""
        for pid_, slot in self._span_starts.items():
            own = stats.pop(slot.probe_id, None)
            if own is None or pid_ not in stats:
                continue
            stats[pid_] = dataclasses.replace(stats[pid_], span_starts=own.hits, span_unkept=own.entries_unstored,
                                              span_replaced=own.span_replaced,
                                              nest_dropped=stats[pid_].nest_dropped + own.nest_dropped)
