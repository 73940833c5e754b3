"""The headless commands never load Textual or Rich when they run.

Which module may import which is the job of the import contracts in
pyproject.toml (`lint-imports`, tests/unit/test_contracts.py). They read
import statements; this test runs the commands through the real command line,
with its lazy imports, in a fresh interpreter, and looks at what got loaded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Each step is a command line (a list) or, for the control, a module to import.
RUN = """
import importlib, sys
from ktui.cli import main
codes = []
for args in {commands!r}:
    if isinstance(args, str):
        importlib.import_module(args)
        continue
    try:
        main(args)
    except SystemExit as exc:
        codes.append(exc.code or 0)
print("exit", codes, "loaded", sorted({{m.split('.')[0] for m in sys.modules}} & {{'textual', 'rich'}}),
      file=sys.stderr)
"""


def _run(commands: list[list[str] | str]) -> str:
    out = subprocess.run([sys.executable, "-c", RUN.format(commands=commands)], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stderr.strip().splitlines()[-1]


def test_check_compile_and_stream_from_a_recording_load_neither_textual_nor_rich(tmp_path):
    missing = str(tmp_path / "none.ktrec")
    assert _run([["check", "probesets/vfs.yaml"], ["compile", "probesets/vfs.yaml"],
                 ["compile", "--buffer", "perf", "-e", "vfs_read:r:retval:s64"],
                 ["stream", "--from", missing]]) == "exit [0, 0, 0, 1] loaded []"


def test_the_check_can_fail():
    assert _run([["check", "probesets/vfs.yaml"], "ktui.app"]) == "exit [0] loaded ['rich', 'textual']"
