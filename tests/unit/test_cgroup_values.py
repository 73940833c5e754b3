"""A `cgroup` value from record to screen: 8 bytes of payload holding the
task's cgroup id, named by the decoder's namer (unknown ids as
`cgroup:<id>`), shortened where the path names a container's scope."""

from __future__ import annotations

import numpy as np
import pytest

from ktui.lang.spec import parse_probe_text
from ktui.pipeline.format import fetch_pairs
from ktui.pipeline.value_views import key_text
from ktui.record.cgroups import names_of, short
from ktui.record.decode import Decoder, RecordBatch, SizedDecoders
from ktui.record.layout import probe_layout, record_layout

DOCKER = "system.slice/docker-" + "0123456789ab" + "cd" * 26 + ".scope"
PATHS = {1: "/", 4242: "system.slice/nginx.service", 77: DOCKER}


def batch_of(probe, ids, namer=PATHS.get):
    decoder = Decoder(record_layout([probe]), [probe], [3], cgroup_name=lambda i: namer(i) or f"cgroup:{i}")
    recs = np.zeros(len(ids), dtype=decoder.dtype)
    payload = recs["payload"].view(decoder.payload_dtypes[0])
    payload["f0"] = ids
    payload["f1"] = range(len(ids))
    recs["cgroup"] = 77  # the header's: every event's task's, whatever it fetches
    return RecordBatch(decoder, recs)


def test_cgroup_takes_eight_bytes_of_payload():
    layout = probe_layout(parse_probe_text("vfs_read:c:cgroup,a3,pid"))
    assert [(s.kind, s.offset) for s in layout.slots] == [("cgroup", 0), ("uint", 8), ("header", 0)]


def test_events_carry_the_path_and_an_unknown_id_says_so():
    batch = batch_of(parse_probe_text("vfs_read:c:cgroup,a3"), [4242, 1, 9, 4242])
    assert [e.values for e in batch.events()] == [
        ("system.slice/nginx.service", 0), ("/", 1), ("cgroup:9", 2), ("system.slice/nginx.service", 3)]
    assert batch.cgroup_ids() == {4242, 1, 9, 77}
    assert {e.cgroup for e in batch.events()} == {DOCKER}


def test_without_a_namer_every_id_is_unknown():
    probe = parse_probe_text("vfs_read:c:cgroup,a3")
    decoders = SizedDecoders([probe], [3])
    assert decoders.decoder(64).cgroup_name is None
    assert names_of(None, [5, 5]) == ["cgroup:5", "cgroup:5"]


def test_each_distinct_id_is_named_once_per_batch():
    asked = []
    names = names_of(lambda i: asked.append(i) or f"p{i}", [3, 3, 4, 3])
    assert names == ["p3", "p3", "p4", "p3"] and asked == [3, 4]


@pytest.mark.parametrize("path, shown", [
    (DOCKER, "docker:0123456789ab"),
    ("kubepods.slice/kubepods-burstable.slice/cri-containerd-" + "ab" * 32 + ".scope", "containerd:abababababab"),
    ("machine.slice/libpod-" + "ef" * 32 + ".scope", "podman:efefefefefef"),
    ("docker/" + "12" * 32, "docker:121212121212"),
    ("system.slice/docker.service", "system.slice/docker.service"),
    ("system.slice/docker-abc.scope", "system.slice/docker-abc.scope"),  # no container id: as it is
    (DOCKER + "/init.scope", DOCKER + "/init.scope"),
    ("/", "/"),
    ("cgroup:123", "cgroup:123"),
])
def test_short_says_what_the_path_says(path, shown):
    assert short(path) == shown


def test_the_event_pane_and_the_top_values_shorten_a_container_scope():
    probe = parse_probe_text("vfs_read:c:cgroup,a3 count(cgroup,a3)")
    assert fetch_pairs(probe, (DOCKER, 5)) == [("cgroup", '"docker:0123456789ab"'), ("a3", "5")]
    assert fetch_pairs(probe, ("sys\x1b.slice", 5))[0] == ("cgroup", '"sys\\x1b.slice"')  # a name is escaped
    assert key_text((DOCKER, 5), probe.agg.keys) == "docker:0123456789ab, 5"
    assert key_text((DOCKER, 5)) == f"{DOCKER}, 5"  # a key not known to be a cgroup is shown as it is
