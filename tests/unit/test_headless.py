"""`ktui stream` on a FakeFeed (no kernel): how the stream loop ends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from ktui.headless import ReaderGone

REPO = Path(__file__).resolve().parents[2]

# The real run_stream, with stdout the pipe the test holds, on a probe that
# never fires: nothing is ever written, so no write can fail. The feed is
# handed in through run_stream's open_feed seam instead of a Session.
SILENT_STREAM = """
import sys
from tests.fakefeed import FakeFeed
from ktui.headless import run_stream
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec

ps = ProbeSet(name="silent", probes=(parse_spec("vfs_read:c:a3"),))
feed = FakeFeed(ps, events_per_drain=0)
print("looping", file=sys.stderr, flush=True)
status = run_stream(ps, None, interval=float(sys.argv[1]), duration=float(sys.argv[2]),
                    with_stats=sys.argv[3] == "stats", open_feed=lambda ps, options: feed)
print(f"status={status} closed={feed.closed}", file=sys.stderr, flush=True)
sys.exit(status)
"""


# Streams that should stop when their reader goes away are given an hour:
# if one is still running after this (generous, for a loaded machine), it
# did not notice. No test asserts how quickly anything happened.
NOTICE_WITHIN = 60.0
AN_HOUR = 3600.0


def start_silent_stream(interval: float, duration: float, stats: bool) -> tuple[subprocess.Popen, float]:
    """The stream, and when it was started (time.monotonic())."""
    started = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", SILENT_STREAM, str(interval), str(duration),
                          "stats" if stats else "no-stats"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, text=True)
    assert p.stderr.readline() == "looping\n"
    return p, started


def finish(p: subprocess.Popen, timeout: float = NOTICE_WITHIN) -> tuple[str, str]:
    """Its stdout (if still held) and its stderr, once it has exited."""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError(f"still streaming {timeout} s after its reader went away") from None
    return out or "", err


def test_silent_stream_notices_its_reader_is_gone():
    """`ktui stream --no-stats -e SILENT | head -1`: head exits without a
    line; ktui must stop (and detach), not run on to its duration."""
    p, _ = start_silent_stream(interval=1.0, duration=AN_HOUR, stats=False)
    p.stdout.close()  # head -1 gives up
    _, err = finish(p)
    assert p.returncode == 0, err  # what a failed write into the pipe exits with
    assert "status=0 closed=True" in err  # returned normally, feed closed (probes detached)
    assert "Traceback" not in err and "Exception ignored" not in err


def test_stats_every_hour_do_not_keep_a_readerless_stream_alive():
    """With stats, a write would find the broken pipe, but only at the next
    stats line (an hour away here); the reader check does not wait for it."""
    p, _ = start_silent_stream(interval=AN_HOUR, duration=AN_HOUR, stats=True)
    p.stdout.close()
    _, err = finish(p)
    assert p.returncode == 0, err
    assert "status=0 closed=True" in err and "Traceback" not in err


def test_silent_stream_with_a_reader_keeps_running_until_its_duration():
    """The control: the check does not stop a stream whose reader is there.
    It writes its summary line (a stream whose reader it thought gone would
    not), and it lived at least its --duration: a lower bound, which a slow
    machine only makes longer."""
    p, started = start_silent_stream(interval=1.0, duration=1.5, stats=False)
    out, err = finish(p)
    lived = time.monotonic() - started
    assert p.returncode == 0, err
    assert out.startswith('{"v": 2, "type": "summary"')
    assert lived >= 1.5, lived


def test_reader_gone_on_a_pipe():
    r, w = os.pipe()
    try:
        gone = ReaderGone(w)
        assert gone.watching and not gone()
        os.close(r)
        r = -1
        assert gone()
    finally:
        os.close(w)
        if r != -1:
            os.close(r)


def test_reader_gone_watches_only_pipes(tmp_path):
    with open(tmp_path / "out.ndjson", "w") as f:
        gone = ReaderGone(f.fileno())
        assert not gone.watching and not gone()
    with open(os.devnull, "w") as f:
        assert not ReaderGone(f.fileno()).watching


def test_stream_stops_when_no_probe_could_attach(monkeypatch, capsys):
    """`ktui stream -e 'nonexistent_fn:c' --duration 5` streamed nothing for
    5 s and exited 0 (seen through `ktui vm`): now it stops at once, exit 1,
    after the reason each probe failed."""
    import ktui.headless as headless
    from ktui.lang.model import ProbeSet
    from ktui.lang.spec import parse_spec
    from ktui.record.feed import ProbeState, ProbeStatus

    class Failed:
        closed = False

        def statuses(self):
            probe = parse_spec("nonexistent_fn:c")
            return {0: ProbeStatus(0, probe, ProbeState.FAILED, "unknown kernel function 'nonexistent_fn'")}

        def close(self):
            self.closed = True

    failed = Failed()
    monkeypatch.setattr(headless, "_open_session", lambda ps, options: failed)
    status = headless._open_session_or_status(ProbeSet("x"), None)
    assert status == 1 and failed.closed
    err = capsys.readouterr().err
    assert "unknown kernel function 'nonexistent_fn'" in err and "no probe could attach" in err


class _Status:
    def __init__(self, state, via):
        self.state, self.via = state, via


class _WaitingSession:
    """A session whose fentry probe waits for its program (`loaded`)."""

    def __init__(self, via: str) -> None:
        import threading

        from ktui.record.feed import ProbeState

        self.loaded = threading.Event()
        self._statuses = {0: _Status(ProbeState.LOADING, via)}

    def statuses(self):
        return self._statuses


def test_duration_counts_from_when_a_waiting_fentry_probe_is_live():
    """Seen in the VM: `ktui stream -e vfs_read:r:retval --duration 3` on a
    busy machine spent its 3 s while the fentry/fexit copy loaded, and
    summed up 0 hits. The duration now starts once the program is in; a
    kprobe probe counting meanwhile (through the dispatcher) does not wait."""
    import asyncio

    from ktui.headless import _stop_after, _waiting_for_program

    session = _WaitingSession("fexit")
    assert _waiting_for_program(session) is session.loaded
    assert _waiting_for_program(_WaitingSession("kprobe")) is None

    class Collector:
        stopped = None

        def stop(self):
            self.stopped = time.monotonic()

    async def run(collector):
        loop = asyncio.get_running_loop()
        _stop_after(loop, collector, 0.2, _waiting_for_program(session))
        await asyncio.sleep(1.0)  # five durations: a lower bound, never a deadline
        assert collector.stopped is None, "stopped while the probe was still waiting for its program"
        set_at = time.monotonic()
        session.loaded.set()
        deadline = time.monotonic() + NOTICE_WITHIN
        while collector.stopped is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert collector.stopped is not None, "never stopped after the program was in"
        assert collector.stopped - set_at >= 0.2  # the whole duration, counted from then

    asyncio.run(run(Collector()))
