"""One compiled BPF program (a "unit") and the reader of its event buffer.

A session compiles its whole set into one unit, and each probe added later
into a unit of its own, so adding never disturbs what runs. A unit lives
until its last probe is removed or the session closes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ktui.kernel.codegen import Program
from ktui.kernel.loader import Loader
from ktui.kernel.quiet import log_line
from ktui.lang.model import Probe


@dataclass(eq=False)
class Unit:
    bpf: object
    program: Program
    ids: list[int]  # session probe id by local index
    # Set by start_reading: numpy (decode, ring views) is imported only then.
    decoder: object | None = None
    reader: object | None = None
    live: set[int] = field(default_factory=set)  # local indices not removed

    def drain_raw(self):
        """Every record in the buffer, or None when there is no reader."""
        if self.reader is None:
            return None
        return self.reader.drain()

    def read_stats(self, loader: Loader) -> dict:
        return loader.read_stats(self)

    def drop(self, local: int) -> bool:
        """Forget a removed probe; True when it was the last one."""
        self.live.discard(local)
        return not self.live

    def close(self, loader: Loader, log_fd: int) -> None:
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


def start_reading(unit: Unit, loader: Loader, probes: list[Probe], options) -> None:
    """Map the unit's event buffer and build its decoder."""
    from ktui.record.decode import Decoder

    unit.decoder = Decoder(unit.program.layout, probes, unit.ids)
    unit.reader = loader.open_reader(unit.bpf, unit.program, options)
