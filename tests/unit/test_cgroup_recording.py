"""A recording names the cgroup ids its events hold (CGRP chunks), so a
replay, which has no cgroup tree (or another machine's), shows the paths
the live session showed; an id never named replays as cgroup:<id>."""

from __future__ import annotations

import json

import numpy as np

from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_probe_text
from ktui.pipeline.recording import Recorder
from ktui.pipeline.recording_reader import RecordingReader
from ktui.record.decode import Decoder, RecordBatch, interleaved
from ktui.record.layout import HEADER_SIZE, record_layout, sized_layout


class Namer:
    """The live resolver: knows some ids, learns others later."""

    def __init__(self, paths):
        self.paths = dict(paths)
        self.asked = []

    def __call__(self, cgid):
        self.asked.append(cgid)
        return self.paths.get(cgid, f"cgroup:{cgid}")


def batch(decoder, ids):
    recs = np.zeros(len(ids), dtype=decoder.dtype)
    recs["payload"].view(decoder.payload_dtypes[0])["f0"] = ids
    return RecordBatch(decoder, recs)


def replay(path):
    """Every chunk read, then the events decoded (as the dashboard decodes
    what it shows: a CGRP chunk read by then names ids of earlier events too)."""
    reader = RecordingReader(str(path))
    batches = [chunk.value for chunk in reader.chunks() if chunk.kind == "events"]
    return reader, [e for b in batches for e in b.events()]


def chunk_kinds(path):
    data, kinds, pos = path.read_bytes(), [], 8
    while pos < len(data):
        kind, n = data[pos:pos + 4], int.from_bytes(data[pos + 4:pos + 8], "little")
        kinds.append((kind, data[pos + 8:pos + 8 + n]))
        pos += 8 + n
    return kinds


def test_a_replay_names_what_the_live_session_named(tmp_path):
    probe = parse_probe_text("vfs_read:c:cgroup")
    namer = Namer({1: "/", 4242: "system.slice/nginx.service"})
    decoder = Decoder(record_layout([probe]), [probe], [2], cgroup_name=namer)
    path = tmp_path / "c.ktrec"
    rec = Recorder(str(path), ProbeSet("c", probes=(probe,)))
    rec.on_batch(batch(decoder, [4242, 1, 9, 4242]))
    namer.paths[9] = "user.slice"  # learnt by a later walk: named with the next batch
    rec.on_batch(batch(decoder, [9, 4242]))
    rec.close()
    tables = [json.loads(body)["cgroups"] for kind, body in chunk_kinds(path) if kind == b"CGRP"]
    assert tables == [{"1": "/", "4242": "system.slice/nginx.service"}, {"9": "user.slice"}]
    reader, events = replay(path)
    assert [e.values[0] for e in events] == ["system.slice/nginx.service", "/", "user.slice",
                                             "system.slice/nginx.service", "user.slice",
                                             "system.slice/nginx.service"]
    assert reader.cgroups == {1: "/", 4242: "system.slice/nginx.service", 9: "user.slice"}


def test_an_id_never_named_replays_as_its_number_and_records_without_cgroups_write_no_table(tmp_path):
    probe = parse_probe_text("vfs_read:c:cgroup")
    plain = parse_probe_text("vfs_read:c:a3")
    path = tmp_path / "c.ktrec"
    rec = Recorder(str(path), ProbeSet("c", probes=(probe, plain)))
    small = Decoder(sized_layout([probe, plain], HEADER_SIZE + 8), [probe, plain], [2, 3], cgroup_name=Namer({}))
    recs = np.zeros(2, dtype=small.dtype)
    recs["probe"] = [0, 1]
    recs["payload"][0:1].view(small.payload_dtypes[0])["f0"] = 77
    recs["payload"][1:2].view(small.payload_dtypes[1])["f0"] = 5
    # two parts of one drain, interleaved: each part's ids are looked for
    rec.on_batch(interleaved([RecordBatch(small, recs[:1]), RecordBatch(small, recs[1:])],
                             np.array([1, 0], dtype=np.uint8)))
    rec.close()
    assert not any(kind == b"CGRP" for kind, _ in chunk_kinds(path))
    _, events = replay(path)
    assert [e.values for e in events] == [(5,), ("cgroup:77",)]
