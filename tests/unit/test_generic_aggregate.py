"""hist / count / sum / stack in the generic program: the plan says which
fetch each reads (an event's own where it is the same value, else one of
its own in scratch no record holds), and the shared maps read back by tag,
another probe's entries left out. No kernel: the map reads are faked."""

from __future__ import annotations

import ctypes

import pytest

from ktui.kernel.generic import abi
from ktui.kernel.generic import aggregates
from ktui.kernel.generic.plan import NotGeneric, build_plan, record_size
from ktui.lang.spec import parse_probe_text
from ktui.record.layout import HEADER_SIZE


def plan_of(text: str, **kw) -> abi.Plan:
    return build_plan(parse_probe_text(text), gen=1, **kw)


def test_a_counting_histogram_reads_its_value_once_after_the_filter():
    plan = plan_of('vfs_read:c hist(a3) count(a3) if comm == "x"')
    assert plan.agg == abi.AGG_HIST | abi.AGG_COUNT
    assert plan.nfetch == 1 and plan.agg_hist == plan.agg_key[0] == 0 and plan.agg_nkeys == 1
    f = plan.fetch[0]
    assert (f.src, f.reg, f.kind, f.width) == (abi.SRC_REG, abi.REG_INDEX["dx"], abi.K_UINT, 8)
    # no event: nothing after the aggregation, and the record is the header alone
    assert (plan.fetch_before, plan.fetch_agg, plan.fetch_after) == (0, 1, 0)
    assert plan.record_size == HEADER_SIZE == record_size(parse_probe_text("vfs_read:c hist(a3)"))
    assert not plan.flags & (abi.F_BARE | abi.F_EMITS)
    assert plan.agg_max_keys == 10240


def test_an_aggregation_of_an_event_fetch_reads_the_events_value():
    plan = plan_of("vfs_read:r:retval,a2 count(comm) sum(retval)")
    assert plan.agg == abi.AGG_COUNT | abi.AGG_SUM
    assert plan.nfetch == 2 and plan.agg_sum == 0  # retval, the event's first fetch
    assert plan.agg_nkeys == 0 and plan.agg_comm == 1
    assert plan.agg_signed == abi.AGG_SIGNED_SUM  # an errno is counted, not summed
    # retval read for the sum, a2 only for a hit written out
    assert (plan.fetch_agg, plan.fetch_after) == (0b01, 0b10)


def test_a_key_of_its_own_goes_past_the_record_it_is_not_part_of():
    plan = plan_of("vfs_read:c:a1 count(pid, a3)")
    assert plan.nfetch == 3 and list(plan.agg_key[:2]) == [1, 2]
    payload = plan.record_size - HEADER_SIZE
    assert [plan.fetch[i].dest for i in (1, 2)] == [payload, payload + 8]
    assert (plan.fetch[1].src, plan.fetch[1].kind) == (abi.SRC_PID, abi.K_UINT)
    assert (plan.fetch_agg, plan.fetch_after) == (0b110, 0b001)


@pytest.mark.parametrize("kind, flags", [
    ("kernel", abi.AGG_KSTACK), ("user", abi.AGG_USTACK), ("both", abi.AGG_KSTACK | abi.AGG_USTACK)])
def test_stacks(kind, flags):
    plan = plan_of(f"vfs_read:c stack({kind})")
    assert plan.agg == flags and plan.nfetch == 0
    assert not plan.flags & abi.F_BARE  # a stack needs the hit's context


def test_a_cap_past_the_shared_map_is_compiled_with_the_reason():
    with pytest.raises(NotGeneric, match="max_keys"):
        plan_of(f"vfs_read:c count(a3) max_keys({abi.AGG_MAP_KEYS + 1})")


def test_the_program_declares_the_keys_the_reader_decodes():
    text = abi.c_declarations()
    for cls in (abi.AggKey, abi.AggVal, abi.StackKey, abi.UStackKey):
        assert abi.c_struct(cls) in text
    assert ctypes.sizeof(abi.StackKey) == 512  # a stack of 63 frames fills a key of 512 bytes


class FakeMaps:
    """bpfsys' map reads over dicts: fd -> {key bytes: value bytes}."""

    def __init__(self, monkeypatch, maps: dict[int, dict[bytes, bytes]]) -> None:
        monkeypatch.setattr(aggregates.bpfsys, "map_keys", lambda fd, size: list(maps[fd]))
        monkeypatch.setattr(aggregates.bpfsys, "map_lookup", lambda fd, key, size: maps[fd].get(key))


