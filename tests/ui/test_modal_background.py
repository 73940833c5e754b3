"""The dimmed dashboard behind a modal (ktui/screens/modal_background.py):
drawn as Textual draws it, and reused only while the dashboard is unchanged."""

from __future__ import annotations

import gc

from textual._context import visible_screen_stack
from textual.renderables.background_screen import BackgroundScreen
from textual.visual import Visual, visualize

from ktui.screens.help import HelpScreen
from ktui.screens.modal_background import TintedBackground, TintedLines

from .conftest import SIZE, make_app, polls


def textual_background(modal, base) -> list:
    """What Textual itself draws: BackgroundScreen through Rich."""
    visual = visualize(modal, BackgroundScreen(base, modal.styles.background))
    return Visual.to_strips(modal, visual, *modal.size, modal.visual_style)


def ours(modal, base, lines: TintedLines) -> list:
    visual = TintedBackground(base, modal.styles.background, lines)
    return Visual.to_strips(modal, visual, *modal.size, modal.visual_style)


async def test_the_tinted_background_is_the_one_textual_draws_and_follows_changes():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 3)
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        modal = app.screen
        assert isinstance(modal, HelpScreen)
        lines = TintedLines()
        first = ours(modal, app.main, lines)
        assert first == textual_background(modal, app.main)
        assert len(first) == SIZE[1] and any(strip.text.strip() for strip in first)

        # nothing changed below: the same strips again, nothing tinted anew
        again = ours(modal, app.main, lines)
        assert all(a is b for a, b in zip(again, first))

        # the dashboard moves under the modal: drawn anew, still as Textual draws it
        polls(app, 4, stats_every=1)
        await pilot.pause()
        moved = ours(modal, app.main, lines)
        assert moved == textual_background(modal, app.main)
        assert moved != first


async def test_modal_screens_draw_their_background_through_the_tinted_lines():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        token = visible_screen_stack.set([app.main])
        try:
            rendered = app.screen.render()
        finally:
            visible_screen_stack.reset(token)
        assert isinstance(rendered, TintedBackground) and rendered.screen is app.main


async def test_start_up_objects_are_frozen_out_of_the_collector():
    """Full collections walking every start-up object were 50 ms pauses
    that idle keys waited behind (issue 15)."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        gc.unfreeze()
        try:
            app._settle_after_start()
            assert gc.get_freeze_count() > 0
        finally:
            gc.unfreeze()  # this test process is not ktui's: leave its collector as it was
