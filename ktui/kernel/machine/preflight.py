"""Checks before anything attaches: can this machine run kprobes at all?

Each finding is one line saying what is wrong and what to do. Problems are
fatal (the CLI exits 3 before compiling anything); warnings are not (the
dashboard shows them in its status line through SystemInfo.notes).

Every input is injectable (file-system root, uid, capabilities, kernel
release, whether bcc imports) so each branch can be tested without root
and without a kernel that has kprobes.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ktui.kernel.attach.privilege import (  # noqa: F401 - CAP_* and effective_caps re-exported
    CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, effective_caps, paranoid_note, perf_paranoid)

# Lockdown levels that stop kprobes and bpf_probe_read_kernel (LOCKDOWN_KPROBES,
# LOCKDOWN_BPF_READ_KERNEL and LOCKDOWN_PERF are all "confidentiality" reasons).
# "integrity" only restricts debugfs and bpf_probe_write_user: ktui still works.
_BLOCKING_LOCKDOWN = ("confidentiality",)


@dataclass(frozen=True)
class Problem:
    key: str
    message: str
    fatal: bool = True


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def caps_suffice(caps: int) -> bool:
    if caps & (1 << CAP_SYS_ADMIN):
        return True
    return bool(caps & (1 << CAP_BPF)) and bool(caps & (1 << CAP_PERFMON))


def lockdown_mode(path: Path = Path("/sys/kernel/security/lockdown")) -> str | None:
    """The active lockdown level ("none", "integrity", ...) or None if unreadable."""
    text = _read(path)
    if text is None:
        return None
    for word in text.split():
        if word.startswith("["):
            return word.strip("[]")
    return None


def _cmdline_lockdown(cmdline: str) -> str | None:
    for word in cmdline.split():
        if word.startswith("lockdown="):
            return word.partition("=")[2]
    return None


def mounted_types(mounts: Path) -> set[str]:
    """File-system types mounted (from /proc/self/mounts)."""
    types = set()
    for line in (_read(mounts) or "").splitlines():
        fields = line.split()
        if len(fields) >= 3:
            types.add(fields[2])
    return types


def _bcc_importable() -> bool:
    try:
        return importlib.util.find_spec("bcc") is not None
    except (ImportError, ValueError):
        return False


def check_environment(
    *,
    root: Path = Path("/"),
    euid: int | None = None,
    caps: int | None = None,
    release: str | None = None,
    have_bcc: Callable[[], bool] = _bcc_importable,
) -> list[Problem]:
    """Every finding, fatal problems first. `root` prefixes every path read."""
    sysfs = root / "sys"
    euid = os.geteuid() if euid is None else euid
    caps = effective_caps(root / "proc/self/status") if caps is None else caps
    release = os.uname().release if release is None else release
    problems: list[Problem] = []
    warnings: list[Problem] = []

    if euid != 0 and not caps_suffice(caps):
        problems.append(Problem("root", "need root or CAP_BPF+CAP_PERFMON: run with sudo "
                                        "(or setcap cap_bpf,cap_perfmon+ep on the python binary)"))
    elif euid != 0:
        note = paranoid_note(caps, perf_paranoid(root / "proc/sys/kernel/perf_event_paranoid"))
        if note:
            warnings.append(Problem("perf_paranoid", note, fatal=False))
    if not have_bcc():
        problems.append(Problem("bcc", "bcc is not installed: apt-get install python3-bpfcc "
                                       "(and use a venv made with --system-site-packages)"))
    if not (sysfs / "bus/event_source/devices/kprobe/type").exists():
        problems.append(Problem("kprobes", "this kernel has no kprobes (CONFIG_KPROBES is off): "
                                           "run `ktui vm` to use a throwaway VM with a stock kernel"))

    mounts = mounted_types(root / "proc/self/mounts")
    mode = lockdown_mode(sysfs / "kernel/security/lockdown")
    if mode is None:
        # securityfs is not mounted (or has no lockdown LSM): fall back to the boot line.
        mode = _cmdline_lockdown(_read(root / "proc/cmdline") or "")
        if mode is None and "securityfs" not in mounts:
            warnings.append(Problem("lockdown-unknown", "cannot read the lockdown state (securityfs "
                                    "not mounted): mount -t securityfs securityfs /sys/kernel/security",
                                    fatal=False))
    if mode in _BLOCKING_LOCKDOWN:
        problems.append(Problem("lockdown", f"kernel lockdown is {mode!r}: kprobes and BPF kernel "
                                            "reads are refused; boot with lockdown=none or run "
                                            "`ktui vm`"))
    elif mode and mode != "none":
        warnings.append(Problem("lockdown", f"kernel lockdown is {mode!r}: probes work, but debugfs "
                                            "is restricted (no kprobe blacklist check)", fatal=False))

    build = root / "lib/modules" / release / "build"
    if not build.exists() and not (sysfs / "kernel/kheaders.tar.xz").exists():
        problems.append(Problem("headers", f"kernel headers for {release} are missing (bcc compiles "
                                           f"against them): apt-get install linux-headers-{release}, "
                                           "or modprobe kheaders if the kernel has CONFIG_IKHEADERS"))

    if not (sysfs / "kernel/btf/vmlinux").exists():
        warnings.append(Problem("btf", "no BTF (/sys/kernel/btf/vmlinux): fine for ktui, which "
                                       "compiles against kernel headers", fatal=False))
    if "debugfs" not in mounts and not (sysfs / "kernel/debug/kprobes").is_dir():
        warnings.append(Problem("debugfs", "debugfs is not mounted: the kprobe blacklist cannot be "
                                           "checked before attaching; mount -t debugfs none "
                                           "/sys/kernel/debug", fatal=False))
    if "tracefs" not in mounts and not (sysfs / "kernel/tracing/trace").exists():
        warnings.append(Problem("tracefs", "tracefs is not mounted: leftover kprobe_events cannot be "
                                           "listed; mount -t tracefs none /sys/kernel/tracing",
                                fatal=False))
    return problems + warnings


def preflight(**inputs) -> list[Problem]:
    """The fatal problems: any of them means no probe can attach."""
    return [p for p in check_environment(**inputs) if p.fatal]


def preflight_warnings(**inputs) -> list[Problem]:
    """Non-fatal findings, for SystemInfo.notes (one line each)."""
    return [p for p in check_environment(**inputs) if not p.fatal]
