"""The function browser against a fake kernel (tests/fakesysfs.py): open it
from its key and from the command palette, type, pick, tick, add; what it
says without BTF and in a replay; and the add dialog's completion."""

from __future__ import annotations

import threading
import time

import pytest
from textual.widgets import Input, OptionList, SelectionList  # (TickList is one)

from ktui.screens.browse_model import FunctionIndex
from ktui.screens.browser import BrowserScreen
from ktui.screens.probe_dialog import FieldProblem, ProbeDialog, build_probe
from tests.fakesysfs import FakeKernel

from .conftest import SIZE, make_app, make_feed, plain


@pytest.fixture
def fk(tmp_path):
    return FakeKernel(tmp_path)


async def open_browser(app, pilot, *, whole: bool = True) -> BrowserScreen:
    """Open the browser; wait until the catalog is loaded (`whole`: all of
    it, BTF's prototypes too; else its first, partial index)."""
    await pilot.pause()
    await pilot.press("b")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the catalog loads in a thread
        await pilot.pause(0.01)
        screen = app.screen
        if isinstance(screen, BrowserScreen) and screen.functions is not None and (
                not whole or not screen.functions.partial):
            break
    assert isinstance(app.screen, BrowserScreen) and app.screen.functions is not None
    assert not whole or not app.screen.functions.partial
    await pilot.pause()
    return app.screen


def rows(screen) -> list[str]:
    matches = screen.query_one("#matches", OptionList)
    return [matches.get_option_at_index(i).id for i in range(matches.option_count)]


async def tick(pilot, screen, ref: str) -> None:
    """Move the cursor down the choices to `ref` and tick it."""
    choices = screen.query_one("#choices", SelectionList)
    for _ in range(choices.option_count):
        if choices.get_option_at_index(choices.highlighted).value == ref:
            await pilot.press("space")
            return
        await pilot.press("down")
    raise AssertionError(f"{ref} not reachable")


async def test_type_pick_tick_members_and_the_spec_they_make(fk):
    app = make_app(functions=FunctionIndex(fk.catalog))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        assert "12 functions" in plain(screen.query_one("#count"))
        await pilot.press(*"vfsrd")
        assert rows(screen)[0] == "vfs_read"
        assert "1 of 12 functions match" in plain(screen.query_one("#count"))
        assert "vfs_read(struct file *file, char *buf, size_t count, loff_t *pos) -> ssize_t" in \
            plain(screen.query_one("#proto"))
        assert plain(screen.query_one("#verdict")).startswith("traceable")
        spec = screen.query_one("#spec", Input)
        assert spec.value == "vfs_read:c"
        await pilot.press("enter", "right")  # to the parameters; show file's members
        await tick(pilot, screen, "file->f_pos")
        await tick(pilot, screen, "count")
        assert spec.value == "vfs_read:c:file->f_pos,count"
        await pilot.press("ctrl+r")  # return: retval first, the ticks stay
        assert spec.value == "vfs_read:r:file->f_pos,count"
        await pilot.press("home")
        choices = screen.query_one("#choices", SelectionList)
        assert choices.get_option_at_index(0).value == "retval"
        await pilot.press("space")
        assert spec.value == "vfs_read:r:retval,file->f_pos,count"
        await tick(pilot, screen, "buf")
        await pilot.press("ctrl+t")  # a char pointer: as a pointer, :string, :ustring
        assert spec.value == "vfs_read:r:retval,file->f_pos,buf:string,count"
        await pilot.press("ctrl+t")
        assert spec.value == "vfs_read:r:retval,file->f_pos,buf:ustring,count"
        # A new function starts from nothing ticked (call or return stays as picked).
        screen.query_one("#query", Input).focus()
        await pilot.press(*"ctrl+u".split(), *"mymod_open")
        await pilot.pause()
        assert spec.value == "mymod_open:r"


async def test_the_spec_goes_through_the_add_dialogs_checks(fk):
    """What the browser builds is what build_probe (the add dialog's path)
    says of it: added when it parses, its error shown when it does not."""
    app = make_app(functions=FunctionIndex(fk.catalog))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        await pilot.press(*"vfs_read", "enter")
        await tick(pilot, screen, "count")
        text = screen.query_one("#spec", Input).value
        assert text == "vfs_read:c:count"
        try:
            build_probe(text, "", "", taken=screen.taken)
            parses = True
        except FieldProblem as err:
            parses, message = False, err.error.message
        before = len(app.feed.statuses())
        await pilot.press("ctrl+s")
        # until it is added (the dialog gone) or refused (its error shown),
        # not 50 fixed pauses
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
                app.screen is not app.main if parses else message not in plain(screen.query_one("#spec-problem"))):
            await pilot.pause(0.01)
        if parses:
            assert len(app.feed.statuses()) == before + 1 and app.screen is app.main
        else:
            assert message in plain(screen.query_one("#spec-problem"))
            assert len(app.feed.statuses()) == before and app.screen is screen


