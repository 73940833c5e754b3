"""Checks before anything attaches: can this machine run kprobes at all?

Each problem is one line saying what is wrong and what to do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CAP_PERFMON = 38
CAP_BPF = 39
CAP_SYS_ADMIN = 21


@dataclass(frozen=True)
class Problem:
    key: str
    message: str


def _effective_caps() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def _has_caps() -> bool:
    caps = _effective_caps()
    if caps & (1 << CAP_SYS_ADMIN):
        return True
    return bool(caps & (1 << CAP_BPF)) and bool(caps & (1 << CAP_PERFMON))


def lockdown_mode(path: Path = Path("/sys/kernel/security/lockdown")) -> str | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    for word in text.split():
        if word.startswith("["):
            return word.strip("[]")
    return None


def preflight() -> list[Problem]:
    problems: list[Problem] = []
    if os.geteuid() != 0 and not _has_caps():
        problems.append(Problem("root", "need root (or CAP_BPF and CAP_PERFMON): run with sudo"))
    try:
        import bcc  # noqa: F401
    except ImportError:
        problems.append(Problem("bcc", "bcc is not installed: apt-get install python3-bpfcc "
                                       "(and use a venv made with --system-site-packages)"))
    if not Path("/sys/bus/event_source/devices/kprobe/type").exists():
        problems.append(Problem("kprobes", "this kernel has no kprobes (CONFIG_KPROBES is off): "
                                           "run `ktui vm` to use a throwaway VM with a stock kernel"))
    mode = lockdown_mode()
    if mode and mode != "none":
        problems.append(Problem("lockdown", f"kernel lockdown is {mode!r}: BPF cannot read kernel "
                                            "memory; boot without lockdown or run `ktui vm`"))
    release = os.uname().release
    if not Path(f"/lib/modules/{release}/build").exists() and not Path("/sys/kernel/kheaders.tar.xz").exists():
        problems.append(Problem("headers", f"kernel headers for {release} are missing (bcc compiles "
                                           f"against them): apt-get install linux-headers-{release}"))
    return problems
