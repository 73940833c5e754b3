"""The add dialog asks the running kernel (here a fake one: tests/fakesysfs.py
with its BTF) about a probe as it is typed: an unknown function, a name
that is not a parameter, a member that is not there, each under its field
with a caret, before anything reaches the kernel; a probe the kernel
accepts adds."""

from __future__ import annotations

import time

import pytest
from textual.widgets import Static

from ktui.screens.browse_model import FunctionIndex
from ktui.screens.probe_dialog import ProbeDialog
from tests.fakesysfs import FakeKernel

from .conftest import SIZE, make_app
from .test_dialogs import type_into


def problem(app, field: str) -> str:
    return str(app.screen.query_one(f"#{field}-problem", Static).render())


async def settle(pilot, app, field: str, want: str) -> str:
    """The kernel answers from a worker thread: wait for `want` to show."""
    for _ in range(300):
        await pilot.pause(0.01)
        text = problem(app, field)
        if want in text:
            return text
    return problem(app, field)


async def kernel_answered(pilot) -> None:
    """Until the dialog's kernel check (a worker thread) has answered, or a
    minute: its answer is applied (call_from_thread) before it finishes.
    (It was 100 pauses of 10 ms, long enough on a quiet machine only.)"""
    deadline = time.monotonic() + 60
    while any(w.group == "kernel-check" and not w.is_finished for w in pilot.app.workers):
        assert time.monotonic() < deadline, "the kernel check never answered"
        await pilot.pause(0.01)
    await pilot.pause()


@pytest.fixture
def app(tmp_path):
    return make_app(functions=FunctionIndex(FakeKernel(tmp_path).catalog))


@pytest.mark.parametrize("spec, field, filter_text, says", [
    ("vfs_raed:c:a3", "spec", "", "unknown kernel function 'vfs_raed' (did you mean vfs_read"),
    ("vfs_read:c:cuont", "spec", "", "vfs_read has no parameter 'cuont' (did you mean count?)"),
    ("vfs_read:c:file->f_pso", "spec", "", "struct file has no member 'f_pso' (did you mean f_pos"),
    ("vfs_read:c:a1", "filter", "cuont > 1", "filter: vfs_read has no parameter 'cuont'"),
    ("vsf_*:c", "spec", "", "vsf_* matches no kernel functions on this kernel (did you mean vfs_*?)"),
])
async def test_kernel_check_shows_the_problem_under_its_field(app, spec, field, filter_text, says):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await type_into(pilot, "#spec", spec)
        if filter_text:
            await type_into(pilot, "#filter", filter_text)
        text = await settle(pilot, app, field, says)
        assert says in text, text
        assert "^" in text  # a caret under the column
        # Enter does not add it
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ProbeDialog)


async def test_a_probe_the_kernel_accepts_adds(app):
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await type_into(pilot, "#spec", "vfs_read:c:count,file->f_pos")
        await type_into(pilot, "#filter", "count > 4096")
        await kernel_answered(pilot)  # its answer: none
        assert problem(app, "spec") == "" and problem(app, "filter") == ""
        await pilot.press("enter")
        for _ in range(100):
            await pilot.pause(0.01)
            if not isinstance(app.screen, ProbeDialog):
                break
        assert not isinstance(app.screen, ProbeDialog)


async def test_a_wildcard_that_matches_adds(app):
    """`vfs_*:c` is checked by its matches, not as one function named `vfs_*`."""
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("a")
        await type_into(pilot, "#spec", "vfs_*:c:a1")
        await kernel_answered(pilot)
        assert problem(app, "spec") == ""
        await pilot.press("enter")
        for _ in range(100):
            await pilot.pause(0.01)
            if not isinstance(app.screen, ProbeDialog):
                break
        assert not isinstance(app.screen, ProbeDialog)
