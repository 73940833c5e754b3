"""Issue 14's drill-down, the matching logic: which decoded events a chosen
stats line (a comm, an errno, a top value, a histogram bucket) covers, read
as the aggregation read them, and the refusals that say why not."""

from __future__ import annotations

import pytest

from ktui.lang.spec import parse_probe_text
from ktui.pipeline.drilldown import (BUCKET, COMM, ERRNO, LATENCY, VALUE, DrillDown, NotDrillable, Pick,
                                     as_type, drill_down)
from ktui.pipeline.value_views import TOP, VALUES, counter_lines, pick_of, view_lines
from ktui.record.feed import Event, ProbeStats
from ktui.record.histogram import slot_bounds

READS = parse_probe_text("vfs_read:r:retval,a3,comm hist(a3) count(comm,a3)")


def event(values, *, probe_id=1, comm="bash", latency=None, pid=42) -> Event:
    return Event(probe_id, 0, 0, pid, pid, comm, latency, tuple(values))


def test_a_comm_matches_that_comm_of_that_probe_only():
    drill = drill_down(1, READS, Pick(COMM, "bash"))
    assert drill.describe() == "drill-down: vfs_read:r:retval,a3,comm comm=bash (Esc clears)"
    assert drill.matches(event((0, 1, "bash")))
    assert not drill.matches(event((0, 1, "cat"), comm="cat"))
    assert not drill.matches(event((0, 1, "bash"), probe_id=2))


def test_an_errno_matches_the_negative_return():
    drill = drill_down(1, READS, Pick(ERRNO, 13))
    assert "retval=-13 (EACCES)" in drill.describe()
    assert drill.matches(event((-13, 1, "bash")))
    assert not drill.matches(event((-14, 1, "bash")))
    assert not drill.matches(event((13, 1, "bash")))
    # a retval fetched as u64 shows -13 as 2^64 - 13: still the same errno
    unsigned = parse_probe_text("vfs_read:r:retval:u64")
    assert drill_down(1, unsigned, Pick(ERRNO, 13)).matches(event(((1 << 64) - 13,)))


def test_a_top_value_matches_every_key_fetch():
    drill = drill_down(1, READS, Pick(VALUE, ("bash", 4096)))
    assert drill.what == "comm=bash a3=4096"
    assert drill.matches(event((0, 4096, "bash")))
    assert not drill.matches(event((0, 4095, "bash")))
    assert not drill.matches(event((0, 4096, "cat"), comm="cat"))


def test_pid_keys_come_from_the_event_itself():
    probe = parse_probe_text("vfs_read:c:a3 count(pid)")
    drill = drill_down(1, probe, Pick(VALUE, (42,)))
    assert drill.matches(event((1,), pid=42)) and not drill.matches(event((1,), pid=43))


@pytest.mark.parametrize("slot", [0, 1, 2, 13, 64])
def test_a_bucket_holds_its_slot_bounds_and_nothing_else(slot):
    drill = drill_down(1, READS, Pick(BUCKET, slot))
    low, high = slot_bounds(slot)
    assert drill.matches(event((0, low, "bash")))
    assert drill.matches(event((0, high, "bash")))
    if low:
        assert not drill.matches(event((0, low - 1, "bash")))
    if high < (1 << 64) - 1:
        assert not drill.matches(event((0, high + 1, "bash")))


def test_bucket_text_is_a_half_open_range():
    assert drill_down(1, READS, Pick(BUCKET, 13)).what == "a3 in [4096, 8192)"
    assert drill_down(1, READS, Pick(BUCKET, 0)).what == "a3 = 0"


def test_a_signed_histogram_leaves_negative_values_out():
    probe = parse_probe_text("vfs_read:r:retval hist(retval)")
    drill = drill_down(1, probe, Pick(BUCKET, 4))
    assert drill.matches(event((9,)))
    assert not drill.matches(event((-9,)))  # the kernel does not put -errno in hist


def test_a_latency_bucket_tests_the_return_latency():
    drill = drill_down(1, READS, Pick(LATENCY, 10))
    assert drill.matches(event((0, 1, "bash"), latency=512))
    assert drill.matches(event((0, 1, "bash"), latency=1023))
    assert not drill.matches(event((0, 1, "bash"), latency=1024))
    assert not drill.matches(event((0, 1, "bash"), latency=None))  # a return without its entry time
    with pytest.raises(NotDrillable, match="neither a return probe nor a span"):
        drill_down(1, parse_probe_text("vfs_read:c:a3"), Pick(LATENCY, 10))


