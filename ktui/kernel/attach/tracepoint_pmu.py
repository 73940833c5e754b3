"""Attach BPF programs to tracepoints through perf (PERF_TYPE_TRACEPOINT).

A tracepoint is named by tracefs' path, `CATEGORY/NAME`, and perf takes
its id, from `events/CATEGORY/NAME/id`. As with a PMU kprobe, the program
is attached through a perf event ktui holds: closing its fd detaches it,
whoever or whatever ends ktui (nothing is left behind in tracefs).
tracefs is mode 0700: reading an id needs root or CAP_DAC_OVERRIDE.
"""

from __future__ import annotations

import errno
from pathlib import Path

from ktui.kernel.attach.kprobe_pmu import PerfEventAttr, perf_event_open

PERF_TYPE_TRACEPOINT = 2
TRACEFS_ROOTS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))


def tracepoint_id(name: str, roots: tuple[Path, ...] = TRACEFS_ROOTS) -> int:
    """The id of tracepoint `CATEGORY/NAME`; OSError (ENOENT: no such
    event, or no tracefs; EACCES: not root) with one line that says which."""
    category, _, event = name.partition("/")
    if not category or not event or "/" in event or ".." in (category, event):
        raise OSError(errno.EINVAL, f"{name!r} is not CATEGORY/NAME")
    refused = None
    for root in roots:
        path = root / "events" / category / event / "id"
        try:
            return int(path.read_text().strip())
        except FileNotFoundError:
            if (root / "events").is_dir():
                raise OSError(errno.ENOENT, f"this kernel has no tracepoint {name} "
                                            f"(not in {root / 'events'})") from None
        except PermissionError:
            refused = root
        except ValueError as exc:
            raise OSError(errno.EINVAL, f"{path}: not an id ({exc})") from None
    if refused is not None:
        raise OSError(errno.EACCES, f"{refused} is readable by root only (mode 0700): a tracepoint's id "
                                    "needs root or CAP_DAC_OVERRIDE")
    raise OSError(errno.ENOENT, "tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing)")


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
