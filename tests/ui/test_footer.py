"""The footer does not keep dead key widgets alive (ktui/widgets/footer.py)."""

from __future__ import annotations

import gc

from ktui.screens.help import HelpScreen

from .conftest import SIZE, polls


def live_footer_keys() -> tuple[int, int]:
    # By class name: Textual exports FooterKey only from a private module.
    gc.collect()
    keys = [o for o in gc.get_objects() if type(o).__name__ == "FooterKey"]
    return len(keys), sum(1 for k in keys if k.is_attached)


async def test_screen_switches_leave_no_dead_footer_keys(app):
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 2)
        await pilot.pause()
        for _ in range(30):  # each switch recomposes the footer
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            await pilot.pause()
        total, attached = live_footer_keys()
        # Textual's own Footer kept ~7 dead keys per switch (200+ here)
        assert attached > 0
        assert total - attached < 20, (total, attached)
