"""The probe table, the stats pane and the status line, driven by the keys."""

from __future__ import annotations

from ktui.record.feed import ProbeState
from ktui.widgets.probe_table import ProbeTable
from ktui.widgets.stats_pane import StatsPane
from ktui.widgets.status_line import StatusLine

from .conftest import SIZE, Notes, make_app, make_feed, polls


def cell(app, probe_id: int, column: str) -> str:
    return app.main.table.get_cell(str(probe_id), column).plain


def names(app) -> list[str]:
    return [cell(app, i, "name") for i in app.main.table.probe_ids]


async def test_one_row_per_probe_with_state_and_reason(app):
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 4)
        await pilot.pause()
        table = app.main.table
        assert table.row_count == 5
        assert names(app) == [
            "vfs_read:r:ret=retval,count=a3:u64",
            "openat",
            "tcp_sendmsg:c",
            "kmem_cache_alloc:r:ret=retval:x64,caller=rip:symbol",
            "ext4_file_write_iter:r",
        ]
        assert cell(app, 1, "state") == "attached"
        assert cell(app, 4, "state") == "off"
        assert cell(app, 5, "state") == "failed: no such symbol (is ext4 loaded?)"
        assert cell(app, 1, "kind") == "r" and cell(app, 2, "kind") == "c"
        # return probes get latency percentiles and an error count, call probes do not
        assert cell(app, 1, "p50").endswith("us") and cell(app, 1, "p99").endswith("us")
        assert int(cell(app, 1, "errors")) > 0
        assert cell(app, 2, "p50") == ""


async def test_rows_update_in_place_without_rebuilding(app):
    async with app.run_test(size=SIZE) as pilot:
        table = app.main.table
        rebuilds = []
        original = table._rebuild
        table._rebuild = lambda *a: (rebuilds.append(a), original(*a))
        hits_before = int(cell(app, 1, "hits"))
        polls(app, 6)
        await pilot.pause()
        assert rebuilds == []
        assert int(cell(app, 1, "hits")) > hits_before
        # fake clock: 1 s between stats reads; 2 polls between them, each dealing
        # 7 events to the 2 probes that fetch something (4 to the first)
        assert cell(app, 1, "rate") == "8"
        assert cell(app, 3, "rate") == "14"  # stats-only: counts every hit, streams nothing


async def test_space_detaches_and_reattaches_the_selected_probe(app, feed):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("space")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert ("set_enabled", 1, False) in feed.calls
        assert feed.statuses()[1].state is ProbeState.OFF
        assert cell(app, 1, "state") == "off"
        assert cell(app, 1, "on") == "○"
        await pilot.press("space")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert feed.calls[-1] == ("set_enabled", 1, True)
        assert cell(app, 1, "state") == "attached"


async def test_toggling_a_failing_probe_shows_the_reason(app, feed):
    notes = Notes()
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        await pilot.press("down", "down", "down", "down")  # last row: the failed ext4 probe
        await pilot.press("space")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert feed.calls[-1] == ("set_enabled", 5, True)
        assert notes.any("is ext4 loaded?")


async def test_all_off_then_all_on(app, feed):
    notes = Notes()
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        await pilot.press("N")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert {s.state for s in feed.statuses().values()} == {ProbeState.OFF}
        assert [cell(app, i, "state") for i in (1, 2, 3)] == ["off"] * 3
        await pilot.press("A")
        await app.workers.wait_for_complete()
        await pilot.pause()
        states = {i: s.state for i, s in feed.statuses().items()}
        assert states[1] is states[2] is states[3] is states[4] is ProbeState.ATTACHED
        assert states[5] is ProbeState.FAILED  # still no ext4: said in a notification
        assert notes.any("ext4")


async def test_growing_lost_count_is_flagged(app):
    notes = Notes()
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        polls(app, 4)
        await pilot.pause()
        assert cell(app, 3, "lost").startswith("⚠")
        assert not cell(app, 1, "lost").startswith("⚠")
        status = app.main.query_one(StatusLine)
        assert "losing events: tcp_sendmsg:c" in status._shown.plain
        assert notes.any("stats-only")


async def test_stats_pane_follows_the_cursor(app):
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 4)
        await pilot.pause()
        pane = app.main.query_one(StatsPane)
        assert pane.view.status.probe_id == 1
        body = str(pane.query_one("#stats-body").render())
        assert "nsecs" in body and "distribution" in body and "EBADF" in body
        assert len(pane.view.history) == 2  # two stats reads so far
        await pilot.press("down")
        await pilot.pause()
        assert pane.view.status.probe.name == "openat"
        assert "nsecs" not in str(pane.query_one("#stats-body").render())


async def test_status_line_shows_system_and_totals(app):
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 2)
        await pilot.pause()
        text = app.main.query_one(StatusLine)._shown.plain
        assert "kernel 6.1.0-fake" in text and "ringbuf" in text
        assert "▶ following" in text
        assert "%)" in text  # drop rate


async def test_system_notes_are_warnings():
    import dataclasses

    from tests.fakefeed import DEFAULT_INFO

    info = dataclasses.replace(DEFAULT_INFO, btf=False, notes=("no BTF: struct offsets need a kernel-devel match",))
    app = make_app(make_feed(info=info))
    notes = Notes()
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        await pilot.pause()
        assert "⚠ no BTF" in app.main.query_one(StatusLine)._shown.plain
        assert notes.any("no BTF")


async def test_keys_that_need_a_probe_are_hidden_without_probes():
    from ktui.lang.model import ProbeSet

    app = make_app(make_feed(ProbeSet(name="empty")))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        main = app.main
        for action in ("toggle", "edit", "delete", "all_on", "all_off"):
            assert main.check_action(action, ()) is False, action
        assert main.check_action("add", ()) is True
        shown = {b.binding.action for b in main.active_bindings.values()}
        assert "edit" not in shown and "add" in shown
        await pilot.press("e", "d", "space")  # nothing happens, nothing breaks
        assert isinstance(app.screen, type(main))
        assert isinstance(main.table, ProbeTable) and main.table.row_count == 0
