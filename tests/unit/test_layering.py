"""The modules left of the app must not pull in Textual or Rich."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Everything left of the app in spec -> probeset -> codegen -> session ->
# collector -> app, plus the headless commands built on it.
PURE = (
    "ktui.lang.model",
    "ktui.lang.spec",
    "ktui.lang.chars",
    "ktui.lang.filters",
    "ktui.lang.probeset",
    "ktui.record.layout",
    "ktui.kernel.codegen",
    "ktui.record.decode",
    "ktui.kernel.ringbuf",
    "ktui.kernel.perfbuf",
    "ktui.kernel.kprobe_pmu",
    "ktui.kernel.ksyms",
    "ktui.kernel.catalog",
    "ktui.kernel.catalog_text",
    "ktui.kernel.namecheck",
    "ktui.kernel.ftrace",
    "ktui.kernel.modules",
    "ktui.lang.locate",
    "ktui.listing",
    "ktui.kernel.quiet",
    "ktui.kernel.session",
    "ktui.pipeline.collector",
    "ktui.pipeline.recording",
    "ktui.pipeline.replay",
    "ktui.pipeline.ndjson",
    "ktui.headless",
    "ktui.kernel.preflight",
    "ktui.cli",
    "ktui.record.feed",
    "ktui.pipeline.rates",
    "ktui.pipeline.format",
    "tests.fakefeed",
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


BTF = ("ktui.btf", "ktui.btf.kinds", "ktui.btf.types", "ktui.btf.decode", "ktui.btf.render",
       "ktui.btf.access", "ktui.btf.index", "ktui.btf.cache", "ktui.btf.sysfs")


def test_the_btf_package_stands_below_everything_else():
    """lang, kernel and the UI import ktui.btf; it imports none of them,
    nor bcc, Textual or Rich."""
    code = (
        "import importlib, sys\n"
        f"for name in {BTF!r}: importlib.import_module(name)\n"
        "ours = sorted(m for m in sys.modules if m.startswith('ktui.') and not m.startswith('ktui.btf'))\n"
        "other = sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'rich', 'bcc', 'click', 'yaml'})\n"
        "print(ours, other)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[] []", out.stdout
