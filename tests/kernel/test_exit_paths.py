"""`ktui stream` / `ktui record` ended every way a process can end: nothing
stays in the kernel, graceful ends exit 0 without a traceback, and a
recording is complete (or, after SIGKILL, truncated but replayable).

The graceful end by SIGINT is test_accounting's, for the stream and the
recording: one start of ktui there proves it whole (each start is most of
a minute under emulation). SIGTERM and SIGHUP take the very same way out of
ktui's own code (headless.StopSignals), which the host proves for all
three (tests/unit/test_finish.py); what the kernel does is the same. Here:
SIGKILL, where the kernel alone cleans up (one stream holding every kind
of thing ktui leaves in the kernel: a kprobe, fexit's tracing links, the
run-time statistics), and a reader that goes away."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from ktui.pipeline.replay import ReplayFeed

from .conftest import LineReader, kprobe_entries, ktui_bpf_programs, wait_for
from .test_cost import cost_line, stats_enabled
from .test_fentry import tracing_links

KTUI = [sys.executable, "-m", "ktui"]
# the call by kprobe, the return by fexit (its fexit link and fentry half):
# test_accounting's graceful ends use the same set
MIXED = """name: mixed
probes:
  - spec: vfs_read:c:a3
    attach: kprobe
  - spec: vfs_read:r:retval
    attach: fentry
"""


def start(args, **kw):
    return subprocess.Popen([*KTUI, *args], stderr=subprocess.PIPE, **kw)


def check_clean(before_kp: int) -> None:
    wait_for(lambda: len(kprobe_entries()) == before_kp, "kprobes to go", timeout=60)
    wait_for(lambda: ktui_bpf_programs() == [], "ktui's programs to go", timeout=60)


def test_stream_ended_by_sigkill(spinner, warm_cache, tmp_path):
    """ktui's code never runs again: the kernel alone drops the kprobe, the
    tracing links, every ktui program, and the run-time statistics that
    --cost turned on (their fd closes with the process)."""
    before, links = len(kprobe_entries()), tracing_links()
    assert ktui_bpf_programs() == [] and stats_enabled() == 0
    path = tmp_path / "killed.yaml"
    path.write_text(MIXED)
    log = tmp_path / "ktui.log"
    p = start(["stream", str(path), "--cost", "--pid", str(spinner), "--interval", "0.2", "--log", str(log)],
              stdout=subprocess.PIPE)
    out = LineReader(p.stdout)
    try:
        # the event loop runs (a stats line with the probes' cost), every
        # probe is in: the kprobe, fexit and its fentry half
        wait_for(lambda: (cost_line(list(out.lines)) and len(kprobe_entries()) > before
                          and len(tracing_links()) >= len(links) + 2) or p.poll() is not None,
                 "the probes and a stats line with their cost", 300, every=0.5)
        assert p.poll() is None, f"stderr: {p.stderr.read().decode()[-2000:]}; log: {log.read_text()[-3000:]}"
        assert stats_enabled() == 1
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == -signal.SIGKILL
    check_clean(before)
    wait_for(lambda: tracing_links() == links, "every tracing link to go", 60, every=0.5)
    assert stats_enabled() == 0


def test_stream_into_a_closed_pipe(spinner):
    before = len(kprobe_entries())
    p = start(["stream", "--attach", "kprobe", "-e", "vfs_read:c:a3", "--pid", str(spinner), "--interval", "0.2"],
              stdout=subprocess.PIPE)
    wait_for(lambda: len(kprobe_entries()) > before or p.poll() is not None, "probes")
    assert p.stdout.readline()  # `| head -n 1`
    p.stdout.close()
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    check_clean(before)
    assert p.returncode == 0, err
    assert "Traceback" not in err and "Exception ignored" not in err


def test_silent_stream_into_a_closed_pipe():
    """`ktui stream --no-stats ... | head -1` on a probe that never fires:
    nothing is written, so no write fails; ktui still notices the reader is
    gone (headless.ReaderGone), detaches and exits 0.
    Host twin on a FakeFeed: tests/unit/test_headless.py."""
    sleeper = subprocess.Popen(["sleep", "600"])  # never calls vfs_read
    try:
        before = len(kprobe_entries())
        p = start(["stream", "--no-stats", "--attach", "kprobe", "-e", "vfs_read:c:a3", "--pid", str(sleeper.pid)],
                  stdout=subprocess.PIPE)
        wait_for(lambda: len(kprobe_entries()) > before or p.poll() is not None, "probes")
        # closed whenever: before ktui watches its reader (poll() on the
        # pipe then reports the error at once) or after, nothing is written
        p.stdout.close()
        # No --duration: it runs forever unless it notices. A generous wait
        # for that (the VM may share its host), not a bound on how fast.
        try:
            err = p.communicate(timeout=60)[1].decode()
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise AssertionError("ran on after its reader went away") from None
        check_clean(before)
        assert p.returncode == 0, err
        assert "Traceback" not in err and "Exception ignored" not in err
    finally:
        sleeper.kill()
        sleeper.wait()


def has_events(path: Path) -> bool:
    return events_written(path) > 0


def events_written(path: Path) -> int:
    """The recording's chunks of events so far (one per drained batch)."""
    return path.read_bytes().count(b"EVTS") if path.exists() else 0


def replay(path: Path):
    feed = ReplayFeed(str(path), speed=0)
    events = []
    while not feed.finished:
        events += feed.drain().events()
    return events, feed


def test_record_ended_by_sigkill(spinner, tmp_path):
    out = tmp_path / "r.ktrec"
    before = len(kprobe_entries())
    p = start(["record", "--attach", "kprobe", "-e", "vfs_read:c:a3", "--pid", str(spinner), "--interval", "0.2",
               "-o", str(out)])
    wait_for(lambda: has_events(out) or p.poll() is not None, "recorded events")
    p.send_signal(signal.SIGKILL)
    p.communicate(timeout=60)
    check_clean(before)
    assert oct(out.stat().st_mode & 0o777) == oct(0o600)
    events, feed = replay(out)
    # truncated, and replayable up to where it stopped
    assert events and all(e.values[0] == 7 and e.pid == spinner for e in events)
    assert feed.truncated
