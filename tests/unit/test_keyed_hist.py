"""hist(VALUE, KEY...), one histogram per key, without a kernel: its
grammar (short form and YAML, errors at their column), the plan the
generic program runs, the count map read back into each key's slots, and
what the pane, NDJSON, recordings and the exporter make of it."""

from __future__ import annotations

import json

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from ktui.kernel.generic import abi, aggregates
from ktui.kernel.generic.plan import NotGeneric, build_plan
from ktui.kernel.session.edits import generic_only
from ktui.lang.model import SpecError
from ktui.lang.probeset import checks_probeset, loads_probeset
from ktui.lang.probeset_write import aggregate_keys
from ktui.lang.spec import parse_probe_text
from ktui.pipeline.ndjson import aggregate_fields
from ktui.pipeline.prometheus import ProbeView, value_families, value_shape
from ktui.pipeline.recording import aggregates_from_json
from ktui.pipeline.value_views import VALUES, view_lines, view_title, views_of
from ktui.record.feed import ProbeStats

from tests.unit.test_generic_aggregate import FakeMaps, agg_key

SPAN = "blk_mq_end_request:c:rq,dev=rq->part->bd_dev since(blk_mq_start_request:c:rq)"


def slots(**at) -> tuple[int, ...]:
    out = [0] * 65
    for k, n in at.items():
        out[int(k[1:])] = n
    return tuple(out)


# ---------------------------------------------------------------- grammar


@pytest.mark.parametrize("text, canonical", [
    ("vfs_read:c hist(a3, comm)", "hist(a3,comm)"),
    ("vfs_read:c hist(a3,comm,pid)", "hist(a3,comm,pid)"),
    ("vfs_read:r hist(latency, comm) count(comm) sum(retval)", "hist(latency,comm) count(comm) sum(retval)"),
    (f"{SPAN} hist(latency, dev)", "hist(latency,dev)"),
    ("vfs_read:c hist(a3)", "hist(a3)"),  # without keys: as always
])
def test_the_short_form_parses_and_prints_back(text, canonical):
    probe = parse_probe_text(text)
    assert str(probe.agg) == canonical
    assert parse_probe_text(text.split(" hist(")[0] + " " + canonical).agg == probe.agg


@pytest.mark.parametrize("text, col, message", [
    ("vfs_read:r hist(latency)", 12, "hist: latency: a return probe's or a span's latency histogram is kept already"),
    ("vfs_read:c hist(latency, comm)", 12, "hist: latency exists only where a hit has one"),
    ("vfs_read:c count(pid) hist(a3, comm)", 23, "hist: keyed by comm but count by pid: a probe has one key"),
    ("vfs_read:c hist(a3, a1, a2, a4, a5, comm)", 12, "hist: at most 4 keys, got 5"),
    ("vfs_read:c hist(a3, latency)", 12, "hist: latency is no key"),
    ("vfs_read:c hist(a3, comm, comm)", 12, "hist: comm is given twice"),
    ("vfs_read:c hist(a3, +0(a1):string)", 12, "hist: +0(a1):string is not an integer, comm, func or cgroup"),
    ("vfs_read:c hist(a3,)", 20, "expected a fetch"),
])
def test_a_wrong_keyed_histogram_is_one_line_at_its_column(text, col, message):
    with pytest.raises(SpecError) as err:
        parse_probe_text(text)
    assert err.value.col == col and err.value.message.startswith(message), (err.value.col, err.value.message)


def test_the_same_keys_in_count_and_hist_are_one_key():
    agg = parse_probe_text("vfs_read:c hist(a3, comm) count(comm)").agg
    assert [str(k) for k in agg.key_fetches] == ["comm"]


def _yaml(body: str, spec: str = "vfs_read:c") -> str:
    return f"name: t\nprobes:\n  - spec: {spec}\n    {body}\n"


