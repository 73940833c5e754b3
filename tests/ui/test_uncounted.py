"""Issue 28's counters in the dashboard, as a user reads them (FakeFeed,
`shaky`: its kernel side could not count every hit): returns unpaired beside
missed returns in the table's lost column, the stats pane's block of what was
not counted, errnos outside the table as "other", errnos not checked with
the reason, top comms marked exact or an estimate; at 80x24 and 160x45."""

from __future__ import annotations

import time

from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline.accounting import COMM_EXACT
from ktui.widgets.probe_table import lost_text
from ktui.widgets.stats_pane import StatsPane

from .conftest import make_app, plain
from tests.fakefeed import FakeFeed

RET = parse_spec("vfs_read:r:retval")
CALL = parse_spec("vfs_read:c:a3")
VOID = parse_spec("do_sys_openat2:r")
SET = ProbeSet("shaky", probes=(RET, CALL, VOID))
DEADLINE = 30.0  # seconds: generous, for a loaded machine; no test asserts how fast


def shaky_app(events_per_drain: int = 60, lossy=()):
    feed = FakeFeed(SET, events_per_drain=events_per_drain, shaky={RET.name, CALL.name},
                    errno_checks={VOID.name: "off: void"}, lossy=lossy)
    return make_app(feed), feed


async def until(pilot, app, condition, what: str) -> None:
    """Poll (stats every second poll) until `condition()` holds, or fail
    after DEADLINE saying `what` was awaited."""
    start = time.monotonic()
    while time.monotonic() - start < DEADLINE:
        app.poll(read_stats=True)
        await pilot.pause()
        if condition():
            return
    raise AssertionError(f"not within {DEADLINE} s: {what}")


def head(app) -> str:
    return plain(app.main.query_one(StatsPane).query_one("#stats-head"))


def body(app) -> str:
    return plain(app.main.query_one(StatsPane).query_one("#stats-body"))


def cell(app, probe_id: int, column: str) -> str:
    return app.main.table.get_cell(str(probe_id), column).plain


async def test_a_return_probe_shows_what_was_not_counted_at_160x45():
    app, _ = shaky_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, app, lambda: "returns unpaired" in head(app), "the block in the stats pane")
        text = head(app)
        for row in ("not in hits or latency:", "returns unpaired (no entry kept)", "entries not stored",
                    "nested hits dropped", "runs missed (recursion)"):
            assert row in text
        shown = app.main.snapshot.probes[1]
        assert f"{shown.unpaired} returns unpaired" in text and f"{shown.entries_unstored} entries not" in text
        # the table: lost+N, N the unpaired returns among what was not counted
        lost = cell(app, 1, "lost")
        assert lost.startswith("0+") and int(lost.partition("+")[2]) > 0
        assert "other" in body(app) and "top comms" in body(app)


async def test_top_comms_turn_into_an_estimate_and_say_so():
    app, _ = shaky_app(events_per_drain=600)
    async with app.run_test(size=(160, 45)) as pilot:
        app.poll(read_stats=True)
        await pilot.pause()
        await until(pilot, app, lambda: "top comms" in body(app), "the top comms")
        assert "top comms (exact)" in body(app)
        await until(pilot, app, lambda: feed_hits(app) > COMM_EXACT and "top comms ≈ estimate" in body(app),
                    "top comms marked an estimate past the exact first hits")
        assert "sampled 1 in 64 past 1024 hits per CPU" in body(app)


def feed_hits(app) -> int:
    snapshot = app.main.snapshot
    return snapshot.probes[1].hits if snapshot is not None and 1 in snapshot.probes else 0


async def test_a_void_functions_errnos_are_not_checked_and_say_why():
    app, _ = shaky_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, app, lambda: cell(app, 3, "hits") not in ("0", "-"), "the void probe's hits")
        assert cell(app, 3, "errors") == "-"  # not 0: nothing was checked
        await pilot.press("down", "down")
        await until(pilot, app, lambda: "errno not checked: void function" in body(app), "the reason in the pane")
        assert "errors" not in body(app).split("errno not checked")[0].split("latency")[-1]


async def test_at_80x24_the_lost_column_shows_the_whole_count():
    """The lost column widens to its longest cell ("⚠ lost+N"): a number
    cut at the column's edge would read as another number."""
    app, feed = shaky_app(events_per_drain=30_000, lossy={CALL.name})
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, app, lambda: feed_hits(app) > 40_000, "busy stats")
        app.poll(read_stats=True)
        await pilot.pause()
        width = app.main.table.columns["lost"].width
        for probe_id in (1, 2):
            shown = cell(app, probe_id, "lost")
            assert "+" in shown and len(shown) <= width, (shown, width)
        assert len(cell(app, 2, "lost")) > 8  # wider than the column was ("⚠ 10000+937")
        assert {"name", "state", "hits", "rate", "lost"} <= set(app.main.table.shown_columns)
        # the pane, opened under the events (s), starts with the block
        await pilot.press("s")
        await until(pilot, app, lambda: "not in hits or latency:" in head(app), "the block at 80x24")
        assert cell(app, 1, "lost") == lost_text(app.main.snapshot.probes[1], 1 in app.main.losing)


def test_snapshot_of_a_shaky_return_probe_at_160x45(snap_compare):
    """The whole picture at once, pinned: lost+N in the table, the block
    under the hits, errnos with "other", the estimate mark on top comms,
    and `-` errors for the void function."""
    from .test_snapshots import settle

    app, _ = shaky_app(events_per_drain=500)
    assert snap_compare(app, terminal_size=(160, 45), run_before=settle(app))
