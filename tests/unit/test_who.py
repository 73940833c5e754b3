"""Who made a probe's hits (kernel/generic/who.py): the maps keyed {slot,
cgroup id, comm} read as top comms and top cgroups, each the sum over the
other half of the key; and the counting probes' own program
(generic/counter.py) run on the host (tests/bpfrun.py), writing exactly
that key, once per hit it samples, and counting a hit with no room. On a
kernel: tests/kernel/test_cgroups.py."""

from __future__ import annotations

import struct

import pytest

from ktui.kernel.codegen.runtime import COMM_EXACT
from ktui.kernel.generic import who
from ktui.kernel.generic.counter import assemble
from ktui.kernel.generic.who import COMM_KEY, Hitters, hitters_by_slot, top_cgroups, top_comms
from tests.bpfrun import Machine, Task

HITS, COMMS, DROPPED, EXCLUDE = 3, 4, 5, 6
SLOT = 7


def key(slot: int, cgid: int, comm: bytes) -> bytes:
    return COMM_KEY.pack(slot, 0, cgid, comm.ljust(16, b"\0"))


def fake_map(monkeypatch, items: dict[bytes, int]) -> None:
    monkeypatch.setattr(who.bpfsys, "hash_items",
                        lambda fd, ks, vs: [(k, struct.pack("<Q", v)) for k, v in items.items()])


def test_both_views_are_sums_over_the_other_half_of_the_key(monkeypatch):
    fake_map(monkeypatch, {
        key(1, 100, b"nginx"): 5, key(1, 200, b"nginx"): 7,  # one name in two containers
        key(1, 100, b"sh"): 1,
        key(1, 100, b"sh\0stale"): 2,  # bytes after the NUL: the same name
        key(2, 300, b"dd"): 9,  # another slot's
    })
    hitters = hitters_by_slot(0)
    assert hitters[1] == Hitters(comms={"nginx": 12, "sh": 3}, cgroups={100: 8, 200: 7})
    assert top_comms(hitters, 1, 5) == (("nginx", 12), ("sh", 3))
    names = {100: "system.slice/docker-" + "a" * 64 + ".scope", 200: "user.slice"}
    assert top_cgroups(hitters, 1, 5, names.get) == ((names[100], 8), ("user.slice", 7))
    assert top_cgroups(hitters, 2, 5, lambda cgid: "/") == (("/", 9),)
    assert top_cgroups(hitters, 3, 5, names.get) == ()


def test_ids_of_one_path_add_up_and_unknown_ids_stay_apart():
    hitters = {0: Hitters(cgroups={10: 4, 11: 3, 12: 2, 13: 1})}
    # 10 and 11: one path (a cgroup removed and made again); 12, 13 never named
    paths = {10: "system.slice/cron.service", 11: "system.slice/cron.service"}
    assert top_cgroups(hitters, 0, 5, lambda cgid: paths.get(cgid, f"cgroup:{cgid}")) == (
        ("system.slice/cron.service", 7), ("cgroup:12", 2), ("cgroup:13", 1))
    # without a namer every id is unknown, still one row each
    assert top_cgroups(hitters, 0, 2, None) == (("cgroup:10", 4), ("cgroup:11", 3))


def machine(max_keys: int = 16) -> Machine:
    m = Machine()
    m.map(HITS, 4, 8, 16, array=True)
    m.map(COMMS, COMM_KEY.size, 8, max_keys)
    m.map(DROPPED, 4, 8, 16, array=True)
    m.map(EXCLUDE, 4, 16, 1, array=True)
    return m


def counts(m: Machine) -> dict[tuple, int]:
    out = {}
    for raw, value in m.entries(COMMS).items():
        slot, pad, cgid, comm = COMM_KEY.unpack(raw)
        assert pad == 0
        out[slot, cgid, comm.rstrip(b"\0")] = struct.unpack("<Q", value)[0]
    return out


def u64(m: Machine, fd: int, index: int) -> int:
    return struct.unpack("<Q", m.value(fd, struct.pack("<I", index)))[0]


def test_the_counting_program_counts_each_hit_under_its_cgroup_and_comm():
    m = machine()
    code = assemble(SLOT, HITS, COMMS, DROPPED, EXCLUDE, None)
    for task, times in ((Task(comm=b"nginx", cgroup=100), 3), (Task(comm=b"nginx", cgroup=200), 2),
                        (Task(comm=b"sh", cgroup=100), 1)):
        for _ in range(times):
            assert m.run(code, task) == 0
    assert u64(m, HITS, SLOT) == 6
    assert counts(m) == {(SLOT, 100, b"nginx"): 3, (SLOT, 200, b"nginx"): 2, (SLOT, 100, b"sh"): 1}
    assert u64(m, DROPPED, SLOT) == 0


def test_a_sampled_hit_is_weighted_and_a_key_with_no_room_is_counted_dropped():
    m = machine(max_keys=1)
    code = assemble(SLOT, HITS, COMMS, DROPPED, EXCLUDE, None)
    m.run(code, Task(cgroup=100))
    m.run(code, Task(cgroup=200))  # a new key, no room: dropped, for both views
    assert counts(m) == {(SLOT, 100, b"dd"): 1} and u64(m, DROPPED, SLOT) == 1
    # past the exact hits: only a sampled hit names its task, weighted
    hits_at = m.maps[HITS].items[struct.pack("<I", SLOT)]
    m.mem[hits_at][:8] = struct.pack("<Q", COMM_EXACT)
    from ktui.kernel.generic.counter import sampled

    seen = COMM_EXACT
    while not sampled(seen):
        m.run(code, Task(cgroup=100))
        seen += 1
    assert counts(m) == {(SLOT, 100, b"dd"): 1}  # none of those was sampled
    m.run(code, Task(cgroup=100))
    assert counts(m)[SLOT, 100, b"dd"] == 1 + 64


@pytest.mark.parametrize("pid, counted", [(42, 1), (43, 0)])
def test_with_a_pid_only_its_hits_count(pid, counted):
    m = machine()
    m.run(assemble(SLOT, HITS, COMMS, DROPPED, EXCLUDE, pid), Task(pid_tgid=(42 << 32) | 42, cgroup=5))
    assert u64(m, HITS, SLOT) == counted
    assert counts(m) == ({(SLOT, 5, b"dd"): 1} if counted else {})