@pytest.mark.parametrize("body", ["hist: [a3, comm]", "hist: a3, comm", "hist:\n      - a3\n      - comm"])
def test_yaml_takes_a_list_or_a_string_and_saves_a_list(body):
    probe = loads_probeset(_yaml(body)).probes[0]
    assert probe.agg == parse_probe_text("vfs_read:c hist(a3, comm)").agg
    assert aggregate_keys(probe) == {"hist": ["a3", "comm"]}
    # unkeyed: saved as it always was
    assert aggregate_keys(loads_probeset(_yaml("hist: a3")).probes[0]) == {"hist": "a3"}


def test_yaml_latency_by_key_on_a_span():
    text = (f"name: t\nprobes:\n  - spec: {SPAN.split(' since')[0]}\n    since: blk_mq_start_request:c:rq\n"
            "    hist: [latency, dev]\n")
    probe = loads_probeset(text).probes[0]
    assert str(probe.agg) == "hist(latency,dev)"


@pytest.mark.parametrize("body, where, message", [
    ("hist: [a3, latency]", "4:11", "hist: latency is no key"),
    ("hist: [a3, comm]\n    count: pid", "4:11", "hist: keyed by comm but count by pid"),
    ("hist: []", "4:11", "hist: expected a fetch"),
    ("hist: a3, +0(a1", "4:20", "hist: expected ) to close the ("),
    ("hist: latency", "4:11", "hist: latency: a return probe's or a span's latency histogram is kept already"),
])
def test_ktui_check_locates_a_wrong_yaml_hist(body, where, message):
    _, errors = checks_probeset(_yaml(body), "set.yaml")
    assert len(errors) == 1 and str(errors[0]).startswith(f"set.yaml:{where}: probe 1 (vfs_read:c): {message}"), \
        [str(e) for e in errors]


# ---------------------------------------------------------------- plan


def test_the_plan_counts_each_keys_slots_in_the_count_map():
    plan = build_plan(parse_probe_text('vfs_read:c hist(a3, comm, pid) if comm == "x"'), gen=1)
    assert plan.agg == abi.AGG_KHIST  # no histogram of all, no count entry
    assert plan.agg_comm == 1 and plan.agg_nkeys == 1 and plan.agg_max_keys == 10240
    assert plan.fetch[plan.agg_key[0]].src == abi.SRC_PID
    assert plan.fetch_agg >> plan.agg_hist & 1  # the value read after the filter, for the aggregation


def test_a_keyed_histogram_beside_count_and_sum_shares_their_key():
    plan = build_plan(parse_probe_text("vfs_read:r hist(latency, comm) count(comm) sum(retval)"), gen=1)
    assert plan.agg == abi.AGG_KHIST | abi.AGG_COUNT | abi.AGG_SUM
    assert plan.fetch[plan.agg_hist].src == abi.SRC_LATENCY
    assert plan.agg_comm == 1 and plan.agg_nkeys == 0


def test_a_keyed_histogram_is_never_compiled():
    probe = parse_probe_text(f"vfs_read:c hist(a3, comm) max_keys({abi.AGG_MAP_KEYS + 1})")
    with pytest.raises(NotGeneric, match="max_keys"):
        build_plan(probe, gen=1)
    assert "a histogram by key" in generic_only(probe)  # so it fails, saying why, and is not compiled
    assert generic_only(parse_probe_text("vfs_read:c hist(a3)")) == ""


# ---------------------------------------------------------------- reading


