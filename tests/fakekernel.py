"""A fake kernel side for `Session` (a `kernel.loader.Loader`): no bcc, no
root, no kernel.

It is strict where the real one would crash or quietly misbehave: a reader
drained after it was closed, maps read or a program loaded after the unit
was freed, a unit freed twice, or a perf fd closed twice raise `Misuse`.
Every use of a reader or of the maps spans a thread switch (a short sleep
between two checks), as a real map read or ring copy gives other threads
time to run, so a missing lock shows up as a `Misuse` within a few rounds.
"""

from __future__ import annotations

import itertools
import os
import threading
import time

import numpy as np

from ktui.kernel.maps.bpfsys import ProgRun
from ktui.kernel.machine.features import given
from ktui.record.feed import ProbeStats

# A kernel with every feature ktui uses, as Debian's 6.12 has them.
HAS_EVERYTHING = given(ringbuf=True, ringbuf_no_wakeup=True, kprobe_cookie=True, fentry=True,
                       tracing_cookie=True, func_arg=True, trace_args=12, task_storage=True,
                       kprobe_multi=True, kprobe_recursion_misses=True, tracing_recursion_misses=True,
                       run_stats=True, batch_lookup=True)

USE_TIME = 0.0002  # seconds a drain or a stats read holds the reader or maps
DETACH_TIME = 0.002  # closing a kprobe perf fd waits for RCU grace periods


class Misuse(AssertionError):
    """The session used something the real kernel side would have freed."""


class FakeBPF:
    def __init__(self, text: str) -> None:
        self.text = text
        self.freed = False

    def check(self, what: str) -> None:
        if self.freed:
            raise Misuse(f"{what} of a freed program")


class FakeReader:
    """Every drain returns `per_drain` zeroed records (probe 0 of the unit)."""

    def __init__(self, bpf: FakeBPF, record_size: int, per_drain: int) -> None:
        self.bpf = bpf
        self.dtype = np.dtype(f"V{record_size}")
        self.per_drain = per_drain
        self.closed = False

    def drain(self):
        from ktui.record.raw import RawRecords

        self._check()
        time.sleep(USE_TIME)
        self._check()
        return RawRecords([np.zeros(self.per_drain, dtype=self.dtype)])

    def _check(self) -> None:
        if self.closed:
            raise Misuse("drain of a closed reader")
        self.bpf.check("drain")

    def close(self) -> None:
        if self.closed:
            raise Misuse("reader closed twice")
        self.closed = True


class FakeReturnEvents:
    """Tracefs kretprobes (kernel.kretprobe_events.ReturnEvents) for a
    FakeLoader. Strict as the kernel is: an event is removed only when no fd
    is open on it (the kernel says EBUSY), an fd opened only on an event that
    exists. `missed[name]` is what kprobe_profile would report."""

    def __init__(self, loader: "FakeLoader") -> None:
        self.loader = loader
        self.events: dict[str, tuple[str, int]] = {}  # name -> (symbol, maxactive)
        self.on: dict[int, str] = {}  # perf fd -> event
        self.missed: dict[str, int] = {}
        self.removed: list[str] = []
        self.stale: list[str] = []  # what sweep_stale finds
        self.counted = 0  # kprobe_profile reads
        self._numbers = itertools.count()

    def create(self, symbol: str, maxactive: int = 0) -> str:
        name = f"ktui_1_{next(self._numbers)}"
        self.events[name] = (symbol, maxactive)
        self.missed[name] = 0
        return name

    def open(self, name: str) -> int:
        if name not in self.events:
            raise Misuse(f"open of a removed event {name}")
        fd = next(self.loader._fds)
        with self.loader._lock:
            self.loader.attached[fd] = -1
        self.on[fd] = name
        return fd

    def attach(self, prog_fd: int, name: str) -> int:
        fd = self.open(name)
        self.loader.attached[fd] = prog_fd
        return fd

    def remove(self, name: str) -> bool:
        if any(event == name and fd in self.loader.attached for fd, event in self.on.items()):
            return False  # EBUSY: an fd is still open on it
        self.events.pop(name, None)
        self.removed.append(name)
        return True

    def remove_all(self) -> list[str]:
        return [name for name in list(self.events) if not self.remove(name)]

    def counts(self) -> dict[str, tuple[int, int]]:
        self.counted += 1
        return {name: (0, self.missed[name]) for name in self.events}

    def sweep_stale(self) -> list[str]:
        return list(self.stale)


class FakeLoader:
    def features(self, cache_dir, use_cache: bool):
        """A kernel that has everything ktui uses (the probes never run here)."""
        return self.kernel_features

    def generic_engine(self, **options):
        return None  # no generic engine: every probe goes through compile()

    def return_events(self):
        return self.returns

    def kernel_btf(self):
        return None  # no BTF: fentry is never chosen (and no generic engine either)

    def cached_tracing_variant(self, cache_dir, *, func_arg_helpers: bool):
        return None

    def compile_helper(self, log_fd, cache_dir, use_cache, tracing, *, func_arg_helpers):
        return None  # no generic program to compile

    def context_addresses(self, btf):
        from ktui.kernel.symbols.interrupt_context import NOT_KNOWN

        return self.context if self.context is not None else NOT_KNOWN

    def __init__(self, per_drain: int = 0, tracefs: bool = True) -> None:
        self.returns = FakeReturnEvents(self) if tracefs else None
        self.kernel_features = HAS_EVERYTHING
        self.context = None  # where a hit's context is read (ContextAddresses): not known
        self.per_drain = per_drain
        self.compiled: list[FakeBPF] = []
        self.attached: dict[int, int] = {}  # perf fd -> program fd
        self.detached = 0
        self.timing_fds = 0  # BPF_ENABLE_STATS fds handed out
        self._fds = itertools.count(1000)
        self._lock = threading.Lock()  # the fake's own books, not the session's

    def compile(self, text: str, log_fd: int) -> FakeBPF:
        bpf = FakeBPF(text)
        with self._lock:
            self.compiled.append(bpf)
        return bpf

    def load(self, bpf: FakeBPF, function: str) -> int:
        bpf.check(f"load of {function}")
        return next(self._fds)

    def attach(self, prog_fd: int, symbol, offset, retprobe, address) -> int:
        fd = next(self._fds)
        with self._lock:
            self.attached[fd] = prog_fd
        return fd

    def detach(self, fds: list[int]) -> None:
        time.sleep(DETACH_TIME * bool(fds))
        with self._lock:
            for fd in fds:
                if self.attached.pop(fd, None) is None:
                    raise Misuse(f"perf fd {fd} closed twice")
                self.detached += 1

    def open_reader(self, bpf: FakeBPF, program, options) -> FakeReader:
        bpf.check("open_reader")
        return FakeReader(bpf, program.layout.record_size, self.per_drain)

    def read_stats(self, unit) -> dict[int, ProbeStats]:
        unit.bpf.check("stats read")
        out = {}
        for local in sorted(unit.live):  # a set changed meanwhile raises too
            time.sleep(USE_TIME / max(1, len(unit.live)))
            out[unit.ids[local]] = ProbeStats(unit.ids[local])
        unit.bpf.check("stats read")
        return out

    def free(self, bpf: FakeBPF, log_fd: int) -> None:
        if bpf.freed:
            raise Misuse("program freed twice")
        bpf.freed = True

    def prog_runs(self, prog_fds: list[int]) -> list[ProgRun]:
        """Each program: 10 runs, 1000 ns, 1 recursion miss."""
        return [ProgRun(1000, 10, 1) for _ in prog_fds]

    def enable_run_stats(self) -> int:
        self.timing_fds += 1
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
