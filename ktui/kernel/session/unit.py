"""One compiled BPF program (a "unit") and the reader of its event buffer.

A session compiles its whole set into one unit, and each probe added later
into a unit of its own, so adding never disturbs what runs. A unit lives
until its last probe is removed or the session closes.

Two threads use a unit at once: the collector drains it and reads its stats
maps, while a worker thread removes a probe and, with the unit's last one,
frees the unit. So whoever touches the reader or the maps holds the unit's
`lock`, and `closed` is set under it: once set, nobody touches them again,
and they are freed outside the lock. Nothing slow happens under it (the
kprobe perf fds, whose closing waits for RCU grace periods, are closed
before, by the session): a drain waits at most for one other drain or stats
read of the same unit.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ktui.kernel.session.loader import Loader
from ktui.kernel.quiet import log_line
from ktui.lang.model import Probe

if TYPE_CHECKING:
    from ktui.kernel.codegen import Program


@dataclass(eq=False)
class Unit:
    bpf: object
    program: Program
    ids: list[int]  # session probe id by local index
    # Set by start_reading: numpy (decode, ring views) is imported only then.
    # A record.decode.SizedDecoders: its records come in several sizes
    decoder: object | None = None
    reader: object | None = None
    live: set[int] = field(default_factory=set)  # local indices not removed
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    closed: bool = False  # set under `lock`; then reader and maps are off limits
    # local index -> its program fds once attached (bcc owns them; they live
    # as long as the unit): the probe's own first, see runstats.probe_runs
    progs: dict[int, list[int]] = field(default_factory=dict)

    def drain_raw(self):
        """Every record in the buffer (record.raw.RawRecords), or None (no
        reader yet, or closed)."""
        with self.lock:
            if self.closed or self.reader is None:
                return None
            return self.reader.drain()

    @property
    def unreadable(self) -> int:
        """Records drained that none of its probes writes at their size
        (never from ktui's programs): counted, not decoded."""
        return self.decoder.unreadable if self.decoder is not None else 0

    def capacity(self) -> int | None:
        """Records its buffer holds (per CPU for perf buffers), None if unknown."""
        with self.lock:
            if self.closed or self.reader is None:
                return None
            capacity = getattr(self.reader, "capacity", None)
            return capacity() if capacity is not None else None

    def read_stats(self, loader: Loader, timed: bool = False) -> dict:
        """The live probes' counters, with their programs' run counters
        (run time and runs only while `timed`); nothing once closed."""
        import dataclasses

        from ktui.kernel.maps.runstats import probe_runs

        with self.lock:
            if self.closed:
                return {}
            out = loader.read_stats(self)
            for local, fds in self.progs.items():
                probe_id = self.ids[local]
                if local in self.live and probe_id in out:
                    out[probe_id] = dataclasses.replace(out[probe_id],
                                                        **probe_runs(loader.prog_runs(fds), timed))
            return out

    def drop(self, local: int) -> bool:
        """Forget a removed probe; True when it was the last one."""
        with self.lock:
            self.live.discard(local)
            return not self.live

    def close(self, loader: Loader, log_fd: int) -> None:
        """Free the reader and the program. Safe to call twice."""
        with self.lock:  # waits for a drain or stats read in progress
            if self.closed:
                return
            self.closed = True
        try:
            if self.reader is not None:
                self.reader.close()
        finally:
            loader.free(self.bpf, log_fd)


def compile_unit(loader: Loader, program: Program, ids: list[int], log_fd: int) -> Unit:
    log_line(log_fd, f"ktui: compiling {len(program.probes)} probe(s)")
    started = time.monotonic()
    bpf = loader.compile(program.text, log_fd)
    log_line(log_fd, f"ktui: compiled in {time.monotonic() - started:.2f} s")
    return Unit(bpf, program, list(ids), live=set(range(len(ids))))


def start_reading(unit: Unit, loader: Loader, probes: list[Probe], options, cgroup_name=None) -> None:
    """Map the unit's event buffer and build its decoders (`cgroup_name`:
    names the cgroup id every event carries, record.cgroups)."""
    from ktui.record.decode import SizedDecoders
    from ktui.record.layout import record_size_of

    layout = unit.program.layout
    # Each probe's records are as long as its own fields; a program whose
    # records are all as long as its largest probe's (layout.record_size)
    # is read too: both are that probe's layout.
    sizes = [sorted({record_size_of(one), layout.record_size}) for one in layout.probes]
    decoder = SizedDecoders(probes, unit.ids, sizes=sizes, cgroup_name=cgroup_name)
    reader = loader.open_reader(unit.bpf, unit.program, options)
    with unit.lock:
        unit.decoder, unit.reader = decoder, reader
