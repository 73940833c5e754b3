"""Static updates without needless layouts (ktui/widgets/static_update.py)."""

from __future__ import annotations

import time

from rich.cells import cell_len
from textual.widgets import Static

from ktui.widgets.static_update import update_static
from ktui.widgets.stats_pane import StatsPane

from .conftest import SIZE, make_app, make_feed, polls, settles


async def test_only_a_change_that_may_change_the_height_lays_out(app, monkeypatch):
    calls: list[tuple[str, bool]] = []
    real = Static.update

    def spy(self, content="", *, layout=True):
        calls.append((str(content), layout))
        real(self, content, layout=layout)

    async with app.run_test(size=SIZE) as pilot:
        polls(app, 2)
        await pilot.pause()
        label = app.main.query_one("#rate-label", Static)
        # what the calls below are judged against: the label showing its one
        # line of rate, laid out at least that wide. A pause may end before
        # the stats pane shows its probe or lays out (width 0: every update
        # "may change the height"), so wait for that, then spy
        await settles(pilot, lambda: str(label.content).startswith("rate/s, last")
                      and 0 < cell_len(str(label.content)) <= label.content_region.width, "the rate label laid out")
        monkeypatch.setattr(Static, "update", spy)
        # The pane draws its label again on every Resize, and the wrapped
        # line's layout sends it one (its virtual size grew): the label went
        # back to its rate line, one row, before a look could see the rows
        # the layout gave. The pane keeps still while the label is measured
        monkeypatch.setattr(StatsPane, "_render_view", lambda self: None)
        update_static(label, "rate/s, last 2 s")
        update_static(label, "rate/s, last 2 s")  # the same: not set again
        update_static(label, "rate/s, last 3 s")  # one line that fits: no layout
        update_static(label, "two\nlines")  # may be taller: layout
        update_static(label, "x" * 500)  # wraps: layout
        assert calls == [("rate/s, last 2 s", False), ("rate/s, last 3 s", False),
                         ("two\nlines", True), ("x" * 500, True)]
        # the wrapped line took its lines, once the layout has run: a pause
        # alone misjudged a loaded machine (no CPU given: "idle") and looked once
        deadline = time.monotonic() + 30
        while label.size.height <= 2 and time.monotonic() < deadline:
            await pilot.pause(0.01)
        assert label.size.height > 2


async def test_every_second_at_idle_the_stats_pane_asks_for_no_layout(monkeypatch):
    """Issue 15: five Statics asked for a layout of the whole screen every
    stats read, ~40 ms: the longest wait a key had at idle."""
    layouts: list[str | None] = []
    real = Static.update

    def spy(self, content="", *, layout=True):
        if layout:
            layouts.append(self.id)
        real(self, content, layout=layout)

    app = make_app(make_feed(events_per_drain=0))  # idle: no events, the same numbers
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 4)
        await pilot.pause()
        monkeypatch.setattr(Static, "update", spy)
        polls(app, 4)  # two stats reads
        assert layouts == []
