"""Nothing emitted goes unaccounted at exit.

`ktui stream` and `ktui record`, stopped by SIGINT while a process reads
every 2 ms, must write every event the kernel put in the buffer: on stop
they detach every probe (after which no program runs), drain the buffers to
the end, and only then read the final counters. So, per probe, the events
written equal the summary's `emitted`, and `hits == emitted + lost +
counted_only` (hits while the probe only counted, its program still
loading: the first start in a VM compiles the generic program).

These are also the suite's graceful ends (test_exit_paths has the rest):
exit 0, no traceback, and nothing left in the kernel, neither kprobe nor
program nor, for the stream's return probe, which goes by fexit, tracing
link. SIGTERM, SIGHUP and a --duration take the very same way out of
ktui's own code (tests/unit/test_finish.py). Each start of ktui is most of a
minute under emulation: one start proves all of it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections import Counter

import pytest

from .conftest import HELPER, LineReader, kprobe_entries, reader_code, wait_for
from .test_exit_paths import MIXED, check_clean, events_written, replay, start
from .test_fentry import tracing_links

EVERY_2MS = reader_code(0.002)
PROBES = ["-e", "vfs_read:c:a3", "-e", "vfs_read:r:retval"]
FLOWING = 200  # events written before the SIGINT: the stop comes mid-flow


@pytest.fixture
def reader():
    p = subprocess.Popen([*HELPER, "-c", EVERY_2MS])
    yield p.pid
    p.kill()
    p.wait()


# after `lost`: what the kernel saw and could not count (unpaired 1: the
# call in flight when the return probe attached), counted while loading, via
SUMMARY_LINE = re.compile(r"ktui:   (.+): hits (\d+), emitted (\d+), lost (\d+)(?:, [^,]+)*$")


def summary_from_stderr(err: str) -> dict[str, tuple[int, int, int]]:
    out = {}
    for line in err.splitlines():
        m = SUMMARY_LINE.match(line)
        if m:
            out[m.group(1)] = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
    return out


def flowing(lines: list[bytes], probes: int) -> bool:
    """FLOWING event lines (a --no-stats stream) written, some of each of PROBES probes."""
    return len(lines) >= FLOWING and len({json.loads(x)["probe_id"] for x in list(lines)}) == probes


def json_line(line: bytes) -> dict:
    try:
        return json.loads(line)
    except ValueError:
        pytest.fail(f"stdout line is not JSON: {line[:300]!r}")


def test_stream_writes_every_emitted_event(reader, tmp_path, warm_cache):
    """warm_cache: the run's cache, which the stream's ktui finds, holds
    the fentry/fexit variant its return probe needs."""
    before, links_before = len(kprobe_entries()), tracing_links()
    probeset = tmp_path / "mixed.yaml"
    probeset.write_text(MIXED)
    p = start(["stream", "--no-stats", "--pid", str(reader), str(probeset)], stdout=subprocess.PIPE)
    wait_for(lambda: (len(kprobe_entries()) > before and len(tracing_links()) > len(links_before))
             or p.poll() is not None, "the kprobe and the fexit link", 300, every=0.5)
    stdout = LineReader(p.stdout)
    # both probes' events, not FLOWING of the first alone: on a cold first
    # start the kprobe's events pile up while the fexit copy is verified, and
    # a stop right as its link appeared could come before it wrote any
    wait_for(lambda: flowing(stdout.lines, 2) or p.poll() is not None,
             f"{FLOWING} events written, some of each probe")
    p.send_signal(signal.SIGINT)
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "Exception ignored" not in err
    out = stdout.rest(timeout=120)
    check_clean(before)
    wait_for(lambda: tracing_links() == links_before, "every tracing link to go", 60, every=0.5)
    lines = [json_line(x) for x in out.splitlines()]
    summary = lines[-1]
    assert summary["type"] == "summary"
    written = Counter(x["probe_id"] for x in lines if x["type"] == "event")
    assert summary["events"] == sum(written.values())
    assert [(p["probe"], p["via"]) for p in summary["probes"]] == [("vfs_read:c:a3", "kprobe"),
                                                                  ("vfs_read:r:retval", "fexit")]
    for probe in summary["probes"]:
        assert written[probe["probe_id"]] == probe["emitted"], probe
        assert probe["hits"] == probe["emitted"] + probe["lost"] + probe["counted_only"], probe
        assert probe["emitted"] > 0
    assert {name: tuple(v) for name, v in summary_from_stderr(err).items()} == {
        p["probe"]: (p["hits"], p["emitted"], p["lost"]) for p in summary["probes"]}


def test_record_writes_every_emitted_event(reader, tmp_path):
    out = tmp_path / "r.ktrec"
    before = len(kprobe_entries())
    p = start(["record", "--attach", "kprobe", "--pid", str(reader), *PROBES, "-o", str(out)])
    # the recorder writes its events chunk by chunk: a few of them, then the stop
    wait_for(lambda: events_written(out) >= 3 or p.poll() is not None, "recorded events")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    err = err.decode()
    assert p.returncode == 0, err
    assert "Traceback" not in err and "Exception ignored" not in err
    check_clean(before)
    assert oct(out.stat().st_mode & 0o777) == oct(0o600)  # recordings leave the machine
    events, feed = replay(out)
    assert not feed.truncated
    assert events and all(e.pid == reader for e in events)
    assert {e.values[0] for e in events if e.probe_id == 0} == {7}
    written = Counter(e.probe_id for e in events)
    final = feed.stats().probes  # the last stats the recording holds
    assert sorted(final) == [0, 1]
    for probe_id, st in final.items():
        assert written[probe_id] == st.emitted, (probe_id, st)
        assert st.hits == st.emitted + st.lost + st.counted_only, (probe_id, st)
        assert st.emitted > 0
    names = {pid_: status.probe.name for pid_, status in feed.statuses().items()}
    assert summary_from_stderr(err) == {
        names[k]: (st.hits, st.emitted, st.lost) for k, st in final.items()}


def test_a_recording_of_a_probe_that_emits_nothing_replays_its_hits(reader, tmp_path):
    """A bare probe (no fetch, no filter) only counts: the kernel sends no
    event, so a recording had no unit naming it and its replay showed no
    probe and none of its hits (as did `ktui vm record` whose probes were
    all still loading at the end). The recording now names every probe."""
    out = tmp_path / "bare.ktrec"
    before = len(kprobe_entries())
    p = start(["record", "--pid", str(reader), "-e", "vfs_read:c", "--interval", "0.2",
               "--duration", "2", "-o", str(out)])
    _, err = p.communicate(timeout=300)
    err = err.decode()
    assert p.returncode == 0, err
    check_clean(before)
    events, feed = replay(out)
    assert events == []  # it emits nothing: the case
    shown = feed.statuses()
    assert [st.probe.name for st in shown.values()] == ["vfs_read:c"]
    final = feed.stats().probes
    hits = final[next(iter(shown))].hits
    assert hits > 0
    assert summary_from_stderr(err) == {"vfs_read:c": (hits, 0, 0)}