def test_the_count_map_reads_back_as_each_keys_slots(monkeypatch):
    probe = parse_probe_text("vfs_read:c hist(a3, comm, pid) count(comm, pid)")

    def key(bucket, comm, pid, tag=7):
        raw = bytearray(agg_key(tag, [pid], comm))
        raw[4:8] = bucket.to_bytes(4, "little")  # AggKey.bucket
        return bytes(raw)

    val = lambda c, s: bytes(abi.AggVal(c, s))  # noqa: E731
    FakeMaps(monkeypatch, {3: {
        key(0, b"dd", 10): val(5, 0),  # count(comm, pid)'s own entry
        key(4, b"dd", 10): val(3, 21), key(13, b"dd", 10): val(2, 8192),  # slots 3 and 12
        key(4, b"cat", 11): val(9, 63),
        key(4, b"old", 10, tag=8): val(1, 7),  # another probe's
    }})
    counts, hists = aggregates.agg_entries(3, {7: probe})
    assert counts == {7: {("dd", 10): (5, 0)}}
    assert hists == {7: {("dd", 10): (list(slots(s3=3, s12=2)), 8213), ("cat", 11): (list(slots(s3=9)), 63)}}
    fields = aggregates.hist_fields(hists[7])
    assert fields == {"hist_keys": 2, "key_hists": ((("cat", 11), slots(s3=9), 63),
                                                    (("dd", 10), slots(s3=3, s12=2), 8213))}


# ---------------------------------------------------------------- output

STATS = ProbeStats(1, hits=16, hist_keys=3, key_hists=((("dd",), slots(s3=10, s13=2), 8256),
                                                       (("cat",), slots(s7=4), 400)))


def test_the_pane_shows_each_keys_histogram_under_its_key():
    probe = parse_probe_text("vfs_read:c hist(a3, comm)")
    assert VALUES in views_of(probe) and view_title(VALUES, probe) == "hist by key"
    lines = [line[0] for line in view_lines(VALUES, probe, STATS, bar_width=10, room=60)]
    assert lines[0] == "hist(a3) by comm: 3 keys"
    assert lines[1].split() == ["dd", "12", "hits", "p50", "6", "p99", "7946"]
    assert lines[2].split()[:5] == ["4", "->", "7", ":", "10"]
    assert lines[3] == "  ..."  # the empty slots between two used ones
    assert lines[4].split()[:5] == ["4096", "->", "8191", ":", "2"]
    assert lines[5].startswith("cat") and lines[-1] == "1 more key"
    assert all(len(line) <= 60 for line in lines)


def test_a_latency_by_key_shows_durations():
    probe = parse_probe_text(f"{SPAN} hist(latency, dev)")
    stats = ProbeStats(1, hits=8, hist_keys=1, key_hists=(((7340032,), slots(s14=8), 80000),))
    lines = [line[0] for line in view_lines(VALUES, probe, stats, bar_width=10, room=60)]
    assert lines[0] == "hist(latency) by dev: 1 key, slots in ns"
    assert lines[1].split()[:3] == ["7340032", "8", "hits"] and "us" in lines[1]


def test_ndjson_carries_each_keys_buckets_and_recordings_keep_them():
    probe = parse_probe_text("vfs_read:c hist(a3, comm)")
    out = aggregate_fields(probe, STATS)
    assert "value_hist" not in out and out["hist_keys"] == 3
    assert out["key_hists"][0] == {"key": {"comm": "dd"}, "count": 12, "hist": list(slots(s3=10, s13=2)),
                                   "sum": 8256}
    back = aggregates_from_json(json.loads(json.dumps({"key_hists": STATS.key_hists, "hist_keys": 3})))
    assert (back["key_hists"], back["hist_keys"]) == (STATS.key_hists, 3)
    assert aggregate_fields(parse_probe_text(f"{SPAN} hist(latency, dev)"),
                            ProbeStats(1))["hist_unit"] == "ns"


def _scrape(views) -> str:
    class Collector:
        def collect(self):
            return value_families(views)

    registry = CollectorRegistry()
    registry.register(Collector())
    return generate_latest(registry).decode()


