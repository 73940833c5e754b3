"""Return probes as tracefs kretprobes: missed returns counted, maxactive set.

A kretprobe keeps one instance per call in flight; with more threads inside
the function at once than it has instances (maxactive), the kernel drops
those returns and only counts them (kretprobe nmissed). A kretprobe opened
through the perf kprobe PMU (`kprobe_pmu`) gets maxactive = max(10, 2 x
CPUs), which nothing can change, and on 6.1 no interface reports its
nmissed (6.7+ gives it in a perf link's bpf_link_info). The long calls are
the ones dropped, so latency reads low and nothing says so.

A kretprobe made through tracefs (`r16:ktui/NAME SYMBOL` written to
kprobe_events) takes an explicit maxactive (1..4096) and reports
`nhit nmissed` in kprobe_profile on every kernel: the kernel's own count,
exact (nmissed adds the returns dropped for want of an instance and the
entries its kprobe missed). It is opened as a perf tracepoint event (its
id from events/ktui/NAME/id), and a kprobe BPF program attaches to that fd
exactly as to a PMU kprobe (PERF_EVENT_IOC_SET_BPF, or BPF_LINK_CREATE with
a cookie). So return probes use it; call probes keep the PMU.

The price is what `kprobe_pmu` avoided: a tracefs event outlives the fd.
While ktui holds it open the kprobe is armed; when the fd closes it is
disarmed but stays listed. So ktui removes each event after closing its
fd, on every normal exit path (session close, probe removed), and names
every event `ktui_<pid>_<n>`: a SIGKILLed ktui leaves only disarmed
entries (no code runs from them), and the next ktui to start removes the
events whose pid no longer runs (`sweep_stale`).

kprobe_events is opened with O_APPEND: opening it for writing without it
truncates the file, which deletes every kprobe event on the machine.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import threading
import time
from pathlib import Path

from ktui.kernel.attach import kprobe_pmu
from ktui.lang.limits import MAXACTIVE_MAX

TRACEFS_ROOTS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))
GROUP = "ktui"
PERF_TYPE_TRACEPOINT = 2
# what ktui writes as a symbol: a C identifier, `.`-suffixed clones
# (`foo.isra.0`) and `module:function`; never whitespace or a `-`/`:` command
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*(:[A-Za-z_][A-Za-z0-9_.]*)?")
_OURS = re.compile(r"ktui_(\d+)_\d+")
REMOVE_WAIT = 2.0  # seconds a busy event (its last fd still closing) is retried


def default_maxactive(possible_cpus: int) -> int:
    """The kernel's maxactive when none is given (register_kretprobe)."""
    return max(10, 2 * possible_cpus)


def find_root(roots: tuple[Path, ...] = TRACEFS_ROOTS) -> Path | None:
    """The mounted tracefs with kprobe events, or None."""
    for root in roots:
        if (root / "kprobe_events").exists():
            return root
    return None


class ReturnEvents:
    """The tracefs kretprobes of this process: made, opened, counted, removed."""

    def __init__(self, root: Path, pid: int | None = None) -> None:
        self.root = root
        self.pid = os.getpid() if pid is None else pid
        self._numbers = itertools.count()
        self._live: set[str] = set()
        self._lock = threading.Lock()

    # ------------------------------------------------------------ events

    def create(self, symbol: str, maxactive: int = 0) -> str:
        """A new disarmed kretprobe event on `symbol`: its name. maxactive
        0 leaves the kernel's default. Raises OSError as the kernel refuses
        (ENOENT: no such function, EINVAL...)."""
        if not _SYMBOL.fullmatch(symbol or ""):
            raise OSError(errno.EINVAL, f"not a function name: {symbol!r}")
        if not 0 <= maxactive <= MAXACTIVE_MAX:
            raise OSError(errno.EINVAL, f"maxactive {maxactive} is out of range (1..{MAXACTIVE_MAX})")
        name = f"ktui_{self.pid}_{next(self._numbers)}"
        self._write(f"r{maxactive or ''}:{GROUP}/{name} {symbol}\n")
        with self._lock:
            self._live.add(name)
        return name

    def open(self, name: str) -> int:
        """A perf fd on the event, not enabled and running nothing."""
        event_id = int((self.root / "events" / GROUP / name / "id").read_text())
        attr = kprobe_pmu.PerfEventAttr()
        attr.type = PERF_TYPE_TRACEPOINT
        attr.config = event_id
        attr.sample_period = 1
        attr.wakeup_events = 1
        return kprobe_pmu.perf_event_open(attr, -1, 0)

    def attach(self, prog_fd: int, name: str) -> int:
        """The event running `prog_fd` (a kprobe program): its perf fd."""
        fd = self.open(name)
        try:
            kprobe_pmu.ioctl(fd, kprobe_pmu.PERF_EVENT_IOC_SET_BPF, prog_fd)
            kprobe_pmu.ioctl(fd, kprobe_pmu.PERF_EVENT_IOC_ENABLE, 0)
        except OSError:
            os.close(fd)
            raise
        return fd

    def remove(self, name: str) -> bool:
        """Delete the event (every fd on it closed first). A link's last
        reference to the perf file may drop a moment after close() returns,
        so a busy event is retried for a while. False if it stayed."""
        deadline = time.monotonic() + REMOVE_WAIT
        while True:
            try:
                self._write(f"-:{GROUP}/{name}\n")
                break
            except FileNotFoundError:
                break  # already gone
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    break
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    return False
                time.sleep(0.02)
        with self._lock:
            self._live.discard(name)
        return True

    def remove_all(self) -> list[str]:
        """Delete every event this object made: the names that stayed."""
        with self._lock:
            names = sorted(self._live)
        return [name for name in names if not self.remove(name)]

    @property
    def live(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._live)

    # ------------------------------------------------------------ counts

    def counts(self) -> dict[str, tuple[int, int]]:
        """(returns seen, returns missed) of this process's events, by name:
        one read of kprobe_profile for all of them."""
        text = (self.root / "kprobe_profile").read_text()
        return parse_profile(text, f"ktui_{self.pid}_")

    # ------------------------------------------------------------ leftovers

    def sweep_stale(self) -> list[str]:
        """Remove the ktui events of processes that no longer run (a
        SIGKILLed ktui): the names removed."""
        try:
            text = (self.root / "kprobe_events").read_text()
        except OSError:
            return []
        removed = []
        for group, name in parse_events(text):
            found = _OURS.fullmatch(name)
            if group != GROUP or found is None:
                continue
            pid = int(found.group(1))
            if pid == self.pid or _running(pid):
                continue
            try:
                self._write(f"-:{GROUP}/{name}\n")
                removed.append(name)
            except OSError:
                pass  # someone else's perf session holds it: leave it
        return removed

    def _write(self, line: str) -> None:
        fd = os.open(self.root / "kprobe_events", os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def parse_profile(text: str, prefix: str) -> dict[str, tuple[int, int]]:
    """`NAME NHIT NMISSED` lines of kprobe_profile whose name starts with
    `prefix`."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].startswith(prefix):
            try:
                out[parts[0]] = (int(parts[1]), int(parts[2]))
            except ValueError:
                continue
    return out


def parse_events(text: str) -> list[tuple[str, str]]:
    """(group, event) of each kprobe_events line (`r16:ktui/NAME sym`)."""
    out = []
    for line in text.splitlines():
        head = line.split(None, 1)[0] if line.strip() else ""
        if ":" not in head or "/" not in head:
            continue
        group, _, event = head.split(":", 1)[1].partition("/")
        out.append((group, event))
    return out


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