async def test_add_a_probe_and_the_table_gains_it(fk):
    app = make_app(functions=FunctionIndex(fk.catalog))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        await pilot.press(*"mymod_op")
        spec = screen.query_one("#spec", Input)
        assert spec.value == "mymod_open:c"
        spec.focus()
        await pilot.press("end", *":a1", "enter")  # the line is editable: a positional fetch
        for _ in range(100):
            await pilot.pause(0.01)
            if app.screen is app.main:
                break
        assert app.screen is app.main
        added = [s.probe.spec_text for s in app.feed.statuses().values()]
        assert "mymod_open:c:a1" in added
        assert app.main.table.selected_id is not None
        assert app.main.statuses[app.main.table.selected_id].probe.spec_text == "mymod_open:c:a1"


async def test_a_bad_spec_line_is_shown_with_a_caret_and_nothing_is_added(fk):
    app = make_app(functions=FunctionIndex(fk.catalog))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        await pilot.press(*"vfs_read")
        screen.query_one("#spec", Input).focus()
        await pilot.press("end", *":a9", "enter")
        await pilot.pause()
        problem = plain(screen.query_one("#spec-problem"))
        assert "^" in problem and "col 12" in problem
        assert app.screen is screen


async def test_a_compiler_copy_shows_why_it_is_positional_only(fk):
    app = make_app(functions=FunctionIndex(fk.catalog))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        await pilot.press(*"zstd_build.i")
        assert rows(screen)[0] == "zstd_build.isra.0"
        assert "positional fetches (a1..a6) only" in plain(screen.query_one("#notes"))
        choices = screen.query_one("#choices", SelectionList)
        assert choices.option_count == 1 and choices.get_option_at_index(0).value in choices.locked


async def test_without_btf_one_line_says_so_and_names_are_still_listed(fk):
    app = make_app(functions=FunctionIndex(lambda: fk.catalog(btf=None)))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        count = plain(screen.query_one("#count"))
        assert "no BTF" in count and count.count("\n") <= 1
        await pilot.press(*"vfs_read")
        assert rows(screen)[0] == "vfs_read"
        assert "no BTF" in plain(screen.query_one("#notes"))


async def test_in_a_replay_it_browses_but_does_not_add(fk):
    app = make_app(make_feed(replay=True), functions=FunctionIndex(fk.catalog))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        assert "adding needs a live session" in plain(screen.query_one("#count"))
        before = len(app.feed.statuses())
        await pilot.press(*"mymod_open", "ctrl+s")
        await pilot.pause()
        assert len(app.feed.statuses()) == before and app.screen is screen


