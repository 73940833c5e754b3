"""Who made a probe's hits: the maps keyed {slot, cgroup id, comm}.

The generic program (ktui_comms) and the counting probes' program
(counter.py, ktui_bare_comms) count each sampled hit once, under its
task's comm and cgroup v2 id together: one map update per hit gives both
views, and each is the sum over the other half of the key. Read here:
hits by comm and by cgroup, per slot (weighted where sampled).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ktui.kernel.maps import bpfsys
from ktui.record.cgroups import CgroupName, names_of

# {u32 slot; u32 pad; u64 cgroup; char comm[16]}, as program.c's ktui_comm_key
COMM_KEY = struct.Struct("<IIQ16s")


@dataclass
class Hitters:
    """One slot's sampled hits: by process name, and by cgroup id."""

    comms: dict[str, int] = field(default_factory=dict)
    cgroups: dict[int, int] = field(default_factory=dict)


def hitters_by_slot(fd: int) -> dict[int, Hitters]:
    """Every slot's hits by comm and by cgroup, from a map keyed
    {slot, cgroup, comm}."""
    out: dict[int, Hitters] = {}
    for raw, value in bpfsys.hash_items(fd, COMM_KEY.size, 8):
        add_key(out, raw, struct.unpack("<Q", value)[0])
    return out


def add_key(out: dict[int, Hitters], raw: bytes, count: int) -> None:
    """One key's count, into both of its slot's views."""
    index, _pad, cgid, comm = COMM_KEY.unpack(raw)
    # bpf_get_current_comm may leave stale bytes after the NUL: add up by name
    name = comm.split(b"\0", 1)[0].decode("utf-8", "replace")
    per = out.setdefault(index, Hitters())
    per.comms[name] = per.comms.get(name, 0) + count
    per.cgroups[cgid] = per.cgroups.get(cgid, 0) + count


def forget_slot(fd: int, index: int) -> None:
    """Delete slot `index`'s entries from a map keyed {slot, cgroup, comm}."""
    for raw in bpfsys.map_keys(fd, COMM_KEY.size):
        if COMM_KEY.unpack(raw)[0] == index:
            bpfsys.map_delete(fd, raw)


def top_comms(hitters: dict[int, Hitters], index: int, top: int) -> tuple[tuple[str, int], ...]:
    """Slot `index`'s `top` processes, most hits first."""
    per = hitters.get(index)
    return _top(per.comms if per is not None else {}, top)


def top_cgroups(hitters: dict[int, Hitters], index: int, top: int,
                name: CgroupName | None) -> tuple[tuple[str, int], ...]:
    """Slot `index`'s `top` cgroups by path, most hits first. Two ids of
    one path (a cgroup removed and made again) add up; an id nobody can
    name stays apart as `cgroup:<id>`."""
    per = hitters.get(index)
    if per is None:
        return ()
    ids = list(per.cgroups)
    by_path: dict[str, int] = {}
    for path, cgid in zip(names_of(name, ids), ids):
        by_path[path] = by_path.get(path, 0) + per.cgroups[cgid]
    return _top(by_path, top)


def _top(counts: dict[str, int], top: int) -> tuple[tuple[str, int], ...]:
    # ties by name: the order stays put from one read to the next
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top])
