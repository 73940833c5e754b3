"""A Feed over a recording: the dashboard without root or a kernel.

Events come back paced by their kernel timestamps (`speed` 1.0 = as
recorded, 0 = as fast as the consumer drains). Switching a probe off hides
its events; adding probes is impossible (there is no kernel).

Playback can pause, change speed and jump to the end (the dashboard's p, +,
-, E); `playback()` says where it is, for the header (issue 15: a replay
showed this machine's flags, not where and when it was recorded or where
the playback was).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Iterator

from ktui.lang.model import Probe, ProbeSet
from ktui.pipeline.recording_reader import Chunk, RecordingReader
from ktui.record.decode import EmptyBatch, InterleavedBatch, MultiBatch, RecordBatch
from ktui.record.feed import (
    EventBatch,
    FeedError,
    ProbeState,
    ProbeStatus,
    StatsSnapshot,
    SystemInfo,
)

MAX_CHUNKS_PER_DRAIN = 64
HIDDEN = "events hidden"  # a replayed probe switched off
SPEEDS = (0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0, 100.0)  # what + and - step through


@dataclasses.dataclass(frozen=True)
class Playback:
    """Where a replay is, for the header."""

    position: float  # seconds of recording played (kernel time since its first event)
    speed: float  # 1.0 = as recorded; 0 = as fast as drained
    paused: bool
    ended: bool  # every event delivered


class ReplayFeed:
    def __init__(self, path: str, *, speed: float = 1.0, clock=time.monotonic) -> None:
        self.path = path
        self.speed = speed
        self._clock = clock
        self._reader = RecordingReader(path)
        self._chunks: Iterator[Chunk] = self._reader.chunks()
        self._pending: Chunk | None = None
        self._status: dict[int, ProbeStatus] = {}  # as shown (a probe switched off here: off)
        self._recorded: dict[int, ProbeStatus] = {}  # as the recording last said
        self._stats = StatsSnapshot(0.0, {})
        self._hidden: set[int] = set()
        self._start_wall: float | None = None  # wall clock when recording time _base_ns was reached
        self._start_ts: int | None = None  # the first event's kernel time
        self._base_ns = 0.0  # recording time played at _start_wall
        self._last_ts: int | None = None  # the last delivered batch's last event
        self.paused = False
        self._rush = False  # E: to the end as fast as drained
        self.finished = False
        self.probeset = ProbeSet(name="replay")
        # Read up to the first events so the probe table is known up front.
        self._advance_until_events()
        self.probeset = ProbeSet(
            name=self._reader.head.get("probeset", "replay"),
            probes=tuple(st.probe for st in self._status.values()),
            source=path,
        )

    @property
    def truncated(self) -> bool:
        return self._reader.truncated

    def _next(self) -> Chunk | None:
        if self._pending is not None:
            chunk, self._pending = self._pending, None
            return chunk
        try:
            return next(self._chunks)
        except StopIteration:
            self.finished = True
            return None

    def _apply(self, chunk: Chunk) -> None:
        if chunk.kind == "probes":
            # every probe as recorded, with its state then (a probe that
            # emitted nothing has no unit; it is shown with its counts)
            for pid_, st in chunk.value.items():
                self._record_status(st)
        elif chunk.kind == "unit":
            _, ids, ps = chunk.value
            for pid_, probe in zip(ids, ps.probes):
                known = self._recorded.get(pid_)
                self._record_status(ProbeStatus(pid_, probe, ProbeState.ATTACHED) if known is None
                                    else dataclasses.replace(known, probe=probe))
        elif chunk.kind == "stats":
            self._stats = chunk.value

    def _record_status(self, st: ProbeStatus) -> None:
        self._recorded[st.probe_id] = st
        self._status[st.probe_id] = self._shown(st)

    def _shown(self, st: ProbeStatus) -> ProbeStatus:
        """A recorded status as this replay shows it: off if switched off here."""
        if st.probe_id in self._hidden:
            # off hides its events; nothing is detached and its counts stay
            # the recording's: the state says so ("off: events hidden")
            return dataclasses.replace(st, probe=dataclasses.replace(st.probe, enabled=False),
                                       state=ProbeState.OFF, reason=HIDDEN)
        return st

    def _advance_until_events(self) -> None:
        while True:
            chunk = self._next()
            if chunk is None:
                return
            if chunk.kind == "events":
                self._pending = chunk
                return
            self._apply(chunk)

    def _played_ns(self) -> float:
        """Recording time reached by the clock now."""
        if self._start_wall is None:
            return self._base_ns
        if self.paused:
            return self._base_ns
        return self._base_ns + (self._clock() - self._start_wall) * 1e9 * max(self.speed, 0.0)

    def _rebase(self) -> None:
        """Keep the position reached before a change of speed or pause."""
        if self._start_wall is not None:
            self._base_ns, self._start_wall = self._played_ns(), self._clock()

    def _due(self, batch: RecordBatch | InterleavedBatch) -> bool:
        if not len(batch):
            return True
        first = batch.first_ts()
        if self._start_ts is None:
            self._start_ts, self._start_wall = first, self._clock()
        if self.speed <= 0 or self._rush:
            return True
        return first - self._start_ts <= self._played_ns()

    def set_paused(self, paused: bool) -> None:
        self._rebase()
        self.paused = paused

    def set_speed(self, speed: float) -> None:
        self._rebase()
        self.speed = speed

    def faster(self) -> float:
        """The next speed up (+); from as-fast-as-drained it stays."""
        if self.speed > 0:
            self.set_speed(next((s for s in SPEEDS if s > self.speed), self.speed))
        return self.speed

    def slower(self) -> float:
        """The next speed down (-); as-fast-as-drained comes down to the fastest step."""
        lower = [s for s in SPEEDS if s < self.speed] if self.speed > 0 else list(SPEEDS)
        self.set_speed(lower[-1] if lower else self.speed)
        return self.speed

    def jump_to_end(self) -> None:
        """E: the rest as fast as the dashboard drains (stats and events
        both, so the end shows the recording's final numbers)."""
        self._rush = True
        self.paused = False

    def playback(self) -> Playback:
        position = 0.0
        if self._start_ts is not None and self._last_ts is not None:
            position = max(0, self._last_ts - self._start_ts) / 1e9
        return Playback(position, self.speed, self.paused, self.finished and self._pending is None)

    def drain(self) -> EventBatch:
        if self.paused and not self._rush:
            return EmptyBatch()
        parts = []
        for _ in range(MAX_CHUNKS_PER_DRAIN):
            chunk = self._next()
            if chunk is None:
                break
            if chunk.kind != "events":
                self._apply(chunk)
                continue
            if not self._due(chunk.value):
                self._pending = chunk
                break
            if len(chunk.value):
                self._last_ts = chunk.value.last_ts()
            batch = self._visible(chunk.value)
            if len(batch):
                parts.append(batch)
        if not parts:
            return EmptyBatch()
        return parts[0] if len(parts) == 1 else MultiBatch(parts)

    def _visible(self, batch: RecordBatch | InterleavedBatch) -> EventBatch:
        return batch.without(self._hidden) if self._hidden else batch

    def stats(self, detail: bool = True) -> StatsSnapshot:
        return self._stats

    def statuses(self) -> dict[int, ProbeStatus]:
        return dict(self._status)

    def system_info(self) -> SystemInfo:
        notes = ("replay: recording was cut off; showing it up to its last complete record",) \
            if self.truncated else ()
        return SystemInfo(kernel=str(self._reader.head.get("kernel", "?")), buffer="replay",
                          notes=notes, source=os.path.basename(self._reader.path))

    @property
    def host(self) -> str:
        """The recording machine's name (recordings before it was kept: "")."""
        host = self._reader.head.get("host")
        return host if isinstance(host, str) else ""

    @property
    def started(self) -> str:
        """When the recording started, local time (`2026-12-01 10:02:03`), or ""."""
        created = self._reader.head.get("created")
        if isinstance(created, (int, float)) and not isinstance(created, bool):
            return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created))
        return ""

    async def set_enabled(self, probe_id: int, enabled: bool) -> ProbeStatus:
        if probe_id not in self._status:
            raise FeedError(f"no probe {probe_id}")
        (self._hidden.discard if enabled else self._hidden.add)(probe_id)
        self._status[probe_id] = self._shown(self._recorded[probe_id])
        return self._status[probe_id]

    async def add_probe(self, probe: Probe) -> ProbeStatus:
        raise FeedError("this is a replay: probes cannot be added (no kernel)")

    async def remove_probe(self, probe_id: int) -> None:
        raise FeedError("this is a replay: probes cannot be removed (no kernel)")

    timing = False  # nothing runs: a timed recording's costs are in its snapshots

    def set_timing(self, on: bool) -> None:
        raise FeedError("this is a replay: no program runs to time (record with --cost)")

    def detach_all(self) -> None:
        """Nothing is attached: a recording only has what it holds."""

    def close(self) -> None:
        self._chunks.close()  # a generator: closing it closes the file
