"""Which privilege a perf event (every kprobe, a kretprobe event) needs
here, for the one line that says why the kernel refused one.

Upstream, CAP_PERFMON opens any perf event. Debian's kernels carry a patch
that adds kernel.perf_event_paranoid=3, their default: at 3, opening a perf
event needs CAP_SYS_ADMIN, whatever else the process holds. So `ktui export`
run with CAP_BPF and CAP_PERFMON alone (not as root) gets EACCES for every
kprobe on Debian, and the usual "need CAP_PERFMON" would send its operator
the wrong way."""

from __future__ import annotations

from pathlib import Path

CAP_SYS_ADMIN = 21
CAP_PERFMON = 38
CAP_BPF = 39

PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")


def effective_caps(status: Path = Path("/proc/self/status")) -> int:
    """The CapEff mask of this process (0 where it cannot be read)."""
    try:
        text = status.read_text()
    except (OSError, UnicodeDecodeError):
        return 0
    for line in text.splitlines():
        if line.startswith("CapEff:"):
            try:
                return int(line.split()[1], 16)
            except (IndexError, ValueError):
                return 0
    return 0


def perf_paranoid(path: Path = PARANOID) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def paranoid_note(caps: int, paranoid: int | None) -> str:
    """What Debian's perf_event_paranoid=3 asks of a process with these
    capabilities for a kprobe, or "" where it asks nothing more than
    upstream (or the sysctl could not be read: None)."""
    if paranoid is not None and paranoid > 2 and not caps & (1 << CAP_SYS_ADMIN):
        return (f"kernel.perf_event_paranoid is {paranoid} (Debian's default), where a kprobe needs "
                "CAP_SYS_ADMIN; give ktui that, or set kernel.perf_event_paranoid=2 and CAP_PERFMON suffices")
    return ""


def perf_permission_reason(caps: int | None = None, paranoid: int | None = None) -> str:
    """Why opening a perf event was refused, in one line (this process's
    capabilities and the running kernel's sysctl unless given)."""
    note = paranoid_note(effective_caps() if caps is None else caps,
                         perf_paranoid() if paranoid is None else paranoid)
    return f"permission denied: {note}" if note else "permission denied (need root or CAP_PERFMON; kernel lockdown?)"
