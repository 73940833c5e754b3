"""How long a headless collector waits between drains of the kernel's buffers.

Each drain has a fixed cost besides the per-event copy: the event loop's
wake-up, the readers' and decoders' Python calls, one write system call.
Tens of microseconds on real hardware, about 0.1 ms under emulation (the
TCG guest of the benchmarks: 0.1 us an event at a flood's 1,000 events per
10 ms drain; docs/benchmarks-history.md, boot C).

So under a flood the collector drains less often, in bigger batches, and
never so rarely that a buffer could fill (a full buffer loses events):

- nothing arrived: the wait doubles from `busy` up to `idle`, as before;
- a trickle (below `flood_rate` events a second): `busy`, as before, so a
  few events reach the output no later than they used to;
- a flood: the time the smallest buffer takes to fill to `fill` (a quarter)
  at the rate just observed, between `busy` and `longest`. The rate may
  rise fourfold within one wait before the buffer is full, and the wait is
  recomputed after every drain, so a rising rate shortens it at once;
- a drain that found the buffer over half full: `busy`, whatever the rate.
  The rate seen then says too little (a buffer that filled hides how much
  more came), and a consumer slower than the flood (stream's NDJSON) has
  no time to wait.

`capacity` is how many records the smallest of the feed's buffers holds
(None: unknown, then a flood is drained every `busy` as before).
"""

from __future__ import annotations


class IdleBackoff:
    """How long to wait before the next drain: `busy` while events arrive,
    doubling up to `idle` while the buffers stay empty. A quiet or stats-only
    probe set then wakes 20 times a second instead of 100: each wake-up is
    Python work, and on a small or emulated machine that CPU comes out of the
    traced workload's share. After a quiet spell the first events wait at
    most `idle` in the kernel's buffer (the default 8 MiB ring holds ~130k
    small records: 2.6M events/s for those 50 ms)."""

    def __init__(self, busy: float = 0.01, idle: float = 0.05) -> None:
        self.busy = busy
        self.idle = max(idle, busy)
        self.wait = busy

    def next(self, drained: int) -> float:
        self.wait = self.busy if drained else min(self.idle, self.wait * 2)
        return self.wait


class DrainPacer(IdleBackoff):
    """IdleBackoff while nothing or a trickle arrives; under a flood, the
    wait this module's docstring describes."""

    def __init__(self, busy: float = 0.01, idle: float = 0.05, *, fill: float = 0.25,
                 longest: float = 0.25, flood_rate: float = 25_000.0) -> None:
        super().__init__(busy, idle)
        self.fill = fill
        self.longest = max(longest, busy)
        self.flood_rate = flood_rate
        self.rate = 0.0  # events a second over the last period (for tests and notes)
        self._last: float | None = None  # when the previous drain started

    def next(self, drained: int, now: float, capacity: int | None) -> float:
        """The wait after a drain that started at `now` (time.monotonic())
        and brought `drained` events."""
        last, self._last = self._last, now
        if not drained:
            self.rate = 0.0
            return super().next(0)
        period = now - last if last is not None else 0.0
        # the events came in over the period since the previous drain started
        # (its wait and the drain's own time); with no period yet, assume busy
        self.rate = drained / max(period, self.busy)
        if capacity is None or capacity <= 0 or self.rate < self.flood_rate \
                or drained > capacity // 2:
            self.wait = self.busy
        else:
            self.wait = min(self.longest, max(self.busy, self.fill * capacity / self.rate))
        return self.wait
