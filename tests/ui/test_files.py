"""Open a probe set (o) and write one (w)."""

from __future__ import annotations

import dataclasses

from textual.widgets import Input

from ktui.lang.model import ProbeSet
from ktui.lang.probeset import load_probeset
from ktui.record.feed import ProbeState
from ktui.screens.main import MainScreen
from ktui.screens.path_dialog import PathDialog

from .conftest import SIZE, Notes, app_loaded_from, make_app, make_feed
from .test_probes import cell, names

GOOD = """\
name: net
description: sends and receives
probes:
  - spec: tcp_sendmsg:c:size=a3
    label: tx
  - spec: tcp_recvmsg:r:ret=retval
    filter: ret < 0
    enabled: false
"""

BROKEN = """\
name: net
probes:
  - spec: tcp_sendmsg:c:size=a3
  - spec: tcp_recvmsg:q
"""


async def submit_path(pilot, key: str, path: str) -> None:
    await pilot.press(key)
    assert isinstance(pilot.app.screen, PathDialog)
    pilot.app.screen.query_one("#path", Input).value = str(path)
    await pilot.press("enter")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def submit_problem(app) -> str:
    return str(app.screen.query_one("#submit-problem").render())


async def test_open_replaces_every_probe(app, feed, tmp_path):
    path = tmp_path / "net.yaml"
    path.write_text(GOOD)
    notes = Notes()
    async with app.run_test(size=SIZE, message_hook=notes) as pilot:
        await submit_path(pilot, "o", path)
        assert isinstance(app.screen, MainScreen)
        assert names(app) == ["tx", "tcp_recvmsg:r:ret=retval"]
        assert [c for c in feed.calls if c[0] == "remove_probe"] == [("remove_probe", i) for i in range(1, 6)]
        new_ids = app.main.table.probe_ids
        assert cell(app, new_ids[0], "state") == "attached"
        assert cell(app, new_ids[1], "state") == "off"
        assert app.main.meta.name == "net"
        assert notes.any("2 probes")


async def test_open_broken_file_shows_where(app, feed, tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    async with app.run_test(size=SIZE) as pilot:
        await submit_path(pilot, "o", path)
        assert isinstance(app.screen, PathDialog)
        text = submit_problem(app)
        assert text.startswith(f"{path}:4:")  # file:line:col of the bad kind
        assert "kind" in text
        assert app.main.table.row_count == 5  # nothing was touched
        assert not [c for c in feed.calls if c[0] == "remove_probe"]


async def test_open_missing_file_says_so(app, tmp_path):
    async with app.run_test(size=SIZE) as pilot:
        await submit_path(pilot, "o", tmp_path / "nope.yaml")
        assert isinstance(app.screen, PathDialog)
        assert "no such file" in str(app.screen.query_one("#path-hint").render())
        assert "nope.yaml" in submit_problem(app)


async def test_write_then_load_back_equal(app, feed, tmp_path):
    path = tmp_path / "out.yaml"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("space")  # vfs_read off: written as enabled: false
        await app.workers.wait_for_complete()
        await submit_path(pilot, "w", path)
        assert isinstance(app.screen, MainScreen)
        loaded = load_probeset(path)
        running = [s.probe for s in feed.statuses().values()]
        expected_probes = tuple(
            dataclasses.replace(p, enabled=s.state is not ProbeState.OFF)
            for p, s in zip(running, feed.statuses().values())
        )
        assert loaded == ProbeSet(name="demo", description="a bit of everything", probes=expected_probes)
        assert loaded.probes[0].enabled is False
        # the next write proposes the same file
        await pilot.press("w")
        assert app.screen.query_one("#path", Input).value == str(path)


async def test_written_set_opens_again_identically(tmp_path):
    path = tmp_path / "round.yaml"
    feed = make_feed()
    app = make_app(feed)
    async with app.run_test(size=SIZE) as pilot:
        await submit_path(pilot, "w", path)
        before = names(app)
        await submit_path(pilot, "o", path)
        assert names(app) == before


async def test_write_error_is_shown_inline(app, tmp_path):
    async with app.run_test(size=SIZE) as pilot:
        await submit_path(pilot, "w", tmp_path)  # a directory
        assert isinstance(app.screen, PathDialog)
        assert "directory" in submit_problem(app)


async def test_writing_over_a_recording_is_refused_and_it_survives(tmp_path):
    """Issue 15: in a replay `w` proposed the recording's own path and Enter
    replaced the recording with YAML. Now the dialog says it will not, and
    the file is untouched."""
    recording = tmp_path / "run.ktrec"
    body = b"KTREC\x00\x02" + bytes(range(256)) * 64
    recording.write_bytes(body)
    app = make_app(make_feed(replay=True))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        dialog = app.screen
        dialog.query_one("#path", Input).value = str(recording)
        await pilot.pause()
        assert "will not be replaced" in str(dialog.query_one("#path-hint").render())
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, PathDialog)
        assert "refusing to save: it is not a probe set" in submit_problem(app)
    assert recording.read_bytes() == body


async def test_in_the_vm_w_proposes_a_kept_file_and_says_where_it_lands(tmp_path, monkeypatch):
    """Issue 15, in `ktui vm`: `w` proposed the shipped probesets/default.yaml,
    and a path under the guest's /tmp was written and lost with the VM,
    without a word. Now the dialog proposes a file of that name where the
    host keeps it, says so, and refuses a path it does not keep."""
    from ktui.lang.save_place import SHARED_ENV
    from ktui.lang.shipped import default_set

    shared = tmp_path / "checkout"
    shared.mkdir()
    monkeypatch.setenv(SHARED_ENV, str(shared))
    monkeypatch.chdir(shared)
    shipped = default_set()
    before = shipped.read_bytes()
    app = app_loaded_from(shipped)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        dialog = app.screen
        assert dialog.query_one("#path", Input).value == "./default.yaml"
        where = str(dialog.query_one("#path-where").render())
        assert where == f"written to {shared}/default.yaml, on the host too (shared with the VM)"
        lost = tmp_path / "mine.yaml"  # the guest's overlay
        dialog.query_one("#path", Input).value = str(lost)
        await pilot.pause()
        assert "be lost when it stops" in str(dialog.query_one("#path-hint").render())
        assert str(dialog.query_one("#path-where").render()) == f"{lost} is inside the VM only"
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, PathDialog) and "refusing to save" in submit_problem(app)
        assert not lost.exists()
        dialog.query_one("#path", Input).value = "./default.yaml"
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
    assert load_probeset(shared / "default.yaml").name == "demo"
    assert shipped.read_bytes() == before
