"""Read a compiled unit's aggregation maps (codegen/aggregate.py) into
ProbeStats fields: one pass over each probe's count map and one lookup of
its value histogram per stats read, never per event."""

from __future__ import annotations

import ctypes

from ktui.kernel.codegen.aggregate import agg_map_name, lost_map_name
from ktui.lang.aggregate import is_comm
from ktui.kernel.maps.percpu import percpu_hist, percpu_sum
from ktui.lang.model import Probe

TOP_VALUES = 10
STACKS_KEPT = 200  # stacks per probe in a stats read (a flame graph's worth)



def key_values(probe: Probe, key) -> tuple:
    """A count map key as the values it was made of, in `count:` order."""
    out = []
    for i, fetch in enumerate(probe.agg.keys):
        raw = getattr(key, f"k{i}")
        if is_comm(fetch):
            out.append(bytes(raw).split(b"\0", 1)[0].decode("utf-8", "replace"))
        else:
            value = int(raw)  # the program sign-extends a signed type to 64 bits
            if fetch.effective_type.startswith("s"):
                value = ctypes.c_int64(value).value
            out.append(value)
    return tuple(out)


def top_entries(probe: Probe, entries: dict[tuple, tuple[int, int]]) -> tuple[tuple[tuple, int, int], ...]:
    """The TOP_VALUES keys, most first: by sum when the probe sums."""
    by_sum = probe.agg.sum is not None
    ranked = sorted(entries.items(), key=lambda kv: (-(kv[1][1] if by_sum else kv[1][0]), -kv[1][0], repr(kv[0])))
    return tuple((k, c, s) for k, (c, s) in ranked[:TOP_VALUES])


def top_hists(entries: dict[tuple, tuple[list[int], int]]) -> tuple[tuple[tuple, tuple[int, ...], int], ...]:
    """A keyed histogram's TOP_VALUES keys by hits, most first: (key, slots, sum)."""
    ranked = sorted(entries.items(), key=lambda kv: (-sum(kv[1][0]), repr(kv[0])))
    return tuple((k, tuple(slots), total) for k, (slots, total) in ranked[:TOP_VALUES])


def read_aggregates(bpf, probe: Probe, local: int) -> dict:
    """ProbeStats fields for one probe's aggregations ({} without any)."""
    agg = probe.agg
    if agg is None:
        return {}
    fields: dict = {"values_dropped": percpu_sum(bpf[b"ktui_agg_dropped"], local)}
    if agg.hist is not None:
        fields["value_hist"] = percpu_hist(bpf[b"ktui_vhist"], local)
        fields["value_hist_sum"] = percpu_sum(bpf[b"ktui_vhist_sum"], local)
    if agg.counts:
        entries: dict[tuple, tuple[int, int]] = {}
        for k, v in bpf[agg_map_name(local).encode()].items():
            values = key_values(probe, k)
            count, total = entries.get(values, (0, 0))  # a comm's stale tail: merged by name
            entries[values] = (count + int(v.count), total + int(v.sum))
        fields["value_keys"] = len(entries)
        fields["value_sum"] = sum(total for _count, total in entries.values())
        fields["top_values"] = top_entries(probe, entries)
        if fields["values_dropped"]:  # the lost keys' map is read only when there are any
            lost = {key_values(probe, k) for k in bpf[lost_map_name(local).encode()].keys()}
            fields["keys_dropped"] = len(lost)
            fields["keys_dropped_unknown"] = percpu_sum(bpf[b"ktui_agg_lost_full"], local)
    return fields


def read_stacks(bpf, probes, user_symbols=None) -> dict[int, list[tuple[tuple, int]]]:
    """Every probe's stacks from the shared maps, one pass each: local
    probe index -> [(frames innermost first, count)]. A kernel frame is
    its address (symbolized by the consumer, from kallsyms); a user frame
    is already text (`UserSymbols`): it can be named only now, from the
    process's maps while it lives. `stack: both` gives the kernel frames,
    then the user ones."""
    kinds = {p.agg.stack for p in probes if p.agg is not None and p.agg.stack is not None}
    out: dict[int, dict[tuple, int]] = {}
    if "kernel" in kinds:
        for k, v in bpf[b"ktui_stacks"].items():
            frames = tuple(int(a) for a in k.ip[: min(int(k.nframes), len(k.ip))])
            add_stack(out, int(k.probe), frames, int(v.value))
    if kinds & {"user", "both"}:
        for k, v in bpf[b"ktui_ustacks"].items():
            kernel = ()
            if hasattr(k, "kip"):
                kernel = tuple(int(a) for a in k.kip[: min(int(k.nkframes), len(k.kip))])
            user = [int(a) for a in k.uip[: min(int(k.nuframes), len(k.uip))]]
            named = (user_symbols.frames(int(k.tgid), user) if user_symbols is not None
                     else tuple(f"0x{a:x}" for a in user))
            add_stack(out, int(k.probe), kernel + named, int(v.value))
    return {p: most_first(d) for p, d in out.items()}


def most_first(stacks: dict[tuple, int]) -> list[tuple[tuple, int]]:
    """Stacks by count, most first; equal counts by their frames (addresses
    by value, named user frames after them by text)."""
    def frames_order(frames: tuple) -> tuple:
        return tuple((1, f) if isinstance(f, str) else (0, f) for f in frames)

    return sorted(stacks.items(), key=lambda kv: (-kv[1], frames_order(kv[0])))


def add_stack(out: dict[int, dict[tuple, int]], probe: int, frames: tuple, count: int) -> None:
    per = out.setdefault(probe, {})
    per[frames] = per.get(frames, 0) + count  # one stack of several processes adds up


def stack_fields(bpf, probe: Probe, local: int, stacks: dict) -> dict:
    """ProbeStats fields for one probe's stacks ({} without `stack:`)."""
    if probe.agg is None or probe.agg.stack is None:
        return {}
    mine = stacks.get(local, [])
    return {"stacks": tuple(mine[:STACKS_KEPT]), "stack_count": len(mine),
            "stacks_dropped": percpu_sum(bpf[b"ktui_stacks_dropped"], local)}
