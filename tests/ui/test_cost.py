"""`t`: each probe's own cost in the dashboard (issue 13), on the FakeFeed,
whose timed stats say 250 ns a hit."""

from __future__ import annotations

from ktui.widgets.stats_pane import COST_NOTE, StatsPane

from .conftest import SIZE, Notes, make_app, make_feed, polls


def cell(app, probe_id: int, column: str) -> str:
    return app.main.table.get_cell(str(probe_id), column).plain


def pane_text(app) -> str:
    return app.main.query_one(StatsPane).query_one("#stats-head").render().plain


async def test_t_times_each_probe_and_says_what_it_measures_and_costs():
    feed = make_feed()
    app = make_app(feed)
    notes = Notes()
    async with app.run_test(size=(200, 50), message_hook=notes) as pilot:
        polls(app, 4)
        await pilot.pause()
        assert "cost" not in app.main.table.shown_columns  # never on by default
        assert not feed.timing
        await pilot.press("t")
        assert feed.calls[-1] == ("set_timing", True) and feed.timing
        assert notes.any("Every BPF program on this machine runs slower")
        polls(app, 2)  # one timed stats read: nothing to compare with yet
        await pilot.pause()
        assert {"cost", "cpu"} <= set(app.main.table.shown_columns)
        assert cell(app, 1, "cost") == "-"
        assert "cost: measuring" in pane_text(app)
        polls(app, 2)  # two timed reads: the cost over the interval
        await pilot.pause()
        assert cell(app, 1, "cost") == "250ns"
        assert cell(app, 1, "cpu").endswith("%")
        text = pane_text(app)
        assert "cost 250ns/hit" in text and "of a CPU" in text
        assert "not the kprobe trap or return hook" in COST_NOTE and COST_NOTE.replace(" ", "") in text.replace(
            "\n", "").replace(" ", "")
        await pilot.press("t")
        assert feed.calls[-1] == ("set_timing", False)
        polls(app, 2)
        await pilot.pause()
        assert "cost" not in app.main.table.shown_columns
        assert "cost" not in pane_text(app)


async def test_at_80_columns_the_table_keeps_its_columns_while_timed():
    feed = make_feed()
    app = make_app(feed)
    async with app.run_test(size=(80, 24)) as pilot:
        polls(app, 2)
        await pilot.pause()
        before = app.main.table.shown_columns
        await pilot.press("t")
        polls(app, 4)
        await pilot.pause()
        assert app.main.table.shown_columns == before


async def test_a_replay_has_nothing_to_time():
    feed = make_feed(replay=True)
    app = make_app(feed)
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 2)
        await pilot.pause()
        await pilot.press("t")
        assert ("set_timing", True) not in feed.calls
