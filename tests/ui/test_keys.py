"""Help, quit, the command palette, logging: the keys around the panes."""

from __future__ import annotations

import logging

from textual.binding import Binding

from ktui.screens.commands import DashboardCommands
from ktui.screens.help import HelpScreen
from ktui.screens.main import MainScreen

from .conftest import SIZE, make_app, plain


async def test_help_lists_every_key(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = plain(app.screen.query_one("#keys"))
        for binding in MainScreen.BINDINGS:
            assert isinstance(binding, Binding)
            assert (binding.tooltip or binding.description) in text, binding.action
        for key_line in ("space", "d / del", "q / ^c", "⏎", "esc", "^p", "?"):
            assert key_line in text, key_line
        notes = plain(app.screen.query_one("#notes"))
        assert "k is the kind: c a call probe" in notes  # issue 15: the k column and errors
        assert "errors counts returns with a negative value" in notes
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_help_is_composed_once_and_opens_at_the_top_each_time(app):
    """Issue 15: composing the help again on every `?` was most of the key's
    latency; the one screen kept opens as a new one would, at the top."""
    async with app.run_test(size=(100, 20)) as pilot:
        await pilot.press("question_mark")
        first = app.screen
        box = first.query_one("#help")
        box.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        assert box.scroll_y > 0  # the help is longer than 20 lines
        await pilot.press("escape")
        await pilot.press("question_mark")
        await pilot.pause()
        assert app.screen is first and box.scroll_y == 0
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_the_help_table_rendered_at_idle_is_the_one_drawn():
    """Issue 15: the first `?` took 100-300 ms, most of it rendering the
    table of keys (three times). Rendered while idle after start, at the
    widths Textual then draws it at, opening it renders nothing new, and
    what was rendered ahead is what a cold open draws."""
    for size in (SIZE, (80, 24)):
        warm, cold = make_app(), make_app()
        async with warm.run_test(size=size) as pilot:
            warm._help_screen().prewarm()
            table = warm._help_screen().keys_table()
            ahead = dict(table._segments)
            assert len(ahead) == 2
            await pilot.press("question_mark")
            await pilot.pause()
            assert table._segments.keys() == ahead.keys()  # no width missed
            assert all(table._segments[w] is ahead[w] for w in ahead)  # none rendered again
        async with cold.run_test(size=size) as pilot:
            await pilot.press("question_mark")
            await pilot.pause()
            drawn = cold._help_screen().keys_table()._segments
        assert drawn == ahead, size


async def test_q_quits(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running and app.return_code == 0


async def test_ctrl_c_quits_even_from_a_dialog(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app.is_running


async def test_q_in_a_dialog_is_text_not_quit(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a", "q")
        await pilot.pause()
        assert app.is_running
        assert app.screen.query_one("#spec").value == "q"


async def test_every_action_is_in_the_command_palette(app):
    async with app.run_test(size=SIZE) as pilot:
        provider = DashboardCommands(app.main)
        found = {hit.display: hit for hit in [h async for h in provider.discover()]}
        for name in ("On/off", "All on", "All off", "Add", "Edit", "Delete", "Open", "Write",
                     "Pause", "Filter", "Clear", "Help", "Quit"):
            assert name in found, name
        assert "Follow" not in found  # not paused: follow does not apply
        hits = [h async for h in provider.search("pause")]
        assert hits and str(hits[0].match_display) == "Pause"
        await hits[0].command()
        await pilot.pause()
        assert app.main.events.paused


async def test_log_file_gets_the_actions_and_nothing_else_does(tmp_path, caplog):
    log_path = tmp_path / "ktui.log"
    app = make_app(log_path=str(log_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("space")
        await app.workers.wait_for_complete()
    text = log_path.read_text()
    assert "set_enabled 1 False" in text
    assert not [r for r in caplog.records if r.name.startswith("ktui")]  # not propagated
    assert logging.getLogger("ktui").propagate  # restored after the run
