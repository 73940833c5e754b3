"""Shared set-up for the pilot and snapshot tests: a fixed probe set on a
deterministic FakeFeed, and an app that polls only when a test says so."""

from __future__ import annotations

import dataclasses
import io
import time

import pytest
import textual._wait
from rich.console import Console
from textual.message import Message
from textual.notifications import Notify

from ktui.app import KtuiApp
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.screens.browse_model import FunctionIndex
from tests.fakefeed import FakeFeed

# Pilot.pause() and press() wait for the app to go idle in steps of
# textual._wait.SLEEP_GRANULARITY (1/50 s by default), idle meaning less than
# SLEEP_IDLE of CPU used in a step. Each pause/press waits at least one step:
# the 20 ms steps were ~40% of this suite's wall time. 5 ms steps, idle at a
# twentieth of one, as Textual's own ratio. Private names of a pinned Textual:
# tests/ui/test_textual_pins.py checks they are still read at call time. A
# test that needs a state after a pause waits for it (`settles`): a shorter
# step only makes a pause that was never enough fail more often.
textual._wait.SLEEP_GRANULARITY = 1 / 200
textual._wait.SLEEP_IDLE = textual._wait.SLEEP_GRANULARITY / 20

SIZE = (140, 40)
FAILING = {"ext4_file_write_iter": "no such symbol (is ext4 loaded?)"}


def demo_probeset() -> ProbeSet:
    probes = (
        parse_spec("vfs_read:r:ret=retval,count=a3:u64"),
        dataclasses.replace(parse_spec("do_sys_openat2:c:dfd=a1:s32,fname=+0(a2):ustring"), label="openat"),
        parse_spec("tcp_sendmsg:c"),
        dataclasses.replace(parse_spec("kmem_cache_alloc:r:ret=retval:x64,caller=rip:symbol"), enabled=False),
        parse_spec("ext4_file_write_iter:r"),
    )
    return ProbeSet(name="demo", description="a bit of everything", probes=probes)


def make_feed(probeset: ProbeSet | None = None, **kwargs) -> FakeFeed:
    options = {"events_per_drain": 7, "lossy": {"tcp_sendmsg:c"}, "fail": FAILING, **kwargs}
    return FakeFeed(probeset if probeset is not None else demo_probeset(), **options)


def app_loaded_from(source, **kwargs) -> KtuiApp:
    """The dashboard on the demo set as if opened from `source` (what `w`
    proposes to write back to)."""
    return make_app(make_feed(dataclasses.replace(demo_probeset(), source=str(source))), **kwargs)


def make_app(feed: FakeFeed | None = None, **kwargs) -> KtuiApp:
    """refresh_hz=0: no timer; tests call `app.poll()` so every run is the same.
    No kernel functions unless a test gives some (`functions=`): the host's
    own would make runs differ by machine."""
    kwargs.setdefault("refresh_hz", 0)
    kwargs.setdefault("functions", FunctionIndex(None))
    kwargs.setdefault("symbolize", lambda addr: f"sym_{addr & 0xfff:x}+0x0")
    return KtuiApp(feed if feed is not None else make_feed(), **kwargs)


def polls(app: KtuiApp, n: int, *, stats_every: int = 2) -> None:
    """n polls; stats on every `stats_every`-th, like a 1 s read in a fast timer."""
    for i in range(n):
        app.poll(read_stats=(i % stats_every == stats_every - 1))


async def settles(pilot, condition, what: str, timeout: float = 30.0) -> None:
    """Pause until `condition()` holds, with a deadline: a loaded machine
    may take more than one refresh to scroll or redraw."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        await pilot.pause(0.05)


def plain(static) -> str:
    """The text a Static shows, whatever it was given (str, Text, a Table)."""
    console = Console(width=200, file=io.StringIO(), color_system=None)
    with console.capture() as capture:
        console.print(static.content)
    return capture.get()


class Notes:
    """What the app told the user in notifications, caught as the Notify
    messages go by: pass it as `run_test(message_hook=...)`, Textual's public
    way to watch an app's messages (the app's own list is private)."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def __call__(self, message: Message) -> None:
        if isinstance(message, Notify):
            self.messages.append(message.notification.message)

    def any(self, text: str) -> bool:
        return any(text in m for m in self.messages)


@pytest.fixture
def feed() -> FakeFeed:
    return make_feed()


@pytest.fixture
def app(feed: FakeFeed) -> KtuiApp:
    return make_app(feed)