def agg_key(tag: int, ints=(), comm: bytes = b"") -> bytes:
    key = abi.AggKey(tag=tag)
    for i, v in enumerate(ints):
        key.k[i] = v & (2**64 - 1)
    raw = bytearray(bytes(key))
    at = abi.AggKey.comm.offset
    raw[at:at + len(comm)] = comm  # bytes past the NUL too, as bpf_get_current_comm leaves them
    return bytes(raw)


def test_counts_read_back_by_tag_merging_stale_comm_tails(monkeypatch):
    probe = parse_probe_text("vfs_read:r count(comm,retval) sum(retval)")
    val = lambda c, s: bytes(abi.AggVal(c, s))  # noqa: E731
    FakeMaps(monkeypatch, {3: {
        agg_key(7, [-9], b"cat\0xyz"): val(2, 0),
        agg_key(7, [-9], b"cat"): val(1, 0),
        agg_key(7, [100], b"dd"): val(3, 300),
        agg_key(7 | 2 << 16, [5], b"old"): val(50, 5),  # the slot's last probe: not this one's
    }})
    entries = aggregates.count_entries(3, {7: probe})
    assert entries == {7: {("cat", -9): (3, 0), ("dd", 100): (3, 300)}}
    fields = aggregates.count_fields(probe, entries[7])
    assert fields["top_values"] == ((("dd", 100), 3, 300), (("cat", -9), 3, 0))
    assert (fields["value_keys"], fields["value_sum"]) == (2, 300)


def test_stacks_read_back_by_tag_most_first(monkeypatch):
    def stack(tag, frames):
        key = abi.StackKey(tag=tag, nframes=len(frames))
        key.ip[:len(frames)] = frames
        return bytes(key)

    count = lambda n: n.to_bytes(8, "little")  # noqa: E731
    FakeMaps(monkeypatch, {1: {stack(4, [0x100, 0x200]): count(8),
                               stack(4, [0x100, 0x300]): count(5),
                               stack(9, [0x100]): count(1)},  # another probe's
                           2: {}})
    got = aggregates.stacks(1, 2, {4: 0}, {"kernel"})
    assert got == {4: [((0x100, 0x200), 8), ((0x100, 0x300), 5)]}


def test_user_stacks_are_named_by_their_process_after_the_kernel_frames(monkeypatch):
    key = abi.UStackKey(tag=4, tgid=77, nkframes=1, nuframes=2)
    key.kip[0] = 0x100
    key.uip[:2] = [0x4000, 0x5000]
    other = abi.UStackKey(tag=5, tgid=77, nkframes=0, nuframes=1)  # another probe's
    FakeMaps(monkeypatch, {1: {}, 2: {bytes(key): (3).to_bytes(8, "little"),
                                      bytes(other): (1).to_bytes(8, "little")}})

    class Names:
        def frames(self, tgid, addresses):
            return tuple(f"{tgid}:{a:x}" for a in addresses)

    got = aggregates.stacks(1, 2, {4: 0}, {"both"}, Names())
    assert got == {4: [((0x100, "77:4000", "77:5000"), 3)]}


def test_lost_keys_are_listed_in_batches_and_decoded_once(monkeypatch):
    """A full count map's lost keys, counted by value (a comm's stale tail
    is one key) at every read; a key seen at the last read is not decoded
    again (a scrape under churning keys decoded 16,384 a second), and a
    tag whose probe changed is decoded for the new probe."""
    lost = {agg_key(7, [], b"cat\0xyz"): b"\0", agg_key(7, [], b"cat"): b"\0", agg_key(7, [], b"dd"): b"\0",
            agg_key(9, [4096]): b"\0"}
    monkeypatch.setattr(aggregates.bpfsys, "hash_items", lambda fd, ks, vs: list(lost.items()))
    decoded = []
    real = aggregates.key_values
    monkeypatch.setattr(aggregates, "key_values", lambda probe, key, *a: decoded.append(key.tag) or real(probe, key, *a))
    by_comm, by_size = parse_probe_text("vfs_read:c count(comm)"), parse_probe_text("vfs_read:c count(a3)")
    reader = aggregates.LostKeys()
    assert reader.read(5, {7: by_comm, 9: by_size}) == {7: 2, 9: 1}
    assert len(decoded) == 4
    lost[agg_key(7, [], b"ls")] = b"\0"
    assert reader.read(5, {7: by_comm, 9: by_size}) == {7: 3, 9: 1}
    assert len(decoded) == 5  # only the new key
    assert reader.read(5, {7: by_comm}) == {7: 3}  # tag 9 not losing (any more): not counted
    by_pid = parse_probe_text("vfs_read:c count(pid)")
    assert reader.read(5, {7: by_comm, 9: by_pid}) == {7: 3, 9: 1}
    assert decoded[-1] == 9  # a new probe on tag 9: its key decoded for it
