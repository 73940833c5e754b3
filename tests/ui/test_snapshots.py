"""What the screens look like, pinned as SVG snapshots (140x40).

Everything on screen is deterministic: FakeFeed timestamps and values, its
fake clock for rates, no poll timer (refresh_hz=0), notifications cleared,
no cursor blink. Update after a deliberate change with
`pytest tests/ui/test_snapshots.py --snapshot-update` and look at the SVGs.
"""

from __future__ import annotations

from textual.widgets import Input

from .conftest import SIZE, make_app, polls


def settle(app):
    """The same state every run: a few polls, no toasts, no blinking cursors."""

    async def run_before(pilot) -> None:
        while app.main.snapshot is None:  # the auto-pilot starts before the first poll
            await pilot.pause(0.01)
        polls(app, 5)
        await pilot.pause()
        app.clear_notifications()

    return run_before


def no_blink(pilot) -> None:
    for field in pilot.app.screen.query(Input):
        field.cursor_blink = False


class TestMainScreen:
    def test_dashboard(self, snap_compare):
        app = make_app()
        assert snap_compare(app, terminal_size=SIZE, run_before=settle(app))

    def test_paused_and_filtered(self, snap_compare):
        app = make_app()

        async def run_before(pilot) -> None:
            await settle(app)(pilot)
            await pilot.press("p", "slash", *"openat", "enter")
            polls(app, 2)
            no_blink(pilot)
            await pilot.pause()

        assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


class TestHelp:
    def test_help(self, snap_compare):
        app = make_app()
        assert snap_compare(app, press=["question_mark"], terminal_size=SIZE, run_before=settle(app))


class TestProbeDialog:
    def test_add_with_spec_error(self, snap_compare):
        app = make_app()

        async def run_before(pilot) -> None:
            await settle(app)(pilot)
            await pilot.press("a", *"vfs_read:x:a1")
            no_blink(pilot)
            await pilot.pause()

        assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


class TestEventDetail:
    def test_detail_of_a_return_event(self, snap_compare):
        app = make_app()

        async def run_before(pilot) -> None:
            await settle(app)(pilot)
            await pilot.press("enter", "up", "enter")  # to the events, one row up, detail
            await pilot.pause()

        assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


class TestConfirm:
    def test_delete_asks_first(self, snap_compare):
        app = make_app()
        assert snap_compare(app, press=["d"], terminal_size=SIZE, run_before=settle(app))
