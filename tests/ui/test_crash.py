"""An exception inside the UI: the app exits with a failure, its traceback
goes to the log file, never to the terminal, and once the screen is gone
one line says what failed and where the traceback is (exit status 4), with
every probe detached.

The pilot tests check the app's side. The app never owns the feed (its
caller closes it, the Memray pattern), so `close()` and the terminal are
checked by running `dashboard.run_feed` for real under a pseudo-terminal.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import shutil
import struct
import sys
import time
from pathlib import Path

import pytest
from textual.worker import WorkerFailed

from ktui.dashboard import failure_line
from ktui.exits import EXIT_RUNTIME
from ktui.pipeline.collector import BufferedFeed
from ktui.record.feed import ProbeStatus
from tests.fakefeed import FakeFeed

from .conftest import FAILING, SIZE, demo_probeset, make_app

REPO = Path(__file__).resolve().parents[2]


class BrokenFeed(FakeFeed):
    """A FakeFeed with a bug: drain() raises after `drains_ok` calls, or
    set_enabled() always does."""

    def __init__(self, *, drains_ok: int | None = None, broken_toggle: bool = False) -> None:
        super().__init__(demo_probeset(), events_per_drain=7, fail=FAILING)
        self.drains_ok = drains_ok
        self.broken_toggle = broken_toggle
        self.drains = 0

    def drain(self):
        self.drains += 1
        if self.drains_ok is not None and self.drains > self.drains_ok:
            raise RuntimeError("injected: drain broke\nsecond line")
        return super().drain()

    async def set_enabled(self, probe_id: int, enabled: bool) -> ProbeStatus:
        if self.broken_toggle:
            raise KeyError(f"injected: no slot for probe {probe_id}")
        return await super().set_enabled(probe_id, enabled)


async def wait_for_exit(app, pilot, timeout: float = 60.0) -> None:
    """Until the app has exited: a condition with a generous deadline (a
    loaded machine), never a bound on how long it took."""
    end = time.monotonic() + timeout
    while app.return_code is None and time.monotonic() < end:
        await pilot.pause(0.02)


async def test_exception_in_the_poll_timer_ends_the_app_with_a_failure(tmp_path, capfd):
    """The feed breaks under the poll timer, through the BufferedFeed the
    dashboard wraps it in (whose background drain hits the bug first)."""
    log = tmp_path / "ktui.log"
    app = make_app(BufferedFeed(BrokenFeed(drains_ok=3)), refresh_hz=50, log_path=str(log))
    with pytest.raises(RuntimeError, match="injected: drain broke"):  # run_test re-raises it
        async with app.run_test(size=SIZE) as pilot:
            await wait_for_exit(app, pilot)
    assert app.return_code == 1
    assert isinstance(app.failure, RuntimeError) and "drain broke" in str(app.failure)
    assert "RuntimeError: injected: drain broke" in log.read_text()  # the traceback, in the log
    out, err = capfd.readouterr()
    assert "injected" not in out + err and "Traceback" not in out + err


async def test_exception_in_a_key_handler_ends_the_app_with_a_failure(tmp_path, capfd):
    log = tmp_path / "ktui.log"
    app = make_app(BrokenFeed(broken_toggle=True), log_path=str(log))
    with pytest.raises(WorkerFailed, match="no slot"):  # the toggle runs in a worker
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("space")  # switch the selected probe: the feed raises
            await wait_for_exit(app, pilot)
    assert app.return_code == 1 and isinstance(app.failure, KeyError)  # unwrapped
    assert "KeyError" in log.read_text()
    out, err = capfd.readouterr()
    assert "injected" not in out + err and "Traceback" not in out + err


async def test_a_failure_in_the_background_drain_is_raised_to_the_app():
    """BufferedFeed drains in a task nobody awaits: a failure there must
    reach the app's next drain(), not die with the task (the collection
    would stop and the dashboard freeze without a word)."""
    inner = BrokenFeed(drains_ok=0)
    buffered = BufferedFeed(inner, interval=0.001)
    buffered.start()
    await asyncio.sleep(0.05)  # the background drain hits the bug
    inner.drains_ok = None  # the feed works again: only the failure can make drain() raise
    with pytest.raises(RuntimeError, match="injected: drain broke"):
        buffered.drain()
    buffered.close()


def test_failure_line_is_one_line_naming_the_error_and_the_log():
    line = failure_line(RuntimeError("bad\nthing \u202e" + "x" * 500), 1, Path("/x/ktui.log"))
    assert line.startswith("ktui: the dashboard stopped on an internal error: RuntimeError: bad\\nthing \\u202e")
    assert line.endswith("... (traceback in /x/ktui.log)")
    assert "\n" not in line and len(line) < 320
    assert failure_line(None, 3, Path("l")) == \
        "ktui: the dashboard stopped on an internal error: it exited with status 3 (traceback in l)"


# ---------------------------------------------------------------- under a pty

# The child runs the real dashboard (dashboard.run_feed) on the pty as its
# terminal, on a feed that breaks after `drains_ok` drains (or never), and
# writes what the test cannot see from outside to a JSON file: its exit
# status, whether the feed was closed, and `stty -a` before and after.
CHILD = r"""
import json, subprocess, sys
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from tests.ui.test_crash import BrokenFeed
from ktui import dashboard

