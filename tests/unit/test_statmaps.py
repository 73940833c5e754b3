"""kernel.statmaps against fake bcc tables: what a stats read asks the
kernel, and how per-CPU values are summed. No bcc, no kernel."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

from ktui.kernel.codegen import generate
from ktui.kernel.statmaps import read_unit_stats
from ktui.lang.spec import parse_spec
from ktui.record.histogram import HIST_SLOTS

NCPU = 3


class HistValue(ctypes.Structure):
    """struct ktui_hist as bcc builds it from the program: one u64 per slot."""

    _fields_ = [("slot", ctypes.c_uint64 * HIST_SLOTS)]


class PerCpuTable:
    """A BPF_PERCPU_ARRAY as bcc's table object: t[c_int(i)] is one lookup
    returning every CPU's value; KeyError past the end."""

    def __init__(self, values: dict[int, object]) -> None:
        self.values = values
        self.lookups = 0

    def __getitem__(self, key):
        self.lookups += 1
        return self.values[key.value]


class HashTable:
    def __init__(self, rows) -> None:
        self.rows = rows

    def items(self):
        return list(self.rows)

    def keys(self):
        return [k for k, _ in self.rows]


def hist_row(per_cpu: list[dict[int, int]]):
    row = (HistValue * NCPU)()
    for cpu, slots in enumerate(per_cpu):
        for k, n in slots.items():
            row[cpu].slot[k] = n
    return row


def fake_unit(specs: list[str], tables: dict[bytes, object]):
    probes = [parse_spec(s) for s in specs]
    program = generate(probes)
    return SimpleNamespace(bpf=tables, program=program, ids=[7 + i for i in range(len(probes))],
                           live=set(range(len(probes))))


def test_a_histogram_is_one_lookup_summed_over_cpus():
    hist = PerCpuTable({
        0: hist_row([{}, {}, {}]),  # the call probe's row: never read
        1: hist_row([{11: 2, 0: 1}, {11: 3}, {64: 1}]),
        2: hist_row([{5: 4}, {}, {6: 1}]),
    })
    counters = {i: [10 * i, 1, 0] for i in range(3)}
    tables = {
        b"ktui_hits": PerCpuTable(counters), b"ktui_emitted": PerCpuTable(counters),
        b"ktui_lost": PerCpuTable(counters), b"ktui_hist": hist,
        b"ktui_lat_sum": PerCpuTable({1: [1000, 2**40, 7], 2: [5, 0, 0]}),
        b"ktui_errnos": HashTable([]), b"ktui_comms": HashTable([]),
    }
    unit = fake_unit(["vfs_read:c:a3", "vfs_read:r:retval", "vfs_write:r"], tables)
    stats = read_unit_stats(unit)
    assert hist.lookups == 2  # one per return probe, whatever the slot count
    expected = [0] * HIST_SLOTS
    expected[0], expected[11], expected[64] = 1, 5, 1
    assert stats[8].hist == tuple(expected)
    assert stats[9].hist == tuple(4 if k == 5 else 1 if k == 6 else 0 for k in range(HIST_SLOTS))
    assert stats[7].hist == ()
    assert stats[8].hits == 11
    # the exact latency sum, summed over CPUs; none for a call probe
    assert stats[8].latency_sum_ns == 1000 + 2**40 + 7
    assert stats[9].latency_sum_ns == 5 and stats[7].latency_sum_ns == 0


def test_removed_probes_are_not_read():
    hist = PerCpuTable({0: hist_row([{}, {}, {}]), 1: hist_row([{3: 1}, {}, {}])})
    counters = {0: [1, 0, 0], 1: [1, 0, 0]}
    tables = {
        b"ktui_hits": PerCpuTable(counters), b"ktui_emitted": PerCpuTable(counters),
        b"ktui_lost": PerCpuTable(counters), b"ktui_hist": hist,
        b"ktui_lat_sum": PerCpuTable({}),
        b"ktui_errnos": HashTable([]), b"ktui_comms": HashTable([]),
    }
    unit = fake_unit(["vfs_read:r", "vfs_write:r"], tables)
    unit.live.discard(0)
    assert list(read_unit_stats(unit)) == [8]
    assert hist.lookups == 1
