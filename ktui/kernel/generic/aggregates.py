"""Read the generic program's aggregations (program.c's ktui_aggregate)
into ProbeStats fields: the same fields, read the same way, as a compiled
unit's (maps/aggmaps.py), from maps every probe shares, keyed by its tag.

One pass over each map per stats read, never per event."""

from __future__ import annotations

import ctypes

from ktui.kernel.generic import abi
from ktui.kernel.maps import bpfsys
from ktui.kernel.maps.aggmaps import STACKS_KEPT, add_stack, most_first, top_entries, top_hists
from ktui.lang.aggregate import is_comm
from ktui.lang.cgroups import is_cgroup
from ktui.lang.model import Builtin, Probe
from ktui.record.cgroups import CgroupName, names_of
from ktui.record.decode import member_names
from ktui.record.histogram import HIST_SLOTS

_AGG_KEY = ctypes.sizeof(abi.AggKey)


def key_values(probe: Probe, key: abi.AggKey, cgroup_name: CgroupName | None = None) -> tuple:
    """A key as the values it was made of, in `count:` order (integers
    are in the key in that order, comm apart; a wildcard's func as its
    function's name; a cgroup id as its path, by `cgroup_name`: without
    one as `cgroup:<id>`, still one key per id). A keyed histogram's key
    is the same: the probe has one (Aggregate.key_fetches)."""
    out = []
    ints = iter(key.k)
    for fetch in probe.agg.key_fetches:
        if is_comm(fetch):
            out.append(key.comm.split(b"\0", 1)[0].decode("utf-8", "replace"))
            continue
        value = int(next(ints))  # sign-extended to 64 bits by the program for a signed type
        if isinstance(fetch.expr, Builtin) and fetch.expr.name == "func":
            out.append(member_names(probe, [value])[0])  # a wildcard's function, by name
            continue
        if is_cgroup(fetch.expr):
            out.append(names_of(cgroup_name, [value])[0])  # counted by id, shown by path
            continue
        if fetch.effective_type.startswith("s"):
            value = ctypes.c_int64(value).value
        out.append(value)
    return tuple(out)


Counts = dict[int, dict[tuple, tuple[int, int]]]  # tag -> {key values: (count, sum)}
Hists = dict[int, dict[tuple, tuple[list[int], int]]]  # tag -> {key values: (log2 slots, sum)}


def agg_entries(fd: int, probes: dict[int, Probe], cgroup_name: CgroupName | None = None) -> tuple[Counts, Hists]:
    """One pass over the count map: the count entries (bucket 0) and the
    keyed histograms' (bucket: slot + 1) of the probes of `probes` (by
    tag); cgroup ids named by `cgroup_name`."""
    counts: Counts = {}
    hists: Hists = {}
    for raw, value in bpfsys.hash_items(fd, _AGG_KEY, ctypes.sizeof(abi.AggVal)):
        key = abi.AggKey.from_buffer_copy(raw)
        probe = probes.get(key.tag)
        if probe is None:
            continue
        val = abi.AggVal.from_buffer_copy(value)
        values = key_values(probe, key, cgroup_name)
        if key.bucket:
            slots, total = hists.setdefault(key.tag, {}).setdefault(values, ([0] * HIST_SLOTS, 0))
            if key.bucket <= HIST_SLOTS:
                slots[key.bucket - 1] += int(val.count)
            hists[key.tag][values] = (slots, total + int(val.sum))
            continue
        per = counts.setdefault(key.tag, {})
        count, total = per.get(values, (0, 0))  # a comm's stale tail: merged by name
        per[values] = (count + int(val.count), total + int(val.sum))
    return counts, hists


def count_entries(fd: int, probes: dict[int, Probe],
                  cgroup_name: CgroupName | None = None) -> Counts:
    """tag -> {key values: (count, sum)} for the probes of `probes` (by tag);
    cgroup ids named by `cgroup_name`."""
    return agg_entries(fd, probes, cgroup_name)[0]


