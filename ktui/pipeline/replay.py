"""A Feed over a recording: the dashboard without root or a kernel.

Events come back paced by their kernel timestamps (`speed` 1.0 = as
recorded, 0 = as fast as the consumer drains). Switching a probe off hides
its events; adding probes is impossible (there is no kernel).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Iterator

import numpy as np

from ktui.lang.model import Probe, ProbeSet
from ktui.pipeline.recording import Chunk, RecordingReader
from ktui.record.decode import EmptyBatch, MultiBatch, RecordBatch
from ktui.record.feed import (
    EventBatch,
    FeedError,
    ProbeState,
    ProbeStatus,
    StatsSnapshot,
    SystemInfo,
)

MAX_CHUNKS_PER_DRAIN = 64


class ReplayFeed:
    def __init__(self, path: str, *, speed: float = 1.0, clock=time.monotonic) -> None:
        self.path = path
        self.speed = speed
        self._clock = clock
        self._reader = RecordingReader(path)
        self._chunks: Iterator[Chunk] = self._reader.chunks()
        self._pending: Chunk | None = None
        self._status: dict[int, ProbeStatus] = {}
        self._stats = StatsSnapshot(0.0, {})
        self._hidden: set[int] = set()
        self._start_wall: float | None = None
        self._start_ts: int | None = None
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
        if chunk.kind == "unit":
            _, ids, ps = chunk.value
            for pid_, probe in zip(ids, ps.probes):
                self._status[pid_] = ProbeStatus(pid_, probe, ProbeState.ATTACHED)
        elif chunk.kind == "stats":
            self._stats = chunk.value

    def _advance_until_events(self) -> None:
        while True:
            chunk = self._next()
            if chunk is None:
                return
            if chunk.kind == "events":
                self._pending = chunk
                return
            self._apply(chunk)

    def _due(self, batch: RecordBatch) -> bool:
        if self.speed <= 0 or not len(batch):
            return True
        first = int(batch.records["ts"][0])
        if self._start_ts is None:
            self._start_ts, self._start_wall = first, self._clock()
            return True
        elapsed_ns = (self._clock() - self._start_wall) * 1e9 * self.speed
        return first - self._start_ts <= elapsed_ns

    def drain(self) -> EventBatch:
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
            batch = self._visible(chunk.value)
            if len(batch):
                parts.append(batch)
        if not parts:
            return EmptyBatch()
        return parts[0] if len(parts) == 1 else MultiBatch(parts)

    def _visible(self, batch: RecordBatch) -> RecordBatch:
        if not self._hidden:
            return batch
        ids = batch.decoder.probe_ids[batch.records["probe"]]
        keep = ~np.isin(ids, list(self._hidden))
        return RecordBatch(batch.decoder, batch.records[keep])

    def stats(self) -> StatsSnapshot:
        return self._stats

    def statuses(self) -> dict[int, ProbeStatus]:
        return dict(self._status)

    def system_info(self) -> SystemInfo:
        notes = ("replay: recording was cut off; showing it up to its last complete record",) \
            if self.truncated else ()
        created = self._reader.head.get("created")
        when = ""
        if isinstance(created, (int, float)):
            when = time.strftime(" of %Y-%m-%d %H:%M", time.localtime(created))
        return SystemInfo(kernel=self._reader.head.get("kernel", "?"), buffer="replay",
                          notes=notes, source=f"{os.path.basename(self._reader.path)}{when}")

    async def set_enabled(self, probe_id: int, enabled: bool) -> ProbeStatus:
        if probe_id not in self._status:
            raise FeedError(f"no probe {probe_id}")
        (self._hidden.discard if enabled else self._hidden.add)(probe_id)
        st = self._status[probe_id]
        probe = dataclasses.replace(st.probe, enabled=enabled)
        new = ProbeStatus(probe_id, probe, ProbeState.ATTACHED if enabled else ProbeState.OFF)
        self._status[probe_id] = new
        return new

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
