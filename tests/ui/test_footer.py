"""The footer does not keep dead key widgets alive (ktui/widgets/footer.py)."""

from __future__ import annotations

import gc

from ktui.screens.help import HelpScreen

from .conftest import SIZE, polls, settles


def live_footer_keys() -> tuple[int, int]:
    # By class name: Textual exports FooterKey only from a private module.
    gc.collect()
    keys = [o for o in gc.get_objects() if type(o).__name__ == "FooterKey"]
    return len(keys), sum(1 for k in keys if k.is_attached)


async def test_screen_switches_leave_no_dead_footer_keys(app):
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 2)
        await pilot.pause()
        async def switches(n: int) -> int:
            """Dead footer keys after n more switches to the help and back."""
            for _ in range(n):  # each switch recomposes the footer
                await pilot.press("question_mark")
                assert isinstance(app.screen, HelpScreen)
                await pilot.press("escape")
                await pilot.pause()
            total, attached = live_footer_keys()
            assert attached > 0
            return total - attached

        # Textual's own Footer kept ~7 dead keys per switch. Growth over 6
        # switches, not a total after 30: the same leaks caught (2/3 of a
        # key a switch or more, as 20 after 30 did) in a quarter of the time
        first = await switches(2)
        last = await switches(6)
        assert last < 20 and last - first < 4, (first, last)


def footer_keys(app) -> list:
    from ktui.widgets.footer import KtuiFooter

    return [w for w in app.main.query_one(KtuiFooter).children if hasattr(w, "key_display")]


async def test_the_footer_is_rebuilt_only_when_its_keys_change(app):
    """Issue 15: each open and close of the help rebuilt the dashboard's
    footer for the same keys (7 widgets out, 7 in, a layout: part of the
    key's latency). The same keys keep their widgets; other keys do not."""
    async with app.run_test(size=SIZE) as pilot:
        polls(app, 2)
        await pilot.pause()
        # the footer is composed after a refresh: a pause may end before it
        # has any key. Wait for the dashboard's keys (a probe selected: on/off)
        await settles(pilot, lambda: {"space", "p"} <= {k.key for k in footer_keys(app)}, "the dashboard's keys")
        before = footer_keys(app)
        await pilot.press("question_mark")
        await pilot.press("escape")
        await pilot.pause()
        await settles(pilot, lambda: [k.key for k in footer_keys(app)] == [k.key for k in before],
                      "the same keys back in the footer")
        after = footer_keys(app)
        assert after and all(a is b for a, b in zip(before, after, strict=True))
        await pilot.press("p")  # pause: "Follow" takes the place of "Pause"
        await pilot.pause()
        await settles(pilot, lambda: "Follow" in [k.description for k in footer_keys(app)], "Follow in the footer")
        paused = footer_keys(app)
        assert "Follow" in [k.description for k in paused] and "Pause" not in [k.description for k in paused]


async def test_a_narrow_live_footer_keeps_pause():
    """At 80x24 the live footer had `space s a b e q ?`: no `p`, the key a
    reader needs when the events scroll past. It stays after on/off and
    stats, before the keys that edit the set."""
    from .conftest import make_app

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        polls(app, 2)
        await pilot.pause()
        await pilot.pause()
        shown = {k.key for k in app.screen.query("FooterKey")}
        assert {"space", "s", "p", "q", "question_mark"} <= shown, shown