def hist_fields(entries: dict[tuple, tuple[list[int], int]]) -> dict:
    """ProbeStats fields of a keyed histogram: its top keys by hits."""
    return {"key_hists": top_hists(entries), "hist_keys": len(entries)}


class LostKeys:
    """tag -> distinct keys a full count map could not take (a cgroup's id
    unnamed: only how many there are is asked; a keyed histogram's slots
    of one key are one key), read at every stats read.

    The lost-keys map is listed in batches (a syscall per 256 keys: listed
    key by key it took one per key, 16,384 a scrape once churning keys had
    filled it, seconds of an emulated CPU per scrape in run 11b), and only
    keys not seen at the last read are decoded: a lost key stays until its
    probe is removed, so once the map stops growing a read decodes none."""

    def __init__(self) -> None:
        self._known: dict[bytes, tuple] = {}  # raw key -> its values, as decoded for _probes[tag]
        self._probes: dict[int, Probe] = {}  # the probe each tag's known keys were decoded for

    def read(self, fd: int, probes: dict[int, Probe]) -> dict[int, int]:
        if not probes:
            return {}
        known: dict[bytes, tuple] = {}
        seen: dict[int, set] = {}
        for raw, _ in bpfsys.hash_items(fd, _AGG_KEY, 1):  # (the value: a u8, unused)
            tag = int.from_bytes(raw[:4], "little")  # AggKey.tag
            probe = probes.get(tag)
            if probe is None:
                continue  # a probe not losing keys, or a removed one's (deleted later)
            values = self._known.get(raw) if self._probes.get(tag) is probe else None
            if values is None:
                values = key_values(probe, abi.AggKey.from_buffer_copy(raw))
            known[raw] = values
            seen.setdefault(tag, set()).add(values)
        self._known, self._probes = known, dict(probes)  # what is no longer listed is forgotten
        return {tag: len(keys) for tag, keys in seen.items()}


def count_fields(probe: Probe, entries: dict[tuple, tuple[int, int]]) -> dict:
    return {"value_keys": len(entries), "value_sum": sum(total for _count, total in entries.values()),
            "top_values": top_entries(probe, entries)}


def stacks(kernel_fd: int, user_fd: int, tags: dict[int, int], kinds: set[str],
           user_symbols=None) -> dict[int, list[tuple[tuple, int]]]:
    """tag -> [(frames innermost first, count)], most first. Kernel frames
    are addresses (the consumer names them from kallsyms); user frames are
    named now, from the process's maps while it lives."""
    out: dict[int, dict[tuple, int]] = {}
    if "kernel" in kinds:
        for key, count in _tagged(kernel_fd, abi.StackKey, tags):
            frames = tuple(int(a) for a in key.ip[:min(int(key.nframes), abi.STACK_DEPTH)])
            add_stack(out, key.tag, frames, count)
    if kinds & {"user", "both"}:
        for key, count in _tagged(user_fd, abi.UStackKey, tags):
            kernel = tuple(int(a) for a in key.kip[:min(int(key.nkframes), abi.STACK_DEPTH)])
            user = [int(a) for a in key.uip[:min(int(key.nuframes), abi.USTACK_DEPTH)]]
            named = (user_symbols.frames(int(key.tgid), user) if user_symbols is not None
                     else tuple(f"0x{a:x}" for a in user))
            add_stack(out, key.tag, kernel + named, count)
    return {tag: most_first(per) for tag, per in out.items()}


def _tagged(fd: int, key_type, tags):
    """(key, count) of a stack map's entries whose tag is one of `tags`."""
    for raw, value in bpfsys.hash_items(fd, ctypes.sizeof(key_type), 8):
        key = key_type.from_buffer_copy(raw)
        if key.tag in tags:
            yield key, int.from_bytes(value, "little")


def stack_fields(mine: list[tuple[tuple, int]], dropped: int) -> dict:
    return {"stacks": tuple(mine[:STACKS_KEPT]), "stack_count": len(mine), "stacks_dropped": dropped}
