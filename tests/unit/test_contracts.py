"""The import contracts in pyproject.toml can fail.

`make test-host` runs `lint-imports`; a contract that no change could break
would guard nothing. Each case copies the package to a temporary directory,
makes one change that breaks the architecture, runs lint-imports on the copy
and requires that exactly the contract guarding that rule reports it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
CONTRACTS = {c["id"]: c["name"] for c in
             tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]}


def _append(path: str, line: str):
    def change(root: Path) -> None:
        target = root / path
        target.write_text(target.read_text() + f"\n{line}\n")
    return change


def _new_module(path: str):
    def change(root: Path) -> None:
        (root / path).write_text('"""A module nobody placed in a layer."""\n')
    return change


BREAKS = {
    "textual in lang": (_append("ktui/lang/model.py", "import textual"), "no-ui-below-the-ui"),
    "rich in kernel": (_append("ktui/kernel/symbols/ksyms.py", "from rich.text import Text"), "no-ui-below-the-ui"),
    "textual in headless": (_append("ktui/headless.py", "import textual.app"), "no-ui-below-the-ui"),
    "record imports pipeline": (_append("ktui/record/layout.py", "import ktui.pipeline.rates"), "layers"),
    "lang imports record": (_append("ktui/lang/spec.py", "from ktui.record import decode"), "layers"),
    "pipeline imports its sibling kernel": (_append("ktui/pipeline/format.py", "import ktui.kernel.symbols.ksyms"),
                                            "layers"),
    "widgets import screens": (_append("ktui/widgets/stats_pane.py", "import ktui.screens.help"), "layers"),
    "a module outside the layers": (_new_module("ktui/stray.py"), "layers"),
    "symbols import attach": (_append("ktui/kernel/symbols/ksyms.py", "import ktui.kernel.attach.explain"),
                              "kernel-rooms"),
    "attach imports the buffers": (_append("ktui/kernel/attach/kprobe_pmu.py", "import ktui.kernel.buffers.ringbuf"),
                                   "kernel-rooms"),
    "buffers import the probed features": (_append("ktui/kernel/buffers/ringbuf.py",
                                                   "import ktui.kernel.machine.preflight"), "kernel-rooms"),
    "a module outside the kernel's rooms": (_new_module("ktui/kernel/stray.py"), "kernel-rooms"),
    "the map readers import bcc": (_append("ktui/kernel/maps/percpu.py", "import bcc"), "bcc-where-it-compiles"),
    "product imports a test double": (_append("ktui/dashboard.py", "from tests.fakefeed import FakeFeed"),
                                      "no-test-code"),
}


def _lint(root: Path) -> tuple[int, dict[str, str]]:
    # One contract per line: a wide console keeps lint-imports from wrapping names.
    env = dict(os.environ, COLUMNS="400", PYTHONPATH=str(root))
    out = subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(root / "pyproject.toml")],
                         cwd=root, env=env, capture_output=True, text=True, timeout=120)
    verdicts = {}
    for cid, name in CONTRACTS.items():
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith(name + " ")), "")
        verdicts[cid] = line[len(name):].strip()
    return out.returncode, verdicts


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "ktui", tmp_path / "ktui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_unchanged_copy_keeps_every_contract(tmp_path):
    rc, verdicts = _lint(_copy(tmp_path))
    assert verdicts == {cid: "KEPT" for cid in CONTRACTS}
    assert rc == 0


@pytest.mark.parametrize("case", sorted(BREAKS))
def test_a_broken_rule_breaks_its_contract(tmp_path, case):
    change, broken = BREAKS[case]
    root = _copy(tmp_path)
    change(root)
    rc, verdicts = _lint(root)
    assert verdicts == {cid: "BROKEN" if cid == broken else "KEPT" for cid in CONTRACTS}
    assert rc != 0
