"""Each probe's own cost: the kernel's BPF run-time statistics, on demand.

BPF_ENABLE_STATS (5.8+, as bpftop uses it) makes the kernel time every BPF
program on the machine while the fd it returns is open: closing it, or
the process dying in any way (SIGKILL too), turns the timing off again, so
ktui can never leave it on. The fd is close-on-exec: no child keeps it.
Timing costs two clock reads per run of every BPF program, ours or not,
which is why it is opt-in (a key, a flag) and never on by default.

What is timed is the program body only: not the breakpoint trap of a
kprobe, the trampoline of an fentry, nor a kretprobe's return hook. A tail
call runs inside its caller, so the time of the program a dispatcher
tail-calls is the dispatcher's (dispatch.py gives every probe its own).

Recursion misses (runs the kernel skipped because a BPF program was
already running on that CPU) are counted per program whether timing is on
or not: for fentry programs since 5.12, for kprobe programs since 6.7.
"""

from __future__ import annotations

import os
from typing import Callable, Sequence

from ktui.kernel.maps.bpfsys import ProgRun


def probe_runs(runs: Sequence[ProgRun], timed: bool) -> dict[str, int]:
    """ProbeStats' run fields from the counters of a probe's programs, the
    one whose runs are the probe's first (a return probe's return half: one
    run per return, as `hits` counts them). Run time and recursion misses
    add up over all of them; run time and runs only while `timed`: the
    kernel's counters are cumulative since the program was loaded, and
    grow whenever anyone has the statistics on."""
    out = {"recursion_misses": sum(r.recursion_misses for r in runs)}
    if timed and runs:
        out["run_ns"] = sum(r.run_time_ns for r in runs)
        out["run_count"] = runs[0].run_cnt
    return out


class RunTimeStats:
    """The one BPF_ENABLE_STATS fd of a session: on, off, closed with it."""

    def __init__(self, enable: Callable[[], int] | None = None) -> None:
        if enable is None:
            from ktui.kernel.maps.bpfsys import enable_stats as enable
        self._enable = enable
        self._fd = -1

    @property
    def on(self) -> bool:
        return self._fd >= 0

    def set(self, on: bool) -> None:
        """Timing on (raises OSError when the kernel refuses: before 5.8,
        or without CAP_SYS_ADMIN) or off."""
        if on and self._fd < 0:
            self._fd = self._enable()
        elif not on and self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def close(self) -> None:
        self.set(False)
