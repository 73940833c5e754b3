"""Why the kernel refused a probe, in one line a user can act on.

The kprobe PMU answers with an errno; kallsyms and the kprobe blacklist
say which of its possible causes it was (a typo, with close names; a
blacklisted function). Those files are read only once the kernel has
refused: parsing /proc/kallsyms costs seconds under emulation, and a
probe that attaches needs none of it."""

from __future__ import annotations

import errno
import os

from ktui.kernel.attach.privilege import perf_permission_reason
from ktui.kernel.symbols.ksyms import KernelSymbols
from ktui.kernel.quiet import Captured
from ktui.lang.model import Probe


def symbol_reason(probe: Probe, symbols: KernelSymbols) -> str:
    """Why the kernel refused a named function, from kallsyms and the
    kprobe blacklist: unknown (with close names) or blacklisted."""
    name = probe.target.symbol
    if name is None or not symbols.available:
        return ""
    if not symbols.exists(name):
        close = symbols.close_names(name)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        return (f"unknown kernel function {name!r}{hint}: not in /proc/kallsyms "
                "(misspelt, inlined away, or in a module not loaded)")
    if symbols.blacklisted(name):
        return f"{name} is on the kernel's kprobe blacklist: it cannot be probed"
    return ""

def explain_attach_error(probe: Probe, exc: Exception, cap: Captured | None, symbols: KernelSymbols) -> str:
    if not isinstance(exc, OSError) and "Too many open files" in str(exc):
        exc = OSError(errno.EMFILE, str(exc))  # bcc's load_func says it in words
    if isinstance(exc, OSError) and exc.errno in (errno.ENOENT, errno.EINVAL):
        reason = symbol_reason(probe, symbols)
        if reason:
            return reason
    if isinstance(exc, OSError) and exc.errno in (errno.EPERM, errno.EACCES):
        return perf_permission_reason()
    if isinstance(exc, OSError) and exc.errno is not None:
        where = str(probe.target)
        reasons = {
            errno.ENOENT: f"{where}: no such probe point (not found, or inlined away)",
            errno.EILSEQ: f"{where}: offset is not on an instruction boundary",
            errno.EINVAL: f"{where}: cannot be probed (notrace, blacklisted, or a bad offset)",
            errno.EBUSY: f"{where}: busy (another probe owns this point?)",
            errno.EMFILE: "too many open files: raise `ulimit -n` for this many probes",
        }
        return reasons.get(exc.errno, f"{where}: {os.strerror(exc.errno)}")
    detail = cap.first_error() if cap is not None and cap.text else ""
    return f"{exc}" + (f": {detail}" if detail else "")