def test_a_counting_only_probe_says_it_has_no_events():
    with pytest.raises(NotDrillable, match="emits no events"):
        drill_down(1, parse_probe_text("vfs_read:c hist(a3) count(comm)"), Pick(COMM, "bash"))


def test_events_without_the_value_are_refused_with_the_reason():
    probe = parse_probe_text("vfs_read:c:a2 count(a3)")
    with pytest.raises(NotDrillable, match="do not carry a3"):
        drill_down(1, probe, Pick(VALUE, (4096,)))
    with pytest.raises(NotDrillable, match="do not carry the return value"):
        drill_down(1, parse_probe_text("vfs_read:r:a3"), Pick(ERRNO, 9))


def test_a_value_fetched_narrower_than_counted_is_refused():
    # a3:u32 cannot tell 4096 from 2^32 + 4096, which count(a3) tells apart
    with pytest.raises(NotDrillable, match="as u32, narrower than the u64"):
        drill_down(1, parse_probe_text("vfs_read:c:a3:u32 count(a3)"), Pick(VALUE, (4096,)))
    # wider is fine: the event's value is cut to the key's width
    drill = drill_down(1, parse_probe_text("vfs_read:c:a3 count(a3:u8)"), Pick(VALUE, (1,)))
    assert drill.matches(event((257,))) and not drill.matches(event((258,)))


def test_as_type_cuts_and_signs():
    assert as_type((1 << 64) - 1, "s64") == -1
    assert as_type(-1, "u64") == (1 << 64) - 1
    assert as_type(0x1FF, "u8") == 0xFF
    assert as_type(0x80, "s8") == -128
    assert as_type(5, "string") == 5


def test_a_sum_without_keys_drills_to_all_of_the_probes_events():
    probe = parse_probe_text("vfs_read:r:retval sum(retval)")
    drill = drill_down(1, probe, Pick(VALUE, ()))
    assert drill.matches(event((5,))) and not drill.matches(event((5,), probe_id=2))


def stats(**kw) -> ProbeStats:
    hist = [0] * 65
    hist[10], hist[12] = 3, 1  # slot 11 between them is empty
    return ProbeStats(1, hits=10, hist=tuple(hist), errnos=((13, 2), (9, 1)),
                      top_comms=(("bash", 6), ("cat", 4)), **kw)


def test_counter_lines_pick_errnos_comms_and_used_latency_slots():
    lines = counter_lines(READS, stats(), 20)
    picks = [pick_of(line) for line in lines if pick_of(line) is not None]
    assert picks == [Pick(LATENCY, 10), Pick(LATENCY, 12), Pick(ERRNO, 13), Pick(ERRNO, 9),
                     Pick(COMM, "bash"), Pick(COMM, "cat")]
    # each pick sits on the line that shows it
    by_pick = {pick_of(line): line[0] for line in lines if pick_of(line) is not None}
    assert by_pick[Pick(LATENCY, 10)].lstrip().startswith("512 -> 1023")
    assert "EACCES" in by_pick[Pick(ERRNO, 13)] and "bash" in by_pick[Pick(COMM, "bash")]


def test_view_lines_pick_top_values_and_value_buckets():
    hist = [0] * 65
    hist[13] = 5
    s = stats(value_hist=tuple(hist), top_values=((("bash", 4096), 5, 0),), value_keys=1)
    picks = [pick_of(line) for line in view_lines(VALUES, READS, s, 20) if pick_of(line)]
    assert picks == [Pick(BUCKET, 13)]
    top = [line for line in view_lines(TOP, READS, s, 20) if pick_of(line)]
    assert [pick_of(line) for line in top] == [Pick(VALUE, ("bash", 4096))] and "bash, 4096" in top[0][0]


def test_a_drill_down_is_plain_data():
    drill = drill_down(1, READS, Pick(COMM, "bash"))
    assert isinstance(drill, DrillDown) and drill == drill_down(1, READS, Pick(COMM, "bash"))
