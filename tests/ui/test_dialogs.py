"""Add, edit and delete probes through the dialogs."""

from __future__ import annotations

from textual.widgets import Input, Static

from ktui.screens.confirm import ConfirmDialog
from ktui.screens.main import MainScreen
from ktui.screens.probe_dialog import ProbeDialog

from .conftest import SIZE, make_app, make_feed
from .test_probes import cell, names


def problem(app, field: str) -> str:
    return str(app.screen.query_one(f"#{field}-problem", Static).render())


async def type_into(pilot, selector: str, text: str, *, keys: bool = False) -> None:
    """Put `text` in a field: key by key with `keys`, else in one change
    (the same Input.Changed path, without a pause per key)."""
    field = pilot.app.screen.query_one(selector, Input)
    field.focus()
    field.value = ""
    if keys:
        await pilot.press(*text)
    else:
        field.value = text
    await pilot.pause()


async def test_add_dialog_shows_the_error_and_column_as_you_type(app, feed):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        assert isinstance(app.screen, ProbeDialog)
        await type_into(pilot, "#spec", "vfs_read:x:a1", keys=True)
        lines = problem(app, "spec").splitlines()
        assert lines[0] == "vfs_read:x:a1"
        assert lines[1].index("^") == 9  # under the x, column 10
        assert "col 10:" in lines[1] and "kind must be c, r or t" in lines[1]
        assert app.screen.query_one("#spec", Input).has_class("-invalid")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ProbeDialog)  # nothing submitted
        assert not [c for c in feed.calls if c[0] == "add_probe"]
        # fixing it clears the problem
        await type_into(pilot, "#spec", "vfs_read:c:a1")
        assert problem(app, "spec") == ""


async def test_valid_spec_adds_a_row(app, feed):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await type_into(pilot, "#spec", "tcp_recvmsg:r:ret=retval")
        await type_into(pilot, "#filter", "ret < 0")
        await type_into(pilot, "#label", "recv-errors")
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        assert ("add_probe", "tcp_recvmsg:r:ret=retval") in feed.calls
        assert names(app)[-1] == "recv-errors"
        added = feed.statuses()[6].probe
        assert str(added.filter) == "ret < 0" and added.label == "recv-errors"
        assert app.main.table.selected_id == 6  # the cursor goes to the new probe


async def test_filter_problem_is_shown_under_the_filter(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await type_into(pilot, "#spec", "vfs_read:c:count=a3")
        await type_into(pilot, "#filter", "count >")
        assert problem(app, "spec") == ""
        text = problem(app, "filter")
        assert text.splitlines()[0] == "count >" and "^" in text.splitlines()[1]
        # a name of the wrong kind is caught against the probe, before the kernel
        await type_into(pilot, "#filter", "comm > 4096")
        assert "comm is a string" in problem(app, "filter")
        # an unknown word may be a parameter: the kernel's BTF decides
        # (test_kernel_check_*); without a kernel to ask the dialog lets it be
        await type_into(pilot, "#filter", "bytes > 4096")
        assert problem(app, "filter") == ""


async def test_duplicate_name_is_refused_inline(app, feed):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await type_into(pilot, "#spec", "tcp_sendmsg:c")
        assert "already called" in problem(app, "spec")
        await type_into(pilot, "#label", "tx")
        assert problem(app, "spec") == "" and problem(app, "label") == ""


async def test_label_with_a_bidi_override_is_refused_inline(app, feed):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await type_into(pilot, "#spec", "vfs_write:c")
        await type_into(pilot, "#label", "tx\u202ebad")
        lines = problem(app, "label").splitlines()
        assert lines[0] == "tx\ufffdbad"  # shown as a replacement character, not applied
        assert lines[1].index("^") == 2
        assert "col 3: U+202E RIGHT-TO-LEFT OVERRIDE is not allowed" in lines[1]
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ProbeDialog)
        assert not [c for c in feed.calls if c[0] == "add_probe"]


async def test_a_replay_offers_no_add_dialog():
    """Issue 15: a replay cannot add probes, so `a` opens no dialog to type
    a spec into only to refuse it (the feed still refuses, should anything
    ask: tests/ui/test_replay.py checks the keys)."""
    feed = make_feed(replay=True)
    app = make_app(feed)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        assert not [c for c in feed.calls if c[0] == "add_probe"]
        assert app.main.table.row_count == 5
        assert "replay" in app.main.query_one("#status").render().plain


async def test_probe_the_kernel_refuses_is_not_left_behind(app, feed):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await type_into(pilot, "#spec", "ext4_file_write_iter:c:a1")
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, ProbeDialog)
        assert "cannot attach: no such symbol" in str(app.screen.query_one("#submit-problem").render())
        assert len(feed.statuses()) == 5 and app.main.table.row_count == 5


async def test_edit_replaces_the_probe_in_its_row(app, feed):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down")  # openat
        await pilot.press("e")
        dialog = app.screen
        assert isinstance(dialog, ProbeDialog)
        assert dialog.query_one("#spec", Input).value == "do_sys_openat2:c:dfd=a1:s32,fname=+0(a2):ustring"
        assert dialog.query_one("#label", Input).value == "openat"
        await type_into(pilot, "#spec", "do_sys_openat2:c:fname=+0(a2):ustring")
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        assert feed.calls[-2:] == [("remove_probe", 2), ("add_probe", "do_sys_openat2:c:fname=+0(a2):ustring")]
        table = app.main.table
        assert table.probe_ids[1] == 6 and names(app)[1] == "openat"
        assert table.selected_id == 6
        assert feed.statuses()[6].probe.fetches[0].name == "fname"


async def test_failed_edit_puts_the_old_probe_back(app, feed):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down")
        await pilot.press("e")
        await type_into(pilot, "#spec", "ext4_file_write_iter:c")
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "the old probe is back" in str(app.screen.query_one("#submit-problem").render())
        await pilot.press("escape")
        assert names(app)[1] == "openat"  # same row, new id
        assert cell(app, app.main.table.probe_ids[1], "state") == "attached"


async def test_delete_asks_first(app, feed):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "d")
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("n")
        assert app.main.table.row_count == 5
        await pilot.press("delete")  # the second key for delete
        assert isinstance(app.screen, ConfirmDialog)
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert ("remove_probe", 2) in feed.calls
        assert "openat" not in names(app)
        assert app.main.table.row_count == 4
