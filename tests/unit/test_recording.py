"""Recordings without a kernel: round trips, truncation at every byte, corrupt
files, and where a recording may be written."""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline.recording import (
    MAGIC,
    Recorder,
    RecordingError,
    RecordingExists,
)
from ktui.pipeline.recording_reader import RecordingReader
from ktui.pipeline.replay import ReplayFeed
from ktui.record.decode import Decoder, MultiBatch, RecordBatch
from ktui.record.feed import ProbeStats, StatsSnapshot
from ktui.record.histogram import HIST_SLOTS
from ktui.record.layout import record_layout

KTUI = [sys.executable, "-m", "ktui"]
SPECS = ["vfs_read:c:a3", "vfs_read:r:retval:s64", "do_sys_openat2:c:fname=+0(a2):ustring"]


def make_decoder(ids=(10, 11, 12)):
    probes = [parse_spec(s) for s in SPECS]
    return Decoder(record_layout(probes), probes, list(ids))


def make_batch(decoder, start: int, n: int) -> RecordBatch:
    """n records cycling through the probes, with values derived from the index."""
    recs = np.zeros(n, dtype=decoder.dtype)
    for k in range(n):
        i = start + k
        local = i % 3
        recs[k]["ts"] = 1_000_000 + i * 1000
        recs[k]["latency"] = 50 + i if local == 1 else 0
        recs[k]["probe"] = local
        recs[k]["cpu"] = i % 2
        recs[k]["pid"] = 4242
        recs[k]["tid"] = 4243
        recs[k]["comm"] = b"work\xc3\xa9"
        payload = recs[k : k + 1]["payload"].view(decoder.payload_dtypes[local])
        if local == 0:
            payload["f0"] = i
        elif local == 1:
            payload["f0"] = -i
        else:
            payload["f0"] = f"/tmp/f{i}".encode()
    return RecordBatch(decoder, recs)


def expected_values(i: int):
    return [(i,), (-i,), (f"/tmp/f{i}",)][i % 3]


def stats_for(n: int) -> StatsSnapshot:
    return StatsSnapshot(float(n), {
        10: ProbeStats(10, hits=n, lost=1, emitted=n - 1, hist=(), errnos=(),
                       top_comms=(("worké", n),)),
        11: ProbeStats(11, hits=n, lost=0, emitted=n, hist=(0,) * 6 + (n - 2, 2) + (0,) * 57,
                       errnos=((9, 2),), top_comms=()),
    })


BATCHES = [(0, 5), (5, 7), (12, 4), (16, 9)]  # (start, n)


def write_recording(path: Path, close: bool = True, overwrite: bool = False) -> Recorder:
    dec = make_decoder()
    rec = Recorder(str(path), ProbeSet("synthetic", probes=dec.probes), overwrite=overwrite)
    for j, (start, n) in enumerate(BATCHES):
        if j == 2:  # a MultiBatch goes in as its parts
            rec.on_batch(MultiBatch([make_batch(dec, start, 2), make_batch(dec, start + 2, n - 2)]))
        else:
            rec.on_batch(make_batch(dec, start, n))
        rec.on_stats(stats_for(start + n))
    if close:
        rec.close()
    return rec


def replay_all(path) -> tuple[list, ReplayFeed]:
    feed = ReplayFeed(str(path), speed=0)
    events = []
    while not feed.finished:
        events += feed.drain().events()
    return events, feed


@pytest.fixture
def recording(tmp_path) -> Path:
    path = tmp_path / "r.ktrec"
    write_recording(path)
    return path


def test_round_trip_events_and_stats(recording):
    events, feed = replay_all(recording)
    total = sum(n for _, n in BATCHES)
    assert len(events) == total
    for i, e in enumerate(events):
        assert e.probe_id == 10 + i % 3
        assert e.values == expected_values(i)
        assert e.ts_ns == 1_000_000 + i * 1000
        assert e.pid == 4242 and e.tid == 4243 and e.cpu == i % 2
        assert e.comm == "worké"
        assert e.latency_ns == (50 + i if i % 3 == 1 else None)
    assert feed.stats() == stats_for(total)
    assert not feed.truncated
    assert [st.probe.spec_text for st in feed.statuses().values()] == SPECS
    assert feed.system_info().notes == ()


