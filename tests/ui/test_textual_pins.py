"""Where ktui leans on Textual beyond its public API, the version it was checked against.

ktui/app.py overrides App._handle_exception (Textual has no public hook for
an exception escaping a handler, timer or worker). That was checked against
the Textual below. An upgrade fails this test on purpose: read the override
(and the crash tests in test_crash.py) against the new Textual, then move
the pin here and in pyproject.toml together.

ktui/screens/modal_background.py draws a modal's dimmed background from the
screen below's compositor (`Screen._compositor`, `Compositor._get_renders`,
`Compositor.render_strips`) and Textual's own tint
(`BackgroundScreen.process_segments`), because `Screen.render` returns a
`BackgroundScreen` for it: checked against the same version
(tests/ui/test_modal_background.py compares it with Textual's own drawing).

tests/ui/conftest.py shortens the step in which Pilot.pause()/press() wait
for the app to go idle (`textual._wait.SLEEP_GRANULARITY`, `SLEEP_IDLE`,
module globals that `wait_for_idle` reads each time it sleeps): the default
1/50 s steps were ~40% of the UI suite's wall time. If a new Textual renames
them or binds them at definition time, the setting silently does nothing:
checked below.
"""

from __future__ import annotations

import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path

import textual._wait
from textual._compositor import Compositor
from textual.app import App
from textual.renderables.background_screen import BackgroundScreen

from ktui.app import KtuiApp

CHECKED_AGAINST = "8.2.8"
REPO = Path(__file__).resolve().parents[2]


def test_textual_is_the_version_the_private_override_was_checked_against():
    assert version("textual") == CHECKED_AGAINST, (
        f"Textual {version('textual')} is installed; ktui/app.py's _handle_exception "
        f"override was checked against {CHECKED_AGAINST}: check it again, then update this pin")


def test_pyproject_pins_that_version():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"textual=={CHECKED_AGAINST}" in deps


def test_the_overridden_method_still_exists_with_the_same_shape():
    assert list(inspect.signature(App._handle_exception).parameters) == ["self", "error"]
    assert KtuiApp._handle_exception is not App._handle_exception


def test_what_the_modal_background_uses_is_still_there():
    assert list(inspect.signature(Compositor._get_renders).parameters) == ["self", "crop"]
    assert list(inspect.signature(Compositor.render_strips).parameters) == ["self", "size"]
    assert list(inspect.signature(BackgroundScreen.process_segments).parameters) == ["segments", "color"]


def test_the_idle_wait_step_the_ui_tests_shorten_is_still_read_at_call_time():
    assert textual._wait.SLEEP_GRANULARITY == 1 / 200  # conftest.py's setting took
    assert textual._wait.SLEEP_IDLE == textual._wait.SLEEP_GRANULARITY / 20
    source = inspect.getsource(textual._wait.wait_for_idle)
    assert "sleep(SLEEP_GRANULARITY)" in source and "< SLEEP_IDLE" in source
    assert list(inspect.signature(textual._wait.wait_for_idle).parameters) == ["min_sleep", "max_sleep"]
