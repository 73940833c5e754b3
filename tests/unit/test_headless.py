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


def start_silent_stream(interval: float, duration: float, stats: bool) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", SILENT_STREAM, str(interval), str(duration),
                          "stats" if stats else "no-stats"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, text=True)
    assert p.stderr.readline() == "looping\n"
    time.sleep(0.5)  # into the collector's loop
    return p


def finish(p: subprocess.Popen, timeout: float) -> tuple[float, str, str]:
    """Seconds until it exited, its stdout (if still held) and its stderr."""
    start = time.monotonic()
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError(f"still streaming {timeout} s after its reader went away") from None
    return time.monotonic() - start, out or "", err


def test_silent_stream_notices_its_reader_is_gone():
    """`ktui stream --no-stats -e SILENT | head -1`: head exits without a
    line; ktui must stop (and detach) within about a second, not run on."""
    p = start_silent_stream(interval=1.0, duration=60.0, stats=False)
    p.stdout.close()  # head -1 gives up
    elapsed, _, err = finish(p, timeout=10)
    assert elapsed < 2.0, elapsed
    assert p.returncode == 0, err  # what a failed write into the pipe exits with
    assert "status=0 closed=True" in err  # returned normally, feed closed (probes detached)
    assert "Traceback" not in err and "Exception ignored" not in err


def test_stats_every_minute_do_not_keep_a_readerless_stream_alive():
    """With stats, a write would find the broken pipe, but only at the next
    stats line (a minute away here); the reader check does not wait for it."""
    p = start_silent_stream(interval=60.0, duration=60.0, stats=True)
    p.stdout.close()
    elapsed, _, err = finish(p, timeout=10)
    assert elapsed < 2.0 and p.returncode == 0, err
    assert "status=0 closed=True" in err and "Traceback" not in err


def test_silent_stream_with_a_reader_keeps_running_until_its_duration():
    """The control: the check does not stop a stream whose reader is there."""
    p = start_silent_stream(interval=1.0, duration=1.5, stats=False)
    elapsed, out, err = finish(p, timeout=10)
    assert p.returncode == 0, err
    assert elapsed > 0.6  # ran to --duration (1.5 s, 0.5 s of it spent before), not cut short
    assert out.startswith('{"v": 2, "type": "summary"')


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
