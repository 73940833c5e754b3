"""kernel.statmaps against fake bcc tables: what a stats read asks the
kernel, and how per-CPU values are summed. No bcc, no kernel."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import pytest

from ktui.kernel.maps import bpfsys
from ktui.kernel.codegen import COMM_EXACT, generate
from ktui.kernel.returns import ERRNO_BUCKETS
from ktui.kernel.maps.statmaps import read_unit_stats
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


class ArrayTable:
    """A BPF_ARRAY of u64 as bcc's table object, without a map fd (so
    read key by key, as on a kernel without batch reads)."""

    def __init__(self, values: dict[int, int], size: int) -> None:
        self.values = values
        self.size = size
        self.lookups = 0

    def __getitem__(self, key):
        self.lookups += 1
        if not 0 <= key.value < self.size:
            raise KeyError(key.value)
        return ctypes.c_uint64(self.values.get(key.value, 0))


def return_tables(nprobes: int, errnos: dict[int, int] | None = None, **per_cpu) -> dict:
    """The maps a program with return probes has besides the common ones."""
    tables = {b"ktui_errnos": ArrayTable(errnos or {}, nprobes * ERRNO_BUCKETS)}
    for name in ("ktui_errno_rest", "ktui_unpaired", "ktui_unstored"):
        tables[name.encode()] = PerCpuTable(per_cpu.get(name, {i: [0] * NCPU for i in range(nprobes)}))
    return tables


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
        b"ktui_comms": HashTable([]), **return_tables(3),
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
        b"ktui_comms": HashTable([]), **return_tables(2),
    }
    unit = fake_unit(["vfs_read:r", "vfs_write:r"], tables)
    unit.live.discard(0)
    assert list(read_unit_stats(unit)) == [8]
    assert hist.lookups == 1


def _tables(nprobes: int, hits: dict[int, list[int]], **returns) -> dict:
    zeros = {i: [0] * NCPU for i in range(nprobes)}
    return {
        b"ktui_hits": PerCpuTable(hits), b"ktui_emitted": PerCpuTable(zeros),
        b"ktui_lost": PerCpuTable(zeros), b"ktui_hist": PerCpuTable({i: hist_row([{}] * NCPU) for i in range(nprobes)}),
        b"ktui_lat_sum": PerCpuTable(zeros), b"ktui_comms": HashTable([]), **return_tables(nprobes, **returns),
    }


def test_pairing_and_errno_counters_of_a_return_probe():
    """unpaired, entries_unstored and errnos_other are per-CPU counters,
    summed; each probe's errno table is its own block of ERRNO_BUCKETS
    (errno 1..199 as itself, 512.. from bucket 200); a call probe has none."""
    errnos = {ERRNO_BUCKETS + 9: 4, ERRNO_BUCKETS + 2: 1, ERRNO_BUCKETS + 200: 3,  # probe 1: EBADF, ENOENT, 512
              9: 100}  # probe 0's block: a call probe's is never read
    tables = _tables(2, {0: [1, 2, 3], 1: [5, 0, 0]}, errnos=errnos,
                     ktui_unpaired={1: [2, 0, 1]}, ktui_unstored={1: [0, 4, 0]},
                     ktui_errno_rest={1: [0, 0, 6]})
    unit = fake_unit(["vfs_read:c:a3", "vfs_read:r:retval"], tables)
    stats = read_unit_stats(unit)
    ret, call = stats[8], stats[7]
    assert (ret.unpaired, ret.entries_unstored, ret.errnos_other) == (3, 4, 6)
    assert ret.errnos == ((9, 4), (512, 3), (2, 1))
    assert ret.errno_check == "off: no BTF"  # no BTF bound and no `errno: on`: nothing claimed
    assert ret.nest_dropped == 0  # kprobes never nest
    assert (call.unpaired, call.entries_unstored, call.errnos, call.errno_check) == (0, 0, (), "")
    # one errno block read, key by key here (no batch reads on this "kernel")
    assert tables[b"ktui_errnos"].lookups == ERRNO_BUCKETS


def test_an_errno_table_is_one_batch_read_where_the_kernel_has_them(monkeypatch):
    calls = []

    def lookup_all(fd, count, value_size, start=0):
        calls.append((fd, count, value_size, start))
        values = [0] * count
        values[13] = 2
        return b"".join(n.to_bytes(8, "little") for n in values)

    monkeypatch.setattr(bpfsys, "array_lookup_all", lookup_all)
    tables = _tables(3, {i: [0] * NCPU for i in range(3)})
    tables[b"ktui_errnos"].map_fd = 42
    unit = fake_unit(["vfs_read:c", "vfs_read:r", "vfs_write:r"], tables)
    stats = read_unit_stats(unit)
    assert calls == [(42, ERRNO_BUCKETS, 8, ERRNO_BUCKETS), (42, ERRNO_BUCKETS, 8, 2 * ERRNO_BUCKETS)]
    assert stats[8].errnos == ((13, 2),) and tables[b"ktui_errnos"].lookups == 0


def test_an_old_kernel_without_batch_reads_is_read_key_by_key(monkeypatch):
    def refused(*args, **kwargs):
        raise bpfsys.BpfError(22, "reading an array")

    monkeypatch.setattr(bpfsys, "array_lookup_all", refused)
    tables = _tables(1, {0: [0] * NCPU}, errnos={4: 1})
    tables[b"ktui_errnos"].map_fd = 42
    stats = read_unit_stats(fake_unit(["vfs_read:r"], tables))
    assert stats[7].errnos == ((4, 1),)


@pytest.mark.parametrize("per_cpu,exact", [
    ([0, 0, 0], True), ([COMM_EXACT, COMM_EXACT, 3], True), ([COMM_EXACT + 1, 0, 0], False),
])
def test_top_comms_are_exact_while_every_cpu_is_within_its_exact_hits(per_cpu, exact):
    """Past COMM_EXACT hits on a CPU, that CPU samples 1 in COMM_EVERY:
    top comms are then an estimate, and say so."""
    stats = read_unit_stats(fake_unit(["vfs_read:c"], _tables(1, {0: per_cpu})))
    assert stats[7].top_comms_exact is exact
    assert stats[7].hits == sum(per_cpu)
