"""Attach one probe of a compiled unit, or say in one line why not.

A call probe is one kprobe; a return probe is two (the entry half that
stores the entry time, then the kretprobe). Each is a perf fd owned by
this process (see `kprobe_pmu`). A probe that fails leaves nothing
attached: the fds it got before the failure are closed again.
"""

from __future__ import annotations

from ktui.kernel.attach.explain import explain_attach_error
from ktui.kernel.symbols.ksyms import KernelSymbols
from ktui.kernel.session.loader import Loader
from ktui.kernel.quiet import captured_stderr, log_line
from ktui.kernel.session.unit import Unit
from ktui.lang.model import Kind, Probe


class _AttachError(Exception):
    pass


def attach_probe(loader: Loader, unit: Unit, local: int, probe: Probe,
                 symbols: KernelSymbols, log_fd: int,
                 attach_return=None) -> tuple[list[int], str]:
    """Attach probe `local` of `unit`: (its perf fds, "") or ([], why not).
    `attach_return(prog_fd) -> perf fd`: how a return probe's kretprobe is
    made (its tracefs event, kretprobe_events); None: through the PMU."""
    reason = precheck(probe)
    if reason:
        return [], reason
    symbol, offset, address = location(probe, symbols)
    fds: list[int] = []
    try:
        with captured_stderr(log_fd) as cap:
            try:
                retprobe = probe.kind is Kind.RETURN
                progs = []
                if retprobe:
                    entry = loader.load(unit.bpf, unit.program.entry_fn(local))
                    progs.append(entry)
                    fds.append(loader.attach(entry, symbol, offset, False, address))
                fn = loader.load(unit.bpf, unit.program.probe_fn(local))
                progs.insert(0, fn)  # the probe's own runs first (runstats.probe_runs)
                if retprobe and attach_return is not None:
                    fds.append(attach_return(fn))
                else:
                    fds.append(loader.attach(fn, symbol, offset, retprobe, address))
            except Exception as exc:
                raise _AttachError(explain_attach_error(probe, exc, cap, symbols)) from exc
    except (_AttachError, OSError) as exc:
        # OSError: not even an fd left to capture bcc's stderr (EMFILE)
        reason = str(exc) if isinstance(exc, _AttachError) else explain_attach_error(probe, exc, None, symbols)
        loader.detach(fds)
        log_line(log_fd, f"ktui: {probe.spec_text}: {reason}")
        return [], reason
    with unit.lock:
        unit.progs[local] = progs
    return fds, ""


def precheck(probe: Probe) -> str:
    """Reasons to refuse a probe before asking the kernel. Symbol checks
    wait until the kernel refuses: parsing /proc/kallsyms costs seconds
    under emulation, and a probe that attaches needs none of it."""
    t = probe.target
    if probe.kind is Kind.RETURN and (t.address is not None or t.offset):
        return "a return probe needs a function entry: drop the address/offset or use :c"
    return ""


def location(probe: Probe, symbols: KernelSymbols) -> tuple[str | None, int, int | None]:
    """(symbol, offset, address) to hand the PMU: an address inside a known
    function becomes function+offset."""
    t = probe.target
    if t.address is not None:
        found = symbols.resolve(t.address)
        if found is not None:
            return found[0], found[1], None
        return None, 0, t.address
    return t.symbol, t.offset, None
