"""Issue 28 ("one frame to explain") and 29 ("the event pane"): a frame of
the event pane showed lines that did not belong together, and the next
frame was right. Here every frame the app writes is applied to a terminal
(tests/ui/terminal.py) and each one's event rows are checked: one layout
for every row, and no row twice.

The column widths grow as rows with longer names are drawn. They grew
while a frame was being drawn: the rows above were already drawn with the
old layout (the cpu column and microseconds), the rows below with the new
one (neither), until the refresh that followed."""

from __future__ import annotations

import dataclasses
import re

from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from tests.fakefeed import FakeFeed

from .conftest import make_app
from .terminal import Terminal

TIME = re.compile(r"^ *(\d+)\.(\d+) ")
VALUES = re.compile(r"\S+=")
NAMES = ("r", "open", "a_rather_long_label")


def probeset() -> ProbeSet:
    return ProbeSet(name="short", probes=(
        dataclasses.replace(parse_spec("vfs_read:c:a3"), label="r"),
        dataclasses.replace(parse_spec("do_sys_openat2:c:a1"), label="open"),
    ))


def layout_of(line: str) -> tuple[int, int, int]:
    """(digits of the timestamp, columns of the probe name and of the
    values) of an event row."""
    digits = len(TIME.match(line).group(2))
    name_at = min(at for at in (line.find(f" {n} ") for n in NAMES) if at >= 0)
    return digits, name_at, VALUES.search(line).start()


def check(app, seen: list) -> None:
    """Each frame's event rows: one layout, no row twice, time going forward."""
    def on_frame(terminal: Terminal) -> None:
        if app.screen is not app.main:
            return  # a dialog on top
        rows = [line for line in terminal.lines(app.main.events.log_view.content_region) if TIME.match(line)]
        layouts = {layout_of(line) for line in rows}
        times = [float(TIME.match(line).group(0)) for line in rows]
        if len(layouts) > 1 or len(set(rows)) < len(rows) or times != sorted(times):
            seen.append((terminal.frames, rows))
    return on_frame


async def test_every_frame_draws_the_event_rows_in_one_layout():
    feed = FakeFeed(probeset(), events_per_drain=5)
    app = make_app(feed)
    bad: list = []
    async with app.run_test(size=(80, 24)) as pilot:
        Terminal(app, (80, 24), check(app, bad))
        for _ in range(4):
            app.poll()
            await pilot.pause()
        # a probe with a longer name comes in (the add dialog closed): its
        # rows need a wider name column, and the narrower layout that goes with it
        await feed.add_probe(dataclasses.replace(parse_spec("vfs_write:c:a3"), label="a_rather_long_label"))
        for _ in range(4):
            app.poll()
            await pilot.pause()
        assert any("a_rather_long_label" in line for line in app.main.events.log_view.lines())
    assert not bad, bad[0]


async def test_every_frame_after_s_draws_the_newest_rows_once_and_in_order():
    """`s` folds the stats pane under the events (a narrow window) and back:
    the event pane shrinks and grows while it follows its tail. No frame
    between may show a row twice, rows out of order, or two layouts."""
    feed = FakeFeed(probeset(), events_per_drain=5)
    app = make_app(feed)
    bad: list = []
    async with app.run_test(size=(80, 24)) as pilot:
        Terminal(app, (80, 24), check(app, bad))
        log = app.main.events.log_view
        for _ in range(6):
            app.poll()
            await pilot.pause()
        heights = set()
        for _ in range(4):
            await pilot.press("s")
            for _ in range(3):
                app.poll()
                await pilot.pause()
                heights.add(log.size.height)
        assert len(heights) > 1, "s neither folded nor unfolded the stats pane"
    assert not bad, bad[0]
