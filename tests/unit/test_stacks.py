"""Kernel stacks in user space (pipeline/stacks.py): symbolized, normalized
to start at the probed function, merged, folded for flame graphs; the map
read in one pass; the codegen keyed by frames (not a stack-trace map)."""

from __future__ import annotations

import ctypes

from ktui.kernel.aggmaps import read_stacks, stack_fields
from ktui.kernel.codegen import generate
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_probe_text
from ktui.pipeline.ndjson import aggregate_fields
from ktui.pipeline.stacks import folded_lines, merged, normalized
from ktui.record.feed import ProbeStats

from tests.unit.test_statmaps import HashTable, PerCpuTable

SYMS = {0x10: "bpf_trampoline_6442+0x4", 0x20: "vfs_read+0x5", 0x21: "vfs_read+0x9",
        0x30: "ksys_read+0x6b", 0x40: "__x64_sys_read+0x19", 0x50: "ksys_pread64+0x70",
        0x60: "do_syscall_64+0x3b"}


def symbolize(addr: int) -> str:
    return SYMS.get(addr, f"0x{addr:x}")


def test_frames_above_the_probed_function_are_dropped():
    assert normalized(["bpf_trampoline_6442+0x4", "vfs_read+0x5", "ksys_read"], "vfs_read") == (
        "vfs_read+0x5", "ksys_read")
    # not in the stack (an address probe): left as taken
    assert normalized(["a", "b"], "vfs_read") == ("a", "b")


def test_merged_and_folded_root_first_with_counts():
    probe = parse_probe_text("vfs_read:c stack(kernel)")
    stacks = [((0x10, 0x20, 0x30, 0x40, 0x60), 3),  # through a trampoline
              ((0x21, 0x30, 0x40, 0x60), 4),        # another offset, same path
              ((0x20, 0x50, 0x60), 2)]
    assert merged(probe, stacks, symbolize, offsets=False) == [
        (("vfs_read", "ksys_read", "__x64_sys_read", "do_syscall_64"), 7),
        (("vfs_read", "ksys_pread64", "do_syscall_64"), 2)]
    assert folded_lines(probe, stacks, symbolize) == [
        "do_syscall_64;__x64_sys_read;ksys_read;vfs_read 7",
        "do_syscall_64;ksys_pread64;vfs_read 2"]


class StackKey(ctypes.Structure):
    _fields_ = [("probe", ctypes.c_uint32), ("nframes", ctypes.c_uint32), ("ip", ctypes.c_uint64 * 63)]


class Count(ctypes.Structure):
    _fields_ = [("value", ctypes.c_uint64)]


def key(probe: int, frames: list[int]) -> StackKey:
    k = StackKey(probe, len(frames))
    for i, a in enumerate(frames):
        k.ip[i] = a
    return k


def test_one_pass_over_the_shared_map_split_by_probe():
    probes = [parse_probe_text("vfs_read:c stack(kernel)"), parse_probe_text("vfs_write:c stack(kernel)")]
    table = HashTable([(key(0, [0x20, 0x30]), Count(5)), (key(1, [0x99]), Count(1)),
                       (key(0, [0x20, 0x50]), Count(7))])
    got = read_stacks({b"ktui_stacks": table}, probes)
    assert got == {0: [((0x20, 0x50), 7), ((0x20, 0x30), 5)], 1: [((0x99,), 1)]}
    fields = stack_fields({b"ktui_stacks_dropped": PerCpuTable({0: [2, 0, 1]})}, probes[0], 0, got)
    assert fields == {"stacks": (((0x20, 0x50), 7), ((0x20, 0x30), 5)), "stack_count": 2, "stacks_dropped": 3}
    assert read_stacks({}, [parse_probe_text("vfs_read:c hist(a3)")]) == {}  # no map, not read


def test_codegen_keys_a_hash_map_by_the_frames():
    text = generate([parse_probe_text("vfs_read:c stack(kernel)")]).text
    assert "BPF_STACK_TRACE" not in text and "get_stackid" not in text
    assert "BPF_HASH(ktui_stacks, struct ktui_stack_key, u64, 16384);" in text
    assert "bpf_get_stack(ctx, sk->ip, sizeof(sk->ip), 0)" in text
    assert "ktui_bump(ktui_stacks_dropped.lookup(&probe));" in text


def test_stack_key_round_trips_and_user_stacks_are_refused():
    ps = loads_probeset("name: s\nprobes:\n  - spec: vfs_read:c\n    stack: kernel\n")
    assert str(ps.probes[0].agg) == "stack(kernel)"
    assert loads_probeset(dumps_probeset(ps)).probes == ps.probes
    try:
        loads_probeset("name: s\nprobes:\n  - spec: vfs_read:c\n    stack: user\n", source="s.yaml")
    except Exception as err:  # noqa: BLE001 - the message is what is checked
        assert str(err).startswith("s.yaml:4:12: ") and "frame pointers" in str(err)
    else:
        raise AssertionError("stack: user was taken")


def test_ndjson_stack_keys_are_symbolized():
    probe = parse_probe_text("vfs_read:c stack(kernel)")
    stats = ProbeStats(0, stacks=(((0x20, 0x30), 4),), stack_count=1, stacks_dropped=0)
    out = aggregate_fields(probe, stats, symbolize)
    assert out["stacks"] == [{"frames": ["vfs_read+0x5", "ksys_read+0x6b"], "count": 4}]
    assert out["stack_count"] == 1 and out["stacks_dropped"] == 0
