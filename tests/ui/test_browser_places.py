"""The browser beyond kernel functions (issue 31): a tracepoint and its
fields from the fixture tracefs, a gcc-built file's functions and its USDT
probe points (tests/sdtprog.py), a path completed from its folder; each
typed, picked and ticked with the keys, and added through the dashboard."""

from __future__ import annotations

import os

import pytest
from textual.widgets import Input, SelectionList

from ktui.screens.browse_model import FunctionIndex
from ktui.screens.browse_places import Places
from tests.fakesysfs import FakeKernel
from tests.sdtprog import build_shop
from tests.unit.tracefs import tracefs

from .conftest import SIZE, make_app, plain
from .test_browser import open_browser, rows, tick


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    return str(build_shop(tmp_path_factory.mktemp("shop")))


@pytest.fixture
def index(tmp_path):
    return FunctionIndex(FakeKernel(tmp_path).catalog, places=Places(tracefs("6.12")))


async def highlight(pilot, screen, name: str) -> None:
    """Down the matches (keys, as a user) until `name` is highlighted."""
    for _ in range(len(rows(screen))):
        if rows(screen)[screen.query_one("#matches").highlighted] == name:
            return
        await pilot.press("down")
    raise AssertionError(f"{name} not among {rows(screen)}")


async def added(pilot, app) -> list[str]:
    for _ in range(100):
        await pilot.pause(0.01)
        if app.screen is app.main:
            break
    assert app.screen is app.main
    return [s.probe.spec_text for s in app.feed.statuses().values()]


async def test_a_tracepoint_its_fields_ticked_and_added(index):
    app = make_app(functions=index)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        await pilot.press(*"sched/")
        assert rows(screen) == ["sched/sched_process_exec", "sched/sched_switch", "sched/sched_wakeup"]
        assert "3 of 18 tracepoints match" in plain(screen.query_one("#count"))
        await highlight(pilot, screen, "sched/sched_switch")
        assert "sched/sched_switch" in plain(screen.query_one("#proto"))
        assert "the tracepoint" in plain(screen.query_one("#kind"))
        spec = screen.query_one("#spec", Input)
        assert spec.value == "sched/sched_switch:t"
        await pilot.press("enter")
        choices = screen.query_one("#choices", SelectionList)
        shown = [str(choices.get_option_at_index(i).prompt) for i in range(choices.option_count)]
        assert any("prev_comm:string" in s for s in shown) and any("next_pid:s32" in s for s in shown)
        await tick(pilot, screen, "next_pid")
        await pilot.press("home")
        await tick(pilot, screen, "prev_comm")
        assert spec.value == "sched/sched_switch:t:prev_comm,next_pid"
        await pilot.press("ctrl+r")  # no call or return at a tracepoint: nothing changes
        assert spec.value == "sched/sched_switch:t:prev_comm,next_pid"
        await pilot.press("ctrl+s")
        assert "sched/sched_switch:t:prev_comm,next_pid" in await added(pilot, app)


async def test_a_syscalls_filename_is_read_as_a_user_string_when_asked(index):
    app = make_app(functions=index)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        await pilot.press(*"syscalls/sys_enter_openat", "enter")
        await tick(pilot, screen, "filename")
        spec = screen.query_one("#spec", Input)
        assert spec.value == "syscalls/sys_enter_openat:t:filename"
        await pilot.press("ctrl+t", "ctrl+t")
        assert spec.value == "syscalls/sys_enter_openat:t:filename:ustring"


async def test_a_files_function_by_position_call_and_return(index, shop):
    app = make_app(functions=index)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        screen.query_one("#query", Input).value = f"{shop}:shop_a"  # (a long path: pasted)
        await pilot.pause()
        assert rows(screen)[0] == "shop_add"
        assert f"of {shop} match" in plain(screen.query_one("#count"))
        spec = screen.query_one("#spec", Input)
        assert spec.value == f"{shop}:shop_add:c"
        await pilot.press("enter")
        await tick(pilot, screen, "a1")
        await tick(pilot, screen, "a2")
        assert spec.value == f"{shop}:shop_add:c:a1,a2"
        await pilot.press("ctrl+r", "home", "space")  # return: retval comes first
        assert spec.value == f"{shop}:shop_add:r:retval,a1,a2"
        await pilot.press("ctrl+s")
        assert f"{shop}:shop_add:r:retval,a1,a2" in await added(pilot, app)


async def test_an_import_says_where_to_probe_it_and_makes_no_spec(index, shop):
    app = make_app(functions=index)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        screen.query_one("#query", Input).value = f"{shop}:puts"
        await pilot.pause()
        assert rows(screen)[0] == "puts"
        assert "probe it there" in plain(screen.query_one("#verdict"))
        assert screen.query_one("#spec", Input).value == ""


async def test_a_files_usdt_probes_picked_with_their_arguments(index, shop):
    app = make_app(functions=index)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        screen.query_one("#query", Input).value = f"usdt {shop}"
        await pilot.pause()
        assert rows(screen) == ["shop:added", "shop:listed", "shop:start"]
        assert f"3 USDT probes of {shop}" in plain(screen.query_one("#count"))
        spec = screen.query_one("#spec", Input)
        assert spec.value == f"{shop}:shop:added:usdt"
        await pilot.press("enter")
        choices = screen.query_one("#choices", SelectionList)
        assert choices.option_count == 2  # its note's two arguments
        await tick(pilot, screen, "a2")
        assert spec.value == f"{shop}:shop:added:usdt:a2"
        await pilot.press("ctrl+s")
        assert f"{shop}:shop:added:usdt:a2" in await added(pilot, app)


async def test_a_path_is_completed_from_the_list(index, shop):
    folder = os.path.dirname(shop)
    app = make_app(functions=index)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        query = screen.query_one("#query", Input)
        query.value = f"{folder}/"
        await pilot.pause()
        assert rows(screen) == [shop, f"{shop}.c"]
        assert "enter picks one" in plain(screen.query_one("#count"))
        await pilot.press("enter")  # the file: on to its functions
        await pilot.pause()
        assert query.value == f"{shop}:" and "shop_add" in rows(screen)
        await pilot.press(*"shop_l")
        assert rows(screen)[0] == "shop_list"
        assert screen.query_one("#spec", Input).value == f"{shop}:shop_list:c"


async def test_back_to_kernel_functions_keeps_call_or_return_and_ctrl_r_only_where_it_applies(index):
    app = make_app(functions=index)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        await pilot.press(*"vfs_read", "ctrl+r")
        spec = screen.query_one("#spec", Input)
        assert spec.value == "vfs_read:r"
        await pilot.press("ctrl+u", *"sched/sched_sw")
        assert spec.value == "sched/sched_switch:t"
        assert screen.check_action("kind", ()) is False  # ctrl+r leaves the footer
        await pilot.press("ctrl+u", *"vfs_read")
        assert spec.value == "vfs_read:r"
        assert screen.check_action("kind", ()) is True


async def test_typing_fast_from_a_function_to_a_file_shows_only_the_file(index, shop):
    """Found in a terminal: a highlight of the kernel's `dup_fn`, still in
    the queue when the query had become `usdt PATH`, was looked up among
    the file's probes (KeyError, the dashboard gone). A highlight is
    shown only while it is still the list's."""
    app = make_app(functions=index)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        query = screen.query_one("#query", Input)
        query.value = "dup_fn"
        query.value = f"usdt {shop}"
        await pilot.pause()
        await pilot.pause()
        assert app.failure is None and app.screen is screen
        assert rows(screen)[0] == "shop:added"
        assert screen.query_one("#spec", Input).value == f"{shop}:shop:added:usdt"
