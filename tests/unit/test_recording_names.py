"""A recording of probes that fetch by name keeps what the kernel's BTF
said of each name (fetch type, C type): the replay has no kernel to ask,
and without them a negative int would replay as a huge unsigned number."""

from __future__ import annotations

import numpy as np

from ktui.lang.bind import fetch_types, with_fetch_types
from ktui.lang.model import Binding, Named, ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline.recording import Recorder
from ktui.pipeline.recording_reader import RecordingReader
from ktui.record.decode import Decoder, RecordBatch
from ktui.record.layout import record_layout


def bound(spec: str, *types: tuple[str, str]):
    """`spec` as lang.bind would leave it (binding expressions need a kernel;
    a replay only sees types)."""
    probe = parse_spec(spec)
    fetches = []
    for fetch, (ftype, ctype) in zip(probe.fetches, types):
        expr = Named(fetch.expr.param, fetch.expr.steps, binding=Binding(None, ftype, ctype))
        fetches.append(type(fetch)(expr, fetch.type, fetch.label))
    return type(probe)(probe.target, probe.kind, tuple(fetches))


def test_a_recording_keeps_the_types_of_names(tmp_path):
    probe = bound("do_sys_openat2:c:dfd,how->flags", ("s32", "int"), ("u64", "u64"))
    decoder = Decoder(record_layout([probe]), [probe], [3])
    recs = np.zeros(1, dtype=decoder.dtype)
    payload = recs[0:1]["payload"].view(decoder.payload_dtypes[0])
    payload["f0"] = -100  # AT_FDCWD as the kernel read it: an int
    payload["f1"] = 0o100
    path = tmp_path / "n.ktrec"
    rec = Recorder(str(path), ProbeSet("names", probes=(probe,)))
    rec.on_batch(RecordBatch(decoder, recs))
    rec.close()

    reader = RecordingReader(str(path))
    events = []
    for chunk in reader.chunks():
        if chunk.kind == "events":
            events += chunk.value.events()
    replayed = next(iter(reader.probesets.values())).probes[0]
    assert str(replayed) == str(probe)
    assert [f.ctype for f in replayed.fetches] == ["int", "u64"]
    assert [f.effective_type for f in replayed.fetches] == ["s32", "u64"]
    assert events[0].values == (-100, 0o100)


def test_fetch_types_round_trip_and_refuse_junk():
    probe = bound("vfs_read:c:count", ("u64", "size_t"))
    kept = fetch_types(probe)
    assert kept == [["u64", "size_t"]]
    bare = parse_spec("vfs_read:c:count")
    assert with_fetch_types(bare, kept).fetches[0].ctype == "size_t"
    for junk in ([["u64"]], [["int", "x"]], "u64", [None, None], [[1, 2]]):
        assert with_fetch_types(bare, junk).fetches[0].ctype is None
