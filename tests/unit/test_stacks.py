"""Stacks in user space (pipeline/stacks.py): symbolized, normalized to
start at the probed function, merged, folded for flame graphs; the maps
read in one pass; the codegen keyed by frames (not a stack-trace map),
and for user stacks by the process too."""

from __future__ import annotations

import ctypes

from ktui.kernel.maps.aggmaps import read_stacks, stack_fields
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


def test_stack_key_round_trips_and_an_unknown_kind_is_refused():
    for kind in ("kernel", "user", "both"):
        ps = loads_probeset(f"name: s\nprobes:\n  - spec: vfs_read:c\n    stack: {kind}\n")
        assert str(ps.probes[0].agg) == f"stack({kind})"
        assert loads_probeset(dumps_probeset(ps)).probes == ps.probes
        assert parse_probe_text(f"vfs_read:c stack({kind})").agg.stack == kind
    try:
        loads_probeset("name: s\nprobes:\n  - spec: vfs_read:c\n    stack: users\n", source="s.yaml")
    except Exception as err:  # noqa: BLE001 - the message is what is checked
        assert str(err).startswith("s.yaml:4:12: ") and "kernel, user or both" in str(err)
    else:
        raise AssertionError("stack: users was taken")


def test_ndjson_stack_keys_are_symbolized():
    probe = parse_probe_text("vfs_read:c stack(kernel)")
    stats = ProbeStats(0, stacks=(((0x20, 0x30), 4),), stack_count=1, stacks_dropped=0)
    out = aggregate_fields(probe, stats, symbolize)
    assert out["stacks"] == [{"frames": ["vfs_read+0x5", "ksys_read+0x6b"], "count": 4}]
    assert out["stack_count"] == 1 and out["stacks_dropped"] == 0


class UStackKey(ctypes.Structure):
    """struct ktui_ustack_key of a program with a `both` probe."""
    _fields_ = [("probe", ctypes.c_uint32), ("tgid", ctypes.c_uint32), ("nkframes", ctypes.c_uint32),
                ("nuframes", ctypes.c_uint32), ("kip", ctypes.c_uint64 * 63), ("uip", ctypes.c_uint64 * 32)]


def ukey(probe: int, tgid: int, kernel: list[int], user: list[int]) -> UStackKey:
    k = UStackKey(probe, tgid, len(kernel), len(user))
    for i, a in enumerate(kernel):
        k.kip[i] = a
    for i, a in enumerate(user):
        k.uip[i] = a
    return k


class FakeUserSymbols:
    """Names a user address per process, as usyms.UserSymbols does."""
    NAMES = {(10, 0x400): "leaf+0x4", (10, 0x500): "main+0x9", (11, 0x400): "leaf+0x4",
             (11, 0x500): "main+0x9", (10, 0x600): "__libc_start_call_main+0x7a"}

    def frames(self, pid, addresses):
        return tuple(self.NAMES.get((pid, a), f"0x{a:x}[gone]") for a in addresses)


def test_user_stacks_are_named_per_process_and_merged_across_processes():
    probes = [parse_probe_text("vfs_read:c stack(user)"), parse_probe_text("vfs_write:c stack(both)")]
    table = HashTable([
        (ukey(0, 10, [], [0x400, 0x500]), Count(3)),
        (ukey(0, 11, [], [0x400, 0x500]), Count(2)),   # same code in another process
        (ukey(0, 12, [], [0x400]), Count(1)),          # exited before the read
        (ukey(0, 13, [], []), Count(4)),               # a kernel thread: no user side
        (ukey(1, 10, [0x20, 0x30], [0x400, 0x500, 0x600]), Count(5)),
    ])
    got = read_stacks({b"ktui_ustacks": table}, probes, FakeUserSymbols())
    assert got[0] == [(("leaf+0x4", "main+0x9"), 5), ((), 4), (("0x400[gone]",), 1)]
    assert got[1] == [((0x20, 0x30, "leaf+0x4", "main+0x9", "__libc_start_call_main+0x7a"), 5)]
    # folded as bcc's stackcount -f: user root first, "-", kernel root first;
    # a user stack that never reaches a thread's start is marked partial
    assert folded_lines(probes[0], got[0], symbolize) == [
        "[partial user stack];main;leaf 5", "[no user stack] 4", "[partial user stack];0x400[gone] 1"]
    both = probes[1]
    assert folded_lines(both, got[1], symbolize) == [
        "__libc_start_call_main;main;leaf;-;ksys_read;vfs_read 5"]
    stats = ProbeStats(0, stacks=tuple(got[1]), stack_count=1)
    out = aggregate_fields(both, stats, symbolize)
    assert out["stacks"] == [{"frames": ["vfs_read+0x5", "ksys_read+0x6b"],
                              "user_frames": ["leaf+0x4", "main+0x9", "__libc_start_call_main+0x7a"],
                              "count": 5, "partial": False}]