def test_the_exporter_gives_a_histogram_per_key_with_exact_bounds():
    text = _scrape([ProbeView("sizes", "s", False, STATS, **value_shape(parse_probe_text("vfs_read:c hist(a3, comm)"))),
                    ProbeView("plain", "s", False, ProbeStats(2, value_hist=slots(s3=1), value_hist_sum=5),
                              **value_shape(parse_probe_text("vfs_read:c hist(a3)")))])
    assert 'ktui_probe_value_bucket{comm="dd",le="7",probe="sizes",set="s"} 10.0' in text
    assert 'ktui_probe_value_bucket{comm="dd",le="8191",probe="sizes",set="s"} 12.0' in text
    assert 'ktui_probe_value_bucket{comm="dd",le="+Inf",probe="sizes",set="s"} 12.0' in text
    assert 'ktui_probe_value_sum{comm="dd",probe="sizes",set="s"} 8256.0' in text
    assert 'ktui_probe_value_count{comm="cat",probe="sizes",set="s"} 4.0' in text
    assert 'ktui_probe_value_bucket{le="7",probe="plain",set="s"} 1.0' in text  # unkeyed: as always
    assert 'ktui_probe_keys{probe="sizes",set="s"} 3.0' in text
    assert 'ktui_probe_keys_omitted{probe="sizes",set="s"} 1.0' in text


def test_the_exporter_gives_a_latency_by_key_in_seconds():
    stats = ProbeStats(1, hist_keys=1, key_hists=(((7340032,), slots(s14=8), 80000),))
    text = _scrape([ProbeView("io", "s", True, stats, **value_shape(parse_probe_text(f"{SPAN} hist(latency, dev)")))])
    assert 'ktui_probe_latency_by_key_seconds_bucket{dev="7340032",le="0.000016383",probe="io",set="s"} 8.0' in text
    assert 'ktui_probe_latency_by_key_seconds_sum{dev="7340032",probe="io",set="s"} 8e-05' in text


def test_a_key_named_by_a_fetchs_label_reads_that_fetch():
    # `count(dev)` of `dev=rq->part->bd_dev`: the fetch's value, not a parameter named dev
    plan = build_plan(parse_probe_text("vfs_read:c:n=a3 hist(a2, n)"), gen=1)
    assert plan.agg_nkeys == 1 and plan.agg_key[0] == 0 and plan.agg_hist == 1
    from ktui.lang.bind import names_label

    probe = parse_probe_text(f"{SPAN} hist(latency, dev) count(dev)")
    assert names_label(probe.agg.keys[0], {"dev"}) == "dev"
    assert names_label(probe.agg.hist, {"dev"}) is None


def test_a_disks_key_drills_down_to_the_events_of_that_disk():
    from ktui.pipeline.drilldown import VALUE, Pick, drill_down

    probe = parse_probe_text(f"io={SPAN} hist(latency, dev)")
    down = drill_down(1, probe, Pick(VALUE, (7340032,)))
    assert (down.tests[0].field, down.tests[0].equals) == (1, 7340032)  # the event's dev (after rq)


def test_a_dev_t_key_or_value_shows_as_major_minor():
    """biolatency -D names disks; ktui's panes name them as lsblk does
    (MAJOR:MINOR), not as the kernel's MKDEV number 7340032."""
    from ktui.lang.bind import with_fetch_types
    from ktui.lang.spec import parse_probe_text
    from ktui.pipeline.format import format_fetch
    from ktui.pipeline.value_views import key_fetches, key_text

    disk = with_fetch_types(parse_probe_text("blk_mq_end_request:c:rq,dev=rq->part->bd_dev count(dev)"),
                            [["x64", "struct request *"], ["u32", "dev_t"]])
    assert key_text((7340032,), key_fetches(disk, disk.agg.keys)) == "7:0"  # by the fetch its label names
    assert format_fetch(disk.fetches[1], 265289728) == "253:0"
    assert format_fetch(disk.fetches[0], 5) == "0x5"  # the request pointer as before
    size = with_fetch_types(parse_probe_text("vfs_read:c:count count(count)"), [["u64", "size_t"]])
    assert key_text((7340032,), key_fetches(size, size.agg.keys)) == "7340032"  # not a dev_t: a number
