"""The modules left of the app must not pull in Textual or Rich."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Everything left of the app in spec -> probeset -> codegen -> session ->
# collector -> app, plus the headless commands built on it.
PURE = (
    "ktui.model",
    "ktui.spec",
    "ktui.chars",
    "ktui.filters",
    "ktui.probeset",
    "ktui.layout",
    "ktui.codegen",
    "ktui.decode",
    "ktui.ringbuf",
    "ktui.perfbuf",
    "ktui.kprobe_pmu",
    "ktui.ksyms",
    "ktui.quiet",
    "ktui.session",
    "ktui.collector",
    "ktui.recording",
    "ktui.replay",
    "ktui.ndjson",
    "ktui.headless",
    "ktui.preflight",
    "ktui.cli",
    "ktui.feed",
    "ktui.rates",
    "ktui.format",
    "ktui.fakefeed",
    "ktui.widgets.event_window",
    "ktui.screens.probe_ops",
)


def test_pure_modules_do_not_import_textual_or_rich():
    code = (
        "import importlib, sys\n"
        f"for name in {PURE!r}: importlib.import_module(name)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'rich'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_check_can_fail():
    code = "import ktui.app, sys; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "True"
