"""Every event carries its task's cgroup id in the record header (HEADER,
56 bytes): decoded in bulk and named, kept named in recordings (CGRP),
written to NDJSON. Recordings made before (48-byte headers, HEADER_V1,
formats 1-3) still replay, with no cgroup.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from ktui.kernel.generic import abi
from ktui.kernel.generic.loader import program_text
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_probe_text
from ktui.pipeline.ndjson import NdjsonSink
from ktui.pipeline.recording import FORMAT_VERSION, Recorder
from ktui.pipeline.recording_reader import RecordingReader
from ktui.pipeline.replay import ReplayFeed
from ktui.record.decode import Decoder, RecordBatch, SizedDecoders
from ktui.record.feed import Event
from ktui.record.layout import HEADER, HEADER_FIELDS, HEADER_SIZE, HEADER_V1, record_layout
from ktui.record.raw import RawRecords
from tests.unit.test_cgroup_recording import Namer  # the live resolver, counting what it is asked

FIXTURES = Path(__file__).parent.parent / "fixtures"
NGINX = "system.slice/nginx.service"




def records(decoder, cgroups, values=None):
    recs = np.zeros(len(cgroups), dtype=decoder.dtype)
    recs["ts"] = np.arange(len(cgroups))
    recs["cgroup"] = cgroups
    recs["comm"] = b"w"
    if values is not None:
        recs["payload"].view(decoder.payload_dtypes[0])["f0"] = values
    return recs


def test_the_header_grows_at_its_end_and_both_programs_take_it_from_one_definition():
    assert (HEADER.size, HEADER_V1.size, HEADER_SIZE) == (56, 48, 56)
    assert HEADER.has_cgroup and not HEADER_V1.has_cgroup
    assert HEADER.fields[:len(HEADER_V1.fields)] == HEADER_V1.fields  # probe stays at byte 16
    assert np.dtype([(n, f) for n, f, _ in HEADER_FIELDS]).fields["cgroup"][1] == 48
    # the generic program declares no header of its own: abi writes it from HEADER_FIELDS
    struct = "struct ktui_event_header {\n" + "\n".join(f"    {d}" for _, _, d in HEADER_FIELDS) + "\n};"
    assert struct in abi.c_declarations()
    assert program_text().count("struct ktui_event_header {") == 1
    # the record the generic program writes: that header, then the payload
    assert "st->e.cgroup = ktui_cgroup_of(&st->who);" in program_text()


def test_each_event_carries_its_tasks_cgroup_each_id_named_once():
    probe = parse_probe_text("vfs_read:c:a3")
    namer = Namer({4242: NGINX, 1: "/"})
    decoder = Decoder(record_layout([probe]), [probe], [7], cgroup_name=namer)
    batch = RecordBatch(decoder, records(decoder, [4242, 1, 4242, 9, 4242], [5, 6, 7, 8, 9]))
    events = batch.events()
    assert [e.cgroup for e in events] == [NGINX, "/", NGINX, "cgroup:9", NGINX]
    assert [e.values for e in events] == [(5,), (6,), (7,), (8,), (9,)]
    assert sorted(namer.asked) == [1, 9, 4242]  # per distinct id, not per event
    assert batch.cgroup_ids() == {1, 9, 4242}
    # a slice names only its own rows
    assert [e.cgroup for e in batch.events(1, 2)] == ["/"]


def test_without_a_namer_an_events_cgroup_is_its_id():
    probe = parse_probe_text("vfs_read:c")
    decoders = SizedDecoders([probe], [3])
    recs = records(decoders.decoder(HEADER_SIZE), [77, 78])
    batch = decoders.batch(RawRecords([recs.view(f"V{HEADER_SIZE}")]))
    assert [e.cgroup for e in batch.events()] == ["cgroup:77", "cgroup:78"]


def test_a_recording_names_every_events_cgroup_and_replays_it(tmp_path):
    """A probe that fetches nothing: its events' ids are in CGRP all the same."""
    probe = parse_probe_text("vfs_read:c")
    namer = Namer({4242: NGINX, 1: "/"})
    decoder = Decoder(record_layout([probe]), [probe], [2], cgroup_name=namer)
    path = tmp_path / "h.ktrec"
    rec = Recorder(str(path), ProbeSet("h", probes=(probe,)))
    rec.on_batch(RecordBatch(decoder, records(decoder, [4242, 1, 4242])))
    rec.close()
    reader = RecordingReader(str(path))
    batches = [c.value for c in reader.chunks() if c.kind == "events"]
    assert reader.head["version"] == FORMAT_VERSION == 4
    assert reader.cgroups == {4242: NGINX, 1: "/"}
    assert [e.cgroup for b in batches for e in b.events()] == [NGINX, "/", NGINX]


def test_a_format_3_recording_made_by_the_old_writer_still_replays():
    """tests/fixtures/format3.ktrec: 48-byte headers, records of two sizes
    interleaved (EVTM), a cgroup fetch named in CGRP (make_format3.py)."""
    feed = ReplayFeed(str(FIXTURES / "format3.ktrec"), speed=0)
    events = []
    while not feed.finished:
        events += feed.drain().events()
    assert not feed.truncated
    assert [(e.probe_id, e.ts_ns, e.pid, e.comm, e.values) for e in events] == [
        (1, 1000, 500, "old0", (0,)), (2, 1001, 501, "old1", (NGINX, 10)),
        (1, 1002, 502, "old2", (20,)), (2, 1003, 503, "old3", ("/", 30)),
        (1, 1004, 504, "old4", (40,))]
    assert all(e.cgroup == "" for e in events)  # not recorded then: not a wrong name
    assert feed.stats().probes[1].hits == 3
    feed.close()


def test_ndjson_says_each_events_cgroup_and_null_where_it_was_not_recorded():
    out = io.StringIO()
    sink = NdjsonSink(out, feed=None)
    sink._write([Event(1, 5, 0, 10, 10, "dd", None, (), cgroup=NGINX),
                 Event(1, 6, 0, 10, 10, "dd", None, ())], {})
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["cgroup"] for line in lines] == [NGINX, None]
    assert lines[0]["v"] == 2  # a key added within version 2
