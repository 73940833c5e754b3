"""Attach BPF programs to tracepoints through perf (PERF_TYPE_TRACEPOINT).

A tracepoint is named by tracefs' path, `CATEGORY/NAME`, and perf takes
its id, which its format file says (lang.tracepoints: the session has read
it to bind the fields). As with a PMU kprobe, the program is attached
through a perf event ktui holds: closing its fd detaches it, whoever or
whatever ends ktui (nothing is left behind in tracefs).
"""

from __future__ import annotations

from ktui.kernel.attach.kprobe_pmu import PerfEventAttr, perf_event_open

PERF_TYPE_TRACEPOINT = 2


def open_tracepoint(event_id: int, pid: int = -1, cpu: int = 0) -> int:
    """A perf event on tracepoint `event_id`, not yet enabled and running
    nothing. pid -1, cpu 0: a program attached to it runs on every CPU's
    hits, as a kprobe's does (the event's cpu only says where it counts)."""
    attr = PerfEventAttr()
    attr.type = PERF_TYPE_TRACEPOINT
    attr.config = event_id
    attr.sample_period = 1
    attr.wakeup_events = 1
    return perf_event_open(attr, pid, cpu)