def test_codegen_keys_user_stacks_by_process_and_frames():
    text = generate([parse_probe_text("vfs_read:c stack(user)")]).text
    assert "BPF_HASH(ktui_ustacks, struct ktui_ustack_key, u64, 16384);" in text
    assert "uk->tgid = (u32)(bpf_get_current_pid_tgid() >> 32);" in text
    assert "bpf_get_stack(ctx, uk->uip, sizeof(uk->uip), BPF_F_USER_STACK)" in text
    assert "kip[" not in text and "KTUI_USTACK_KIP" not in text.split("/* probe 0")[0]
    assert "ktui_stacks," not in text  # no kernel-only map without stack(kernel)
    mixed = generate([parse_probe_text("vfs_read:c stack(user)"),
                      parse_probe_text("vfs_write:c stack(both)")]).text
    assert "#define KTUI_USTACK_KIP 1" in mixed and "u64 kip[KTUI_KSTACK_DEPTH];" in mixed
    # the user probe clears the kernel frames a both probe may have left in the scratch slot
    assert "__builtin_memset(uk->kip, 0, sizeof(uk->kip));" in mixed
    assert "long kn = bpf_get_stack(ctx, uk->kip, sizeof(uk->kip), 0);" in mixed


def test_the_stacks_view_says_user_stacks_may_be_partial():
    from ktui.pipeline.value_views import USER_STACK_CAVEAT, stack_lines

    probe = parse_probe_text("vfs_read:c stack(both)")
    stats = ProbeStats(0, stacks=(((0x20, "read+0x10"), 3),), stack_count=1)
    lines = [text for text, _ in stack_lines(probe, stats, symbolize)]
    assert lines[0].startswith("top kernel + user stacks: 1 distinct")
    assert lines[1] == USER_STACK_CAVEAT and "frame pointers" in lines[1]
    assert lines[2] == "3 (100.0%)  partial user stack"
    assert lines[3:] == ["  vfs_read+0x5", "  --", "  read+0x10"]


def test_a_recording_keeps_named_user_frames():
    from ktui.pipeline.recording import aggregates_from_json
    import json

    stats = ProbeStats(0, stacks=(((0x20, "leaf+0x4"), 3),), stack_count=1)
    back = aggregates_from_json(json.loads(json.dumps({"stacks": stats.stacks})))
    assert back["stacks"] == ((((0x20, "leaf+0x4")), 3),)


def test_stream_folded_file_has_user_frames_first_and_says_they_may_be_partial(tmp_path, capsys):
    from types import SimpleNamespace

    from ktui.headless import write_folded

    probe = parse_probe_text("who=vfs_read:c stack(both)")
    stats = ProbeStats(0, stacks=(((0x20, 0x30, "leaf+0x4", "main+0x9"), 3),), stack_count=1)
    feed = SimpleNamespace(statuses=lambda: {0: SimpleNamespace(probe=probe)}, symbolize=symbolize)
    out = tmp_path / "out.folded"
    write_folded(str(out), feed, SimpleNamespace(probes={0: stats}))
    assert out.read_text() == "[partial user stack];main;leaf;-;ksys_read;vfs_read 3\n"
    assert "frame pointers" in capsys.readouterr().err
