"""The stats pane's view of hist(VALUE, KEY...): `v` shows the top keys'
histograms, each under a line with its key, hits, p50 and p99, whole
rows at 80 columns; Enter on a key drills down to its events."""

from __future__ import annotations

import time

from textual.geometry import Region

from ktui.lang.probeset import loads_probeset
from ktui.widgets.stats_pane import StatsPane

from ktui.pipeline.drilldown import VALUE, Pick

from .conftest import make_app, make_feed, polls
from .test_drilldown import drill, header, shown_events

SET = """name: keyed
probes:
  - spec: sizes=vfs_read:c:a3 hist(a3, comm)
"""


async def _shown(pilot, pane) -> list[str]:
    values = pane.query_one("#stats-values")
    deadline = time.monotonic() + 30
    while not values.size.height and time.monotonic() < deadline:  # laid out
        await pilot.pause(0.05)
    return ["".join(seg.text for seg in strip).rstrip() for strip in values.render_lines(Region(0, 0, *values.size))]


async def test_v_shows_each_keys_histogram_whole_at_80_columns():
    for size in ((80, 40), (80, 24)):
        app = make_app(make_feed(loads_probeset(SET), lossy=set(), fail={}))
        async with app.run_test(size=size) as pilot:
            polls(app, 4)
            await pilot.pause()
            pane = app.main.query_one(StatsPane)
            if not pane.display:
                await pilot.press("s")
            await pilot.press("v")
            await pilot.pause()
            assert "counters | hist by key" in str(pane.query_one("#stats-tabs").render())
            shown = await _shown(pilot, pane)
            assert shown[0].startswith("hist(a3) by comm: 3 keys"), shown
            heads = [line.split() for line in shown if " hits  p50 " in line]
            # most hits first: bash reads half the sizes (7), cat and sshd a quarter each
            assert [h[0] for h in heads] == ["bash", "cat", "sshd"], shown
            for head in heads:
                assert head[2:4] == ["hits", "p50"] and head[5] == "p99", shown
            # each key's slots, the bar closed on the same row (nothing wrapped)
            slots = [line for line in shown if " -> " in line]
            assert slots and all(line.rstrip().endswith("|") for line in slots), shown
            assert any(line.split()[:3] == ["4", "->", "7"] for line in slots), shown


async def test_enter_on_a_key_drills_down_to_its_events():
    app = make_app(make_feed(loads_probeset(SET), lossy=set(), fail={}, events_per_drain=40))
    async with app.run_test(size=(140, 45)) as pilot:
        await drill(pilot, app, Pick(VALUE, ("cat",)), view_presses=1)
        events = shown_events(app)
        assert events and {e.comm for e in events} == {"cat"}
        assert "sizes comm=cat" in header(app)
