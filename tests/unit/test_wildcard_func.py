"""`func`: which of a wildcard's functions a hit came from. The kernel
writes its place among the probe's members (8 bytes of payload); events,
count(func) keys and a recording's replay show it by name; the plan reads
it from SRC_FUNC; only a wildcard fetches it, and no filter compares it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ktui.kernel.generic import abi
from ktui.kernel.generic.plan import build_plan
from ktui.lang.model import ProbeSet, SpecError
from ktui.lang.spec import parse_probe_text
from ktui.pipeline.recording import Recorder
from ktui.pipeline.recording_reader import RecordingReader
from ktui.record.decode import Decoder, RecordBatch, member_names
from ktui.record.layout import probe_layout, record_layout

MEMBERS = ("__x64_sys_pread64", "__x64_sys_read", "__x64_sys_readv")


def wildcard(text: str):
    return dataclasses.replace(parse_probe_text(text), members=MEMBERS)


def test_func_takes_eight_bytes_of_payload_read_from_the_functions_place():
    probe = wildcard("__x64_sys_*read*:r:func,retval count(func)")
    layout = probe_layout(probe)
    assert [(s.kind, s.offset) for s in layout.slots] == [("func", 0), ("sint", 8)]
    plan = build_plan(probe, gen=1)
    func = plan.fetch[0]
    assert (func.kind, func.src, func.width, func.dest) == (abi.K_UINT, abi.SRC_FUNC, 8, 0)
    assert plan.nfetch == 2 and plan.agg_key[0] == 0  # count(func) reads the event's own func


def test_events_name_their_function_and_a_replay_does_too(tmp_path):
    probe = wildcard("__x64_sys_*read*:r:func,retval")
    decoder = Decoder(record_layout([probe]), [probe], [4])
    recs = np.zeros(3, dtype=decoder.dtype)
    payload = recs["payload"].view(decoder.payload_dtypes[0])
    payload["f0"] = [1, 2, 7]  # 7: past the members (never written by ktui): no other function's name
    payload["f1"] = [5, 9, 11]
    live = [e.values for e in RecordBatch(decoder, recs).events()]
    assert live == [("__x64_sys_read", 5), ("__x64_sys_readv", 9), ("#7", 11)]

    path = tmp_path / "w.ktrec"
    rec = Recorder(str(path), ProbeSet("w", probes=(probe,)))
    rec.on_batch(RecordBatch(decoder, recs))
    rec.close()
    reader = RecordingReader(str(path))
    replayed = [e.values for chunk in reader.chunks() if chunk.kind == "events" for e in chunk.value.events()]
    assert replayed == live
    assert next(iter(reader.probesets.values())).probes[0].members == MEMBERS


def test_member_names_of_a_probe_whose_members_are_not_known():
    assert member_names(parse_probe_text("tcp_*:c:func"), [0, 3]) == ["#0", "#3"]


@pytest.mark.parametrize("text, words", [
    ("vfs_read:c:func", "this probe has one target"),
    ("vfs_read:c count(func)", "count: func: the function a wildcard's hit came from"),
    ('tcp_*:c:a1 if func == "tcp_sendmsg"', "a filter on a wildcard's function is not read in the kernel"),
    ("tcp_*:c hist(func)", "is not an integer"),
])
def test_func_is_refused_where_it_means_nothing(text, words):
    with pytest.raises(SpecError) as err:
        parse_probe_text(text)
    assert words in err.value.message and "\n" not in str(err.value)