def test_file_mode_is_0600_even_over_an_existing_file(tmp_path):
    path = tmp_path / "r.ktrec"
    path.write_text("old")
    path.chmod(0o644)
    write_recording(path, overwrite=True)  # ktui record --force
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes().startswith(MAGIC)


def test_existing_file_is_refused_and_untouched(tmp_path):
    """Recording twice into the same name is a mistake more often than not:
    the first recording stays unless overwriting is asked for."""
    path = tmp_path / "r.ktrec"
    write_recording(path)
    first = path.read_bytes()
    with pytest.raises(RecordingExists, match=r"r\.ktrec: already exists$"):
        write_recording(path)
    assert path.read_bytes() == first
    write_recording(path, overwrite=True)
    assert replay_all(path)[0]  # overwritten with a complete recording


def test_record_refuses_an_existing_file_in_one_line_exit_1(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from ktui import cli
    from ktui.kernel.machine import preflight

    monkeypatch.setattr(preflight, "check_environment", lambda **kw: [])
    path = tmp_path / "r.ktrec"
    path.write_bytes(b"an earlier recording")
    r = CliRunner().invoke(cli.main, ["record", "-e", "vfs_read:c", "-o", str(path)])
    assert r.exit_code == 1, r.output
    assert r.output == f"ktui: {path}: already exists; use --force to overwrite it\n"
    assert path.read_bytes() == b"an earlier recording"


@pytest.mark.parametrize("flag", ["--force", "-f"])
def test_record_force_flag_reaches_run_record(tmp_path, monkeypatch, flag):
    from click.testing import CliRunner

    import ktui.headless as headless
    from ktui import cli
    from ktui.kernel.machine import preflight

    monkeypatch.setattr(preflight, "check_environment", lambda **kw: [])
    seen = {}
    monkeypatch.setattr(headless, "run_record", lambda *a, **kw: seen.update(kw) or 0)
    out = str(tmp_path / "r.ktrec")
    assert CliRunner().invoke(cli.main, ["record", "-e", "vfs_read:c", "-o", out, flag]).exit_code == 0
    assert seen["force"] is True
    assert CliRunner().invoke(cli.main, ["record", "-e", "vfs_read:c", "-o", out]).exit_code == 0
    assert seen["force"] is False


def test_record_with_force_overwrites_on_a_fake_feed(tmp_path):
    """run_record end to end without a kernel (its open_feed seam)."""
    from ktui.headless import run_record
    from tests.fakefeed import FakeFeed

    path = tmp_path / "r.ktrec"
    path.write_bytes(b"an earlier recording")
    ps = ProbeSet("x", probes=(parse_spec("vfs_read:c:a3"),))
    feeds = []

    def open_fake(ps, options):
        feeds.append(FakeFeed(ps))
        return feeds[-1]

    assert run_record(ps, None, str(path), 0.05, 0.2, open_feed=open_fake) == 1
    assert path.read_bytes() == b"an earlier recording" and not feeds  # refused before any probe
    assert run_record(ps, None, str(path), 0.05, 0.2, force=True, open_feed=open_fake) == 0
    assert feeds[0].closed
    events, feed = replay_all(path)  # FakeFeed batches are not raw records: stats only
    assert path.read_bytes().startswith(MAGIC) and not feed.truncated  # END was written
    assert feed.stats().probes[1].hits > 0
    feed.close()


def test_a_recording_without_events_still_names_its_probes(tmp_path):
    """The probes went into a recording only with their first events: the
    audit's recording from a VM (2 minutes, every hit counted while the
    program loaded, no event) replayed as "probes 0", its 3,800 hits
    nowhere. They are written when the session starts."""
    from ktui.headless import run_record
    from tests.fakefeed import FakeFeed

    path = tmp_path / "quiet.ktrec"
    specs = ("vfs_read:c:a3", "vfs_read:r:retval", "tcp_sendmsg:c")
    ps = ProbeSet("quiet", probes=tuple(parse_spec(s) for s in specs))
    # FakeFeed batches are not raw records: nothing reaches the file as events
    assert run_record(ps, None, str(path), 0.05, 0.2, open_feed=lambda ps, options: FakeFeed(ps)) == 0
    events, feed = replay_all(path)
    assert events == []
    names = {s.probe.name: i for i, s in feed.statuses().items()}
    assert set(names) == set(specs)
    assert feed.stats().probes[names["tcp_sendmsg:c"]].hits > 0  # its numbers belong to a probe shown
    feed.close()
    # Converted to NDJSON, its stats and summary are there: the conversion
    # stopped before its first drain when the recording held no event (the
    # audit's VM recordings gave one line, `"probes": []`)
    out = stream_from(path)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    assert [x["type"] for x in lines][-1] == "summary" and any(x["type"] == "stats" for x in lines)
    summary = {p["probe"]: p for p in lines[-1]["probes"]}
    assert set(summary) == set(specs) and summary["tcp_sendmsg:c"]["hits"] > 0


def test_symlink_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "victim"
    target.write_text("precious")
    link = tmp_path / "r.ktrec"
    link.symlink_to(target)
    with pytest.raises(RecordingError, match="symlink"):
        write_recording(link)
    assert target.read_text() == "precious"


def test_fifo_and_device_are_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(RecordingError, match="not a regular file"):
        write_recording(fifo)  # and does not block waiting for a reader
    with pytest.raises(RecordingError, match="not a regular file"):
        write_recording(Path("/dev/null"))


def test_directory_is_refused(tmp_path):
    with pytest.raises(RecordingError):
        write_recording(tmp_path)


def chunk_offsets(data: bytes) -> list[tuple[bytes, int, int]]:
    """(kind, start, end) of every chunk."""
    out, pos = [], len(MAGIC)
    while pos < len(data):
        kind, length = struct.unpack_from("<4sI", data, pos)
        out.append((kind, pos, pos + 8 + length))
        pos += 8 + length
    return out


def test_truncated_at_every_byte_of_the_last_chunks(recording, tmp_path, monkeypatch):
    # Every cut below keeps the same whole header, whose probes (YAML) were
    # parsed 4,000 times over, 40% of the test's time: parsed once here,
    # the same frozen ProbeSet each time (what the header reads as is
    # test_round_trip_events_and_stats's to check).
    from functools import lru_cache

    from ktui.lang import probeset

    monkeypatch.setattr(probeset, "loads_probeset", lru_cache(probeset.loads_probeset))
    data = recording.read_bytes()
    chunks = chunk_offsets(data)
    assert [c[0] for c in chunks][-3:] == [b"EVTS", b"STAT", b"END "]
    # events in the file up to each chunk end
    evts_ends = []
    seen = 0
    for kind, start, end in chunks:
        if kind == b"EVTS":
            seen += (end - start - 12) // make_decoder().dtype.itemsize
        evts_ends.append((end, seen))
    first = chunks[-4][1]  # from the second-to-last EVTS chunk on
    cut = tmp_path / "cut.ktrec"
    cut.write_bytes(data)
    # longest first, one byte off at a time: a truncate(2) and no rewrite
    for size in reversed(range(first, len(data))):
        os.truncate(cut, size)
        events, feed = replay_all(cut)
        complete = max((n for end, n in evts_ends if end <= size), default=0)
        assert len(events) == complete, size
        assert [e.values for e in events] == [expected_values(i) for i in range(complete)]
        assert feed.truncated, size
        assert feed.system_info().notes  # the dashboard can say so


def test_cut_inside_the_magic_or_header(recording, tmp_path):
    """A file cut before its header is whole cannot say what it is (not even
    its format version): refused in one line, where it replayed as an empty
    dashboard saying `kernel ?`. Once the header is whole, what follows is
    replayed as far as it goes."""
    data = recording.read_bytes()
    cut = tmp_path / "cut.ktrec"
    cut.write_bytes(b"")
    with pytest.raises(RecordingError, match="empty file, not a ktui recording"):
        ReplayFeed(str(cut), speed=0)
    head_end = chunk_offsets(data)[1][1]
    for size in range(1, head_end):
        cut.write_bytes(data[:size])
        with pytest.raises(RecordingError, match=f"cut off inside its header \\({size} bytes\\)"):
            ReplayFeed(str(cut), speed=0)
    cut.write_bytes(data[:head_end])
    events, feed = replay_all(cut)
    assert events == [] and feed.truncated


def test_an_unknown_magic_version_names_the_formats(recording, tmp_path):
    """`KTUIREC` and another version byte: a ktui recording this ktui cannot
    read, said as such (it read "not a ktui recording")."""
    data = recording.read_bytes()
    other = tmp_path / "other.ktrec"
    other.write_bytes(MAGIC[:-1] + b"\x02" + data[len(MAGIC):])
    with pytest.raises(RecordingError) as caught:
        ReplayFeed(str(other), speed=0)
    assert "magic version 2" in str(caught.value) and "formats 1, 2, 3" in str(caught.value)
    garbage = tmp_path / "garbage.ktrec"
    garbage.write_bytes(b"XXXXXXXX" + data[len(MAGIC):])
    with pytest.raises(RecordingError, match="not a ktui recording"):
        ReplayFeed(str(garbage), speed=0)


def test_recorder_killed_without_close_is_truncated_but_replays(tmp_path):
    path = tmp_path / "r.ktrec"
    rec = write_recording(path, close=False)
    rec.file.flush()  # what a SIGKILL leaves: every flushed chunk, no END
    events, feed = replay_all(path)
    assert len(events) == sum(n for _, n in BATCHES)
    assert feed.truncated


def corrupt(data: bytes, kind: bytes, body: bytes) -> bytes:
    """Replace the body of the first chunk of `kind`."""
    for k, start, end in chunk_offsets(data):
        if k == kind:
            return data[:start] + struct.pack("<4sI", kind, len(body)) + body + data[end:]
    raise AssertionError(kind)


@pytest.mark.parametrize("kind,body", [
    (b"HEAD", b"[]"),
    (b"HEAD", b"\xff\xfe"),
    (b"HEAD", b"[" * 100_000),
    (b"HEAD", b'{"version": 99}'),
    (b"UNIT", b'{"unit": 0, "ids": [], "probeset": "name: x\\nprobes: [vfs_read:c]\\n"}'),
    (b"UNIT", b'{"unit": 0, "ids": [1], "probeset": "name: x\\nprobes: [\\"vfs_read:c;\\"]\\n"}'),
    (b"UNIT", b'{"unit": "a", "ids": [1]}'),
    (b"EVTS", b"\x00\x00"),
    (b"EVTS", b"\x07\x00\x00\x00"),
    (b"EVTS", b"\x00\x00\x00\x00" + b"\x01" * 13),
    (b"STAT", b'{"probes": {"1": {"probe_id": 1}}}'),
    (b"STAT", b"7"),
])
def test_corrupt_chunks_are_one_recording_error(recording, tmp_path, kind, body):
    bad = tmp_path / "bad.ktrec"
    bad.write_bytes(corrupt(recording.read_bytes(), kind, body))
    with pytest.raises(RecordingError) as info:
        replay_all(bad)
    assert "\n" not in str(info.value)


def test_huge_chunk_length_is_refused(recording, tmp_path):
    data = recording.read_bytes()
    bad = tmp_path / "bad.ktrec"
    bad.write_bytes(data[: len(MAGIC)] + struct.pack("<4sI", b"HEAD", 0xFFFFFFFF))
    with pytest.raises(RecordingError, match="corrupt chunk"):
        ReplayFeed(str(bad), speed=0)


def test_unknown_chunk_kinds_are_skipped(recording, tmp_path):
    data = recording.read_bytes()
    end_of_head = chunk_offsets(data)[0][2]
    newer = tmp_path / "newer.ktrec"
    newer.write_bytes(data[:end_of_head] + struct.pack("<4sI", b"XTRA", 3) + b"abc"
                      + data[end_of_head:])
    events, feed = replay_all(newer)
    assert len(events) == sum(n for _, n in BATCHES) and not feed.truncated


def test_a_format_1_recording_replays_with_its_histograms_padded(recording, tmp_path):
    """Format 1 kept 64 slots written by bcc's bpf_log2l: slot k held
    2^(k-1)..2^k-1 ns, as now. They come back with 65 slots, counts in
    place."""
    old_hist = [0] * 64
    old_hist[11] = 5  # 1024..2047 ns
    old_hist[63] = 1
    stats = {"time": 3.0, "probes": {"11": {
        "probe_id": 11, "hits": 6, "lost": 0, "emitted": 6, "hist": old_hist,
        "errnos": [], "top_comms": []}}}
    data = corrupt(recording.read_bytes(), b"HEAD", json.dumps(
        {"version": 1, "created": 0, "kernel": "6.1", "probeset": "old"}).encode())
    data = corrupt(data, b"STAT", json.dumps(stats).encode())  # the first one
    old = tmp_path / "old.ktrec"
    old.write_bytes(data)
    events, feed = replay_all(old)
    assert len(events) == sum(n for _, n in BATCHES)
    seen = [c.value for c in RecordingReader(str(old)).chunks() if c.kind == "stats"][0]
    hist = seen.probes[11].hist
    assert len(hist) == HIST_SLOTS
    assert hist[11] == 5 and hist[63] == 1 and sum(hist) == 6


def test_a_recording_of_an_unknown_format_is_refused(recording, tmp_path):
    bad = tmp_path / "new.ktrec"
    bad.write_bytes(corrupt(recording.read_bytes(), b"HEAD", b'{"version": 5}'))
    with pytest.raises(RecordingError, match=r"format 5 is not one this ktui reads \(formats 1, 2, 3, 4; it writes 4\)"):
        replay_all(bad)


def test_reader_reports_head(recording):
    reader = RecordingReader(str(recording))
    kinds = [c.kind for c in reader.chunks()]
    assert kinds[0] == "head" and reader.head["probeset"] == "synthetic"
    assert reader.complete and not reader.truncated


# ---------------------------------------------------------------- the CLI


def stream_from(path) -> subprocess.CompletedProcess:
    return subprocess.run([*KTUI, "stream", "--from", str(path)], capture_output=True,
                          text=True, timeout=60)


def test_stream_from_recording(recording):
    out = stream_from(recording)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    events = [x for x in lines if x["type"] == "event"]
    assert len(events) == sum(n for _, n in BATCHES)
    assert events[2]["values"] == {"fname": "/tmp/f2"}
    assert lines[-1]["type"] == "summary" and lines[-1]["events"] == len(events)
    assert out.stderr == ""


def test_stream_from_truncated_recording_gives_events_and_a_note(recording, tmp_path):
    data = recording.read_bytes()
    cut = tmp_path / "cut.ktrec"
    cut.write_bytes(data[: chunk_offsets(data)[-3][1] + 20])  # inside the last EVTS
    out = stream_from(cut)
    assert out.returncode == 0
    events = [x for x in map(json.loads, out.stdout.splitlines()) if x["type"] == "event"]
    assert len(events) == sum(n for _, n in BATCHES[:-1])
    assert out.stderr.count("\n") == 1 and "cut off" in out.stderr


@pytest.mark.parametrize("content", [b"", b"garbage\n", MAGIC[:-1] + b"\x02", b"\x00" * 4096])
def test_stream_from_garbage_is_one_line_exit_1(tmp_path, content):
    bad = tmp_path / "bad.ktrec"
    bad.write_bytes(content)
    out = stream_from(bad)
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"ktui: {bad}")


def test_stream_from_corrupt_chunk_is_one_line_exit_1(recording, tmp_path):
    bad = tmp_path / "bad.ktrec"
    bad.write_bytes(corrupt(recording.read_bytes(), b"EVTS", b"\x00\x00"))
    out = stream_from(bad)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1


def test_record_onto_a_symlink_is_refused_by_the_cli(tmp_path):
    target = tmp_path / "victim"
    target.write_text("precious")
    link = tmp_path / "out.ktrec"
    link.symlink_to(target)
    from ktui.headless import run_record
    from ktui.kernel.session import SessionOptions

    ps = ProbeSet("x", probes=(parse_spec("vfs_read:c"),))
    assert run_record(ps, SessionOptions(), str(link), 1.0, 0.0) == 1
    assert target.read_text() == "precious"