async def test_from_the_command_palette_and_back_with_escape(fk):
    app = make_app(functions=FunctionIndex(fk.catalog))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p", *"Browse")
        await pilot.pause(0.3)
        await pilot.press("enter")
        for _ in range(100):
            await pilot.pause(0.01)
            if isinstance(app.screen, BrowserScreen):
                break
        assert isinstance(app.screen, BrowserScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.main


async def test_the_add_dialog_completes_function_and_parameter_names(fk):
    app = make_app(functions=FunctionIndex(fk.catalog))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("a", *"vfs_r")
        assert isinstance(app.screen, ProbeDialog)
        spec = app.screen.query_one("#spec", Input)
        for _ in range(200):  # the first suggestion waits for the catalog
            await pilot.pause(0.01)
            if spec._suggestion:  # noqa: SLF001 (no public getter; `right` below proves it)
                break
        await pilot.press("right")
        assert spec.value == "vfs_read"
        await pilot.press(*":c:co")
        await pilot.pause(0.05)
        await pilot.press("right")
        assert spec.value == "vfs_read:c:count"


async def test_the_first_screen_comes_before_the_prototypes(fk):
    """Issue #29: the browser spent about 20 s on `loading 55,072
    functions…` in the VM, most of it reading BTF's prototypes. Names and
    verdicts come first (kallsyms, ftrace, the blacklist): a user can type
    and see verdicts while BTF is read; then the prototypes come, and the
    highlighted function stays."""
    gate = threading.Event()

    def slow_btf_catalog():
        catalog = fk.catalog()
        whole_table = catalog.table

        def table():
            assert gate.wait(60), "the test never let BTF load"
            return whole_table()

        catalog.table = table
        return catalog

    app = make_app(functions=FunctionIndex(slow_btf_catalog))
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_browser(app, pilot, whole=False)
            assert screen.functions.partial
            await pilot.press(*"vfs_r")
            assert rows(screen)[0] == "vfs_read"
            assert "traceable" in str(screen.query_one("#matches").get_option_at_index(0).prompt)
            assert "reading prototypes and parameters from BTF" in plain(screen.query_one("#count"))
            assert plain(screen.query_one("#verdict")).startswith("traceable")
            assert "reading its prototype from BTF" in plain(screen.query_one("#proto"))
            gate.set()
            deadline = time.monotonic() + 60
            while screen.functions.partial and time.monotonic() < deadline:
                await pilot.pause(0.02)
            await pilot.pause()
            assert not screen.functions.partial
            assert rows(screen)[0] == "vfs_read"
            assert "vfs_read(struct file *file" in plain(screen.query_one("#proto"))
            assert "reading prototypes" not in plain(screen.query_one("#count"))
            await pilot.press("enter")
            await tick(pilot, screen, "count")
            assert screen.query_one("#spec", Input).value == "vfs_read:c:count"
    finally:
        gate.set()


def choice_lines(screen) -> list[str]:
    """The choices as drawn, colour left out (as NO_COLOR shows them)."""
    choices = screen.query_one("#choices", SelectionList)
    choices.scroll_home(animate=False, immediate=True)
    return ["".join(seg.text for seg in choices.render_line(y)).strip()
            for y in range(min(choices.option_count, choices.scrollable_content_region.height))]


async def test_ticked_and_unticked_boxes_differ_without_colour(fk, monkeypatch):
    """Issue #29: an unticked box drew as `▐X▌` exactly like a ticked one,
    told apart only by colour (try NO_COLOR)."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(functions=FunctionIndex(fk.catalog))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        await pilot.press(*"vfs_read", "enter")
        await tick(pilot, screen, "count")
        lines = choice_lines(screen)
        count = next(line for line in lines if "size_t count" in line)
        file = next(line for line in lines if "struct file *file" in line)
        assert count[:3] != file[:3], lines  # the box itself says which is ticked
        assert "X" in count[:3] and "X" not in file[:3], lines


async def test_the_cursor_stops_on_every_row_and_a_row_that_cannot_be_ticked_says_why(fk):
    """Issue #29: the cursor skipped "(a struct inside…)" rows, so counting
    rows to reach f_pos picked another member. Every row takes the cursor;
    space on one that cannot be ticked ticks nothing and says why."""
    app = make_app(functions=FunctionIndex(fk.catalog))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        await pilot.press(*"vfs_read", "enter", "right")  # file's members under it
        choices = screen.query_one("#choices", SelectionList)
        refs = [choices.get_option_at_index(i).value for i in range(choices.option_count)]
        assert choices.highlighted == 0 and refs[0] == "file"
        for row in range(1, refs.index("file->f_pos") + 1):  # one key, one row
            await pilot.press("down")
            assert choices.highlighted == row, (row, refs)
        assert refs[choices.highlighted] == "file->f_pos"
        await pilot.press("up", "up", "up")  # past file->f_mode (a bitfield) to file->f_path (a struct)
        assert refs[choices.highlighted] == "file->f_path"
        spec = screen.query_one("#spec", Input)
        await pilot.press("space")
        await pilot.pause()
        assert spec.value == "vfs_read:c" and "file->f_path" not in choices.selected
        assert "struct inside" in plain(screen.query_one("#spec-problem"))


async def test_the_value_a_pointer_parameter_points_to_can_be_ticked(fk):
    """Issue #29: `*pos` (the position pread uses) could not be ticked.
    Under `loff_t *pos` a row reads the loff_t itself: `+0(pos):s64`."""
    app = make_app(functions=FunctionIndex(fk.catalog))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        await pilot.press(*"vfs_read", "enter")
        await tick(pilot, screen, "+0(pos)")
        spec = screen.query_one("#spec", Input)
        assert spec.value == "vfs_read:c:+0(pos):s64"
        assert any("*pos" in line for line in choice_lines(screen))
        assert "enter or ctrl+s: add this probe" in plain(screen.query_one("#spec-problem"))


def test_the_help_lists_the_browse_key():
    app = make_app()
    sections = dict(app.help_sections())
    assert any(getattr(b, "action", None) == "browse" for b in sections["dashboard"])
    assert "function browser" in sections


class TestBrowserSnapshot:
    def test_vfs_read_with_members(self, snap_compare, tmp_path):
        fk = FakeKernel(tmp_path)
        app = make_app(functions=FunctionIndex(fk.catalog))

        async def run_before(pilot) -> None:
            screen = await open_browser(app, pilot)
            await pilot.press(*"vfs_r", "enter", "right")
            await tick(pilot, screen, "file->f_pos")
            await tick(pilot, screen, "count")
            for field in screen.query(Input):
                field.cursor_blink = False
            app.clear_notifications()
            await pilot.pause()

        assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