result, log, drains_ok = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
stty = lambda: subprocess.run(["stty", "-a"], capture_output=True, text=True).stdout
before = stty()
feed = BrokenFeed(drains_ok=drains_ok if drains_ok >= 0 else None)
status = dashboard.run_feed(feed, 20, log)
result.write_text(json.dumps({"status": status, "closed": feed.closed,
                              "stty_before": before, "stty_after": stty()}))
sys.exit(status)
"""
ALT_SCREEN_ON, ALT_SCREEN_OFF = b"\x1b[?1049h", b"\x1b[?1049l"
CONTROL_SEQUENCE = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x07")


def run_in_pty(tmp_path: Path, drains_ok: int, keys: bytes = b"", timeout: float = 30.0):
    """(exit status, everything written to the terminal, the child's result)."""
    import fcntl
    import pty
    import termios

    result, log = tmp_path / "result.json", tmp_path / "ktui.log"
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal and fds 0-2
        try:
            os.chdir(REPO)
            os.execv(sys.executable, [sys.executable, "-c", CHILD, str(result), str(log),
                                      str(drains_ok), str(REPO)])
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    output, end = b"", time.monotonic() + timeout
    screen_at = None  # when the dashboard took the screen
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:  # EIO: the child is gone and the pty closed
                    break
                if not chunk:
                    break
                output += chunk
            if screen_at is None and ALT_SCREEN_ON in output:
                screen_at = time.monotonic()
            if keys and screen_at is not None and time.monotonic() > screen_at + 1.0:
                os.write(fd, keys)  # once it has had a second to come up
                keys = b""
        else:
            os.kill(pid, 9)
            pytest.fail(f"the dashboard did not exit within {timeout} s")
    finally:
        os.close(fd)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    child = json.loads(result.read_text()) if result.exists() else {}
    return status, output, child, log


def after_the_screen(output: bytes) -> str:
    """What the terminal shows once the alternate screen is left: the text
    written after the last 1049l, control sequences (mode resets) removed."""
    assert ALT_SCREEN_ON in output, output[-500:]
    assert output.rfind(ALT_SCREEN_OFF) > output.rfind(ALT_SCREEN_ON), "alternate screen never left"
    tail = output[output.rfind(ALT_SCREEN_OFF) + len(ALT_SCREEN_OFF):]
    return CONTROL_SEQUENCE.sub(b"", tail).decode()


needs_pty = pytest.mark.skipif(not shutil.which("stty") or not os.path.exists("/dev/ptmx"),
                               reason="needs a pseudo-terminal and stty")


@needs_pty
def test_crash_under_a_terminal_restores_it_and_prints_one_line(tmp_path):
    status, output, child, log = run_in_pty(tmp_path, drains_ok=5)
    assert status == EXIT_RUNTIME == child["status"]
    assert child["closed"], "the feed was not closed: probes would stay attached"
    assert child["stty_after"] == child["stty_before"]  # raw mode undone
    shown = after_the_screen(output)
    assert shown == ("ktui: the dashboard stopped on an internal error: RuntimeError: "
                     f"injected: drain broke\\nsecond line (traceback in {log})\r\n"), shown
    assert b"Traceback" not in output  # not on the screen, not after it
    assert "RuntimeError: injected: drain broke" in log.read_text()


@needs_pty
def test_quit_under_a_terminal_restores_it_and_prints_nothing(tmp_path):
    """The control: the same harness, no failure, `q` quits."""
    status, output, child, _ = run_in_pty(tmp_path, drains_ok=-1, keys=b"q")
    assert status == 0 == child["status"] and child["closed"]
    assert child["stty_after"] == child["stty_before"]
    assert after_the_screen(output) == ""
