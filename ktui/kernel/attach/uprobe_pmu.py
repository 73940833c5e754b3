"""Attach BPF programs to user-space functions through the perf `uprobe` PMU.

A uprobe is a breakpoint in a file (a binary or library) at a file offset:
every process that maps that page of the file takes it. As with a PMU
kprobe, the breakpoint belongs to its perf fd: closing it (detach, exit,
SIGKILL) removes it, and nothing is left in tracefs' uprobe_events.

A probe limited to one process (the set's --pid) is a perf event of that
process (pid P, any CPU): the kernel then arms the breakpoint in P's
mappings alone, so no other process pays for a trap, or takes it.
Without one the event is system wide (pid -1, cpu 0: as a kprobe's, the
program runs on every CPU's hits).
"""

from __future__ import annotations

import ctypes
import errno
from pathlib import Path

from ktui.kernel.attach.kprobe_pmu import PerfEventAttr, perf_event_open, retprobe_bit

_PMU_DIR = Path("/sys/bus/event_source/devices/uprobe")


def pmu_type() -> int:
    try:
        return int((_PMU_DIR / "type").read_text())
    except (FileNotFoundError, ValueError) as exc:
        raise OSError(errno.ENOENT, "this kernel has no uprobe PMU (CONFIG_UPROBE_EVENTS off?)") from exc


def _ref_ctr_shift() -> int:
    # format/ref_ctr_offset reads "config:32-63" (4.20+)
    try:
        text = (_PMU_DIR / "format" / "ref_ctr_offset").read_text().strip()
        return int(text.split(":")[1].split("-")[0])
    except (OSError, ValueError, IndexError) as exc:
        raise OSError(errno.EOPNOTSUPP, "this kernel's uprobe PMU has no ref_ctr_offset (a USDT "
                                        "semaphore needs 4.20+)") from exc


def open_uprobe(path: str, file_offset: int, retprobe: bool, pid: int | None = None,
                ref_ctr_offset: int = 0) -> int:
    """A uprobe (or uretprobe) perf event at `file_offset` of `path`, not yet
    enabled and running nothing; `pid`: only that process's hits (a
    pid-scoped event), None: every process's. `ref_ctr_offset`: the file
    offset of a USDT probe's semaphore, which the kernel increments in
    every process mapping the file while the probe is there (the program
    then takes its `if (SEMAPHORE_ENABLED)` branch), 0: none. Close the fd
    to remove it."""
    attr = PerfEventAttr()
    attr.type = pmu_type()
    attr.config = retprobe_bit(_PMU_DIR) if retprobe else 0
    if ref_ctr_offset:
        attr.config |= ref_ctr_offset << _ref_ctr_shift()
    attr.sample_period = 1
    attr.wakeup_events = 1
    name = ctypes.create_string_buffer(path.encode())
    attr.config1 = ctypes.addressof(name)  # uprobe_path: read by the kernel during the call
    attr.config2 = file_offset  # probe_offset
    if pid is None:
        return perf_event_open(attr, -1, 0)
    return perf_event_open(attr, pid, -1)
