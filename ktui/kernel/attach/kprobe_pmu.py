"""Attach BPF programs as kprobes/kretprobes through the perf `kprobe` PMU.

We do this ourselves rather than through bcc's attach_kprobe because bcc
falls back to writing /sys/kernel/tracing/kprobe_events when the PMU path
fails, and such probes outlive a SIGKILLed process. A PMU kprobe belongs to
its file descriptor: when the fd closes (detach, exit, or SIGKILL) the
kernel removes the probe. It also gives us the real errno for a failed
attach instead of text libbcc prints to stderr.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from pathlib import Path

_PMU_DIR = Path("/sys/bus/event_source/devices/kprobe")

PERF_FLAG_FD_CLOEXEC = 1 << 3
PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_DISABLE = 0x2401
PERF_EVENT_IOC_SET_BPF = 0x40042408
SYS_PERF_EVENT_OPEN = 298  # x86-64


class PerfEventAttr(ctypes.Structure):
    # struct perf_event_attr, PERF_ATTR_SIZE_VER5 layout (112 bytes).
    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
    ]


# The C library the interpreter runs on, by the process's own symbols:
# ctypes.util.find_library runs ldconfig (a process of ktui's that probes
# would count, in the compile helper: compile_child.py).
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong]


def perf_event_open(attr: PerfEventAttr, pid: int, cpu: int, group_fd: int = -1,
                    flags: int = PERF_FLAG_FD_CLOEXEC) -> int:
    """The perf_event_open(2) system call; raises OSError with the errno."""
    attr.size = ctypes.sizeof(PerfEventAttr)
    fd = _libc.syscall(SYS_PERF_EVENT_OPEN, ctypes.byref(attr), ctypes.c_int(pid),
                       ctypes.c_int(cpu), ctypes.c_int(group_fd), ctypes.c_ulong(flags))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


def ioctl(fd: int, request: int, arg: int = 0) -> None:
    if _libc.ioctl(fd, request, arg) < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def pmu_available() -> bool:
    return (_PMU_DIR / "type").exists()


def retprobe_bit(pmu_dir: Path = _PMU_DIR) -> int:
    """The config bit of a return probe on the kprobe or uprobe PMU:
    format/retprobe reads "config:0" on every kernel so far; read it anyway."""
    try:
        text = (pmu_dir / "format" / "retprobe").read_text().strip()
        return 1 << int(text.split(":")[1])
    except (OSError, ValueError, IndexError):
        return 1


def open_kprobe(symbol: str | None, offset: int, retprobe: bool, address: int | None = None,
                pid: int = -1, cpu: int = 0) -> int:
    """A kprobe (or kretprobe) perf event on symbol+offset, or on a raw
    address, not yet enabled and running nothing. Close the fd to remove it.
    `pid`/`cpu`: where the event counts its hits (read(2) of the fd); a
    program attached to it runs on every hit, whatever they say."""
    try:
        pmu_type = int((_PMU_DIR / "type").read_text())
    except (FileNotFoundError, ValueError) as exc:
        raise OSError(errno.ENOENT, "this kernel has no kprobe PMU (CONFIG_KPROBES off?)") from exc
    # other errors (EMFILE: no fd left to read the file) propagate as they are
    attr = PerfEventAttr()
    attr.type = pmu_type
    attr.config = retprobe_bit() if retprobe else 0
    attr.sample_period = 1
    attr.wakeup_events = 1
    name = ctypes.create_string_buffer(symbol.encode() if symbol else b"")
    if symbol:
        attr.config1 = ctypes.addressof(name)  # kprobe_func
        attr.config2 = offset  # probe_offset
    else:
        attr.config1 = 0
        attr.config2 = address or 0  # kprobe_addr
    # pid -1, cpu 0: a kprobe fires on every CPU whatever the event's cpu.
    return perf_event_open(attr, pid, cpu)


def attach(prog_fd: int, symbol: str | None, offset: int, retprobe: bool,
           address: int | None = None) -> int:
    """Create a kprobe (or kretprobe) on symbol+offset, or on a raw address,
    running `prog_fd`. Returns the perf fd that owns it; close it to detach."""
    fd = open_kprobe(symbol, offset, retprobe, address)
    try:
        ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog_fd)
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)
    except OSError:
        os.close(fd)
        raise
    return fd


def detach_all(fds: list[int]) -> None:
    """Remove many probes at once, fast.

    Closing a kprobe's perf fd unregisters it, and each unregistration waits
    for RCU grace periods: one after another, 20 probes took 2.4 s to go in a
    flood under emulation. Closed from several threads, the grace periods
    overlap (1.6 s). Errors are ignored: the fd goes either way."""
    if len(fds) < 3:
        _close_quietly(fds)
        return
    workers = min(8, len(fds))
    threads = [threading.Thread(target=_close_quietly, args=(fds[i::workers],), daemon=True)
               for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _close_quietly(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
