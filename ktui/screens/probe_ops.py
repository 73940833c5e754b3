"""What the dashboard asks of a Feed, as plain coroutines (no Textual).

The screen runs these in workers so the UI never waits on the kernel; the
rules live here: an added probe that fails to attach is taken out again, an
edit that fails puts the old probe back, a probe set is replaced by removing
every probe and adding the new ones.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from ktui.lang.model import Probe, ProbeSet
from ktui.lang.probeset import load_probeset
from ktui.lang.probeset_write import save_probeset
from ktui.record.feed import Feed, FeedError, ProbeState, ProbeStatus

log = logging.getLogger(__name__)


class ReplaceFailed(FeedError):
    """An edit failed; `restored` is the old probe added back (new id), or
    None if even that failed."""

    def __init__(self, message: str, restored: ProbeStatus | None) -> None:
        super().__init__(message)
        self.restored = restored


@dataclass(frozen=True)
class Loaded:
    probeset: ProbeSet
    ids: tuple[int, ...]  # the new probes, in file order
    problems: tuple[str, ...]  # one line per probe that did not come up


def is_on(status: ProbeStatus) -> bool:
    return status.state in (ProbeState.ATTACHED, ProbeState.LOADING, ProbeState.PENDING)


class ProbeOps:
    def __init__(self, feed: Feed) -> None:
        self.feed = feed

    async def set_enabled(self, probe_id: int, enabled: bool) -> ProbeStatus:
        log.info("set_enabled %s %s", probe_id, enabled)
        return await self.feed.set_enabled(probe_id, enabled)

    async def set_all(self, probe_ids: list[int], enabled: bool) -> list[str]:
        """Switch every probe that is not already so (all off also switches
        failed probes off, so they stay off); returns the problems."""
        problems = []
        statuses = self.feed.statuses()
        for probe_id in probe_ids:
            status = statuses.get(probe_id)
            if status is None or (is_on(status) if enabled else status.state is ProbeState.OFF):
                continue
            try:
                result = await self.set_enabled(probe_id, enabled)
            except FeedError as err:
                problems.append(f"{status.probe.name}: {err}")
                continue
            if result.state is ProbeState.FAILED:
                problems.append(f"{status.probe.name}: {result.reason}")
        return problems

    async def add(self, probe: Probe) -> ProbeStatus:
        """Add and attach; a probe the kernel refuses is removed again and
        the reason raised, so nothing half-added is left in the table."""
        log.info("add_probe %s", probe.spec_text)
        status = await self.feed.add_probe(probe)
        if status.state is ProbeState.FAILED:
            await self.feed.remove_probe(status.probe_id)
            raise FeedError(f"{probe.target}: cannot attach: {status.reason}")
        return status

    async def remove(self, probe_id: int) -> None:
        log.info("remove_probe %s", probe_id)
        await self.feed.remove_probe(probe_id)

    async def replace(self, old: ProbeStatus, probe: Probe) -> ProbeStatus:
        """Edit = remove + add. If the new probe cannot be added, the old one
        is added back and ReplaceFailed says why."""
        await self.remove(old.probe_id)
        try:
            return await self.add(probe)
        except FeedError as err:
            try:
                restored = await self.feed.add_probe(old.probe)
            except FeedError as again:
                raise ReplaceFailed(f"{err}; and the old probe could not be restored: {again}", None) from err
            raise ReplaceFailed(f"{err} (the old probe is back)", restored) from err

    async def open(self, path: str, current: list[int]) -> Loaded:
        """Load `path` (a ProbeSetError names file:line:col), then replace
        every probe with the file's."""
        probeset = load_probeset(path)
        log.info("open %s: %d probes", path, len(probeset.probes))
        for probe_id in current:
            await self.remove(probe_id)
        ids, problems = [], []
        for probe in probeset.probes:
            try:
                status = await self.feed.add_probe(probe)
            except FeedError as err:
                problems.append(f"{probe.name}: {err}")
                continue
            ids.append(status.probe_id)
            if status.state is ProbeState.FAILED:
                problems.append(f"{probe.name}: {status.reason}")
        running = self.feed.probeset
        if (probeset.pid, probeset.comm, probeset.cgroup) != (running.pid, running.comm, running.cgroup):
            problems.append(
                "the set-wide pid/comm/cgroup filter is fixed when ktui starts; "
                f"restart with {path} to apply it"
            )
        return Loaded(probeset, tuple(ids), tuple(problems))

    def current(self, meta: ProbeSet, order: list[int]) -> ProbeSet:
        """The probe set as it runs now, in table order, with on/off as shown.
        Name and description come from `meta` (the set last opened), the
        set-wide filter from the feed (what the kernel really applies)."""
        statuses = self.feed.statuses()
        probes = tuple(
            dataclasses.replace(statuses[i].probe, enabled=statuses[i].state is not ProbeState.OFF)
            for i in order
            if i in statuses
        )
        running = self.feed.probeset
        return dataclasses.replace(meta, probes=probes, pid=running.pid, comm=running.comm, cgroup=running.cgroup)

    def write(self, meta: ProbeSet, order: list[int], path: str, *, replace: bool = False) -> ProbeSet:
        """Save what runs; `replace`: the user said yes to replacing the file there."""
        probeset = self.current(meta, order)
        save_probeset(probeset, path, replace=replace)
        log.info("wrote %s: %d probes", path, len(probeset.probes))
        return dataclasses.replace(probeset, source=path)
