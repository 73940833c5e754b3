"""Issue 15, as an acceptance tester tries it: saving (`w`) never destroys
a user's data. In a replay `w` proposes neither the recording nor a link to
it, whatever the recording is called or however it was given; replacing an
existing file takes a second answer that only `y` gives (Enter, typed twice
quickly, does not), and the question names the set and the comments it
loses; a symlink is neither followed nor replaced."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from ktui.lang.probeset import load_probeset
from ktui.pipeline.replay import ReplayFeed
from ktui.screens.confirm import ConfirmReplace
from ktui.screens.main import MainScreen
from ktui.screens.path_dialog import PathDialog

from .conftest import SIZE, app_loaded_from, make_app, make_feed

FORMAT1 = Path(__file__).parent.parent / "fixtures" / "format1.ktrec"
HAND = "# my reads, by hand\nname: reads\nprobes:\n  - spec: vfs_read:c  # every read\n"


async def settle(pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def proposal(app) -> str:
    assert isinstance(app.screen, PathDialog)
    return app.screen.query_one("#path", Input).value


def text_of(app, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


def replay_layouts(tmp_path: Path):
    """(how the recording was given, the file that must survive) for each
    way a user may name a recording."""
    home = tmp_path / "recs"
    home.mkdir()
    plain = home / "run.ktrec"
    shutil.copy(FORMAT1, plain)
    renamed = tmp_path / "x.yaml"  # in the current directory
    shutil.copy(FORMAT1, renamed)
    away = home / "y.yaml"  # a .yaml copy elsewhere: ./y.yaml beside the cwd is fine
    shutil.copy(FORMAT1, away)
    link = tmp_path / "link.yaml"
    link.symlink_to(plain)
    return [("run.ktrec", plain, "relative"), (str(plain), plain, "absolute"),
            ("x.yaml", renamed, "renamed"), (str(away), away, "yaml elsewhere"),
            ("link.yaml", plain, "symlink")]


@pytest.mark.parametrize("case", range(5))
async def test_replay_w_and_enter_never_touch_the_recording(tmp_path, monkeypatch, case):
    layouts = replay_layouts(tmp_path)
    given, survivor, _how = layouts[case]
    monkeypatch.chdir(tmp_path if given != "run.ktrec" else tmp_path / "recs")
    before = {p: p.read_bytes() for _g, p, _h in layouts}
    feed = ReplayFeed(given, speed=0)
    app = make_app(feed)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        proposed = proposal(app)
        assert os.path.realpath(proposed) != os.path.realpath(survivor)
        assert not os.path.lexists(proposed)  # a new file: nothing to ask about
        if given == "run.ktrec":
            assert proposed == "./run.yaml"  # named after the recording
        await pilot.press("enter", "enter")  # and once more, by habit
        await settle(pilot)
        written = load_probeset(proposed)
    assert {s.probe.name for s in feed.statuses().values()} == {p.name for p in written.probes}
    assert {p: p.read_bytes() for _g, p, _h in layouts} == before
    assert (tmp_path / "link.yaml").is_symlink()


async def test_replacing_takes_y_enter_twice_does_not(tmp_path):
    own = tmp_path / "reads.yaml"
    own.write_text(HAND)
    app = app_loaded_from(own)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        assert proposal(app) == str(own)
        assert "asked before it is replaced" in text_of(app, "#path-hint")
        await pilot.press("enter", "enter", "enter")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmReplace)
        question = text_of(app, "Static")
        assert f"{own} exists: the probe set 'reads' (1 probe)" in question
        assert "comments and layout will be lost" in question
        assert "press y" in text_of(app, "#replace-reminder")
        assert own.read_text() == HAND
        await pilot.press("n")
        await settle(pilot)
        assert isinstance(app.screen, PathDialog) and "kept" in text_of(app, "#submit-problem")
        assert own.read_text() == HAND
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        assert load_probeset(own).name == "demo"
        # the second save in a row asks again (now without comments to lose)
        await pilot.press("w", "enter", "enter")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmReplace)
        assert "comments" not in text_of(app, "Static")
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, PathDialog)


async def test_a_set_opened_through_a_link_is_saved_to_its_file_and_the_link_stays(tmp_path):
    real = tmp_path / "dotfiles" / "reads.yaml"
    real.parent.mkdir()
    real.write_text(HAND)
    link = tmp_path / "reads.yaml"
    link.symlink_to(real)
    app = app_loaded_from(link)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        assert proposal(app) == str(real)
        # the link itself, typed: refused before Enter, with its target named
        app.screen.query_one("#path", Input).value = str(link)
        await pilot.pause()
        assert f"symbolic link (to {real})" in text_of(app, "#path-hint")
        await pilot.press("enter")
        await settle(pilot)
        assert "refusing to save" in text_of(app, "#submit-problem")
        app.screen.query_one("#path", Input).value = str(real)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
    assert link.is_symlink() and load_probeset(link).name == "demo"


@pytest.mark.parametrize("target", ["shipped", "recording"])
async def test_a_link_to_a_shipped_set_or_a_recording_is_not_proposed_nor_written(tmp_path, monkeypatch, target):
    from ktui.lang.shipped import default_set

    monkeypatch.chdir(tmp_path)
    to = default_set() if target == "shipped" else tmp_path / "run.ktrec"
    if target == "recording":
        shutil.copy(FORMAT1, to)
    before = to.read_bytes()
    link = tmp_path / "mine.yaml"
    link.symlink_to(to)
    app = app_loaded_from(link)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        assert os.path.realpath(proposal(app)) != os.path.realpath(to)
        assert not os.path.lexists(proposal(app))
        app.screen.query_one("#path", Input).value = "mine.yaml"
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, PathDialog) and "symbolic link" in text_of(app, "#submit-problem")
        await pilot.press("y")  # no question was asked: a y is just typed
        await settle(pilot)
    assert to.read_bytes() == before and link.is_symlink()


async def test_the_shipped_default_proposes_a_new_file_in_the_current_directory(tmp_path, monkeypatch):
    """docs/dashboard.md: `w` on the shipped set proposes ./default.yaml; once that
    exists (an earlier save), Enter asks before replacing it."""
    from ktui.lang.shipped import default_set

    monkeypatch.chdir(tmp_path)
    shipped = default_set()
    before = shipped.read_bytes()
    app = app_loaded_from(shipped)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        assert proposal(app) == "./default.yaml"
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, MainScreen)
        await pilot.press("w")
        assert proposal(app) == "./default.yaml"
        await pilot.press("enter", "enter")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmReplace)
    assert shipped.read_bytes() == before
    assert load_probeset(tmp_path / "default.yaml").name == "demo"


@pytest.mark.parametrize("content", [
    b"services:\n  web:\n    image: nginx\n",  # docker-compose
    b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n",  # k8s
    b"",
    bytes(range(256)),
])
async def test_what_is_not_a_probe_set_is_refused_without_a_question(tmp_path, content):
    other = tmp_path / "compose.yaml"
    other.write_bytes(content)
    app = make_app(make_feed())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        app.screen.query_one("#path", Input).value = str(other)
        await pilot.pause()
        assert "will not be replaced: it is not a probe set" in text_of(app, "#path-hint")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, PathDialog)
        assert "refusing to save: it is not a probe set" in text_of(app, "#submit-problem")
        await pilot.press("y")  # no question was asked: a y is just typed
        await settle(pilot)
        assert isinstance(app.screen, PathDialog)
    assert other.read_bytes() == content


async def test_a_path_in_a_missing_folder_is_said_before_enter(tmp_path):
    app = make_app(make_feed())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        app.screen.query_one("#path", Input).value = str(tmp_path / "nope" / "x.yaml")
        await pilot.pause()
        assert f"no such folder: {tmp_path / 'nope'}" in text_of(app, "#path-hint")


async def test_enters_typed_ahead_of_the_question_ask_it_once(tmp_path):
    """In tmux, `w` and four quick Enters stacked a question per Enter (the
    Enters reached the path field before the first question took the
    keys): one `n` then left another question up."""
    own = tmp_path / "reads.yaml"
    own.write_text(HAND)
    app = app_loaded_from(own)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        dialog = app.screen
        field = dialog.query_one("#path", Input)
        for _ in range(3):  # as fast as a terminal delivers them: before any screen change
            dialog._submitted(Input.Submitted(field, field.value))
        await settle(pilot)
        assert sum(isinstance(s, ConfirmReplace) for s in app.screen_stack) == 1
        await pilot.press("n")
        await settle(pilot)
        assert app.screen is dialog
    assert own.read_text() == HAND
