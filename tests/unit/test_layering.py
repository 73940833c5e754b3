"""The headless commands never load Textual or Rich when they run, and a
launch attaches its probes before it imports the heavy modules.

Which module may import which is the job of the import contracts in
pyproject.toml (`lint-imports`, tests/unit/test_contracts.py). They read
import statements; these tests run the commands through the real command line,
with its lazy imports, in a fresh interpreter, and look at what got loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


# Issue 30, a lean first path: what a launch imports before its first probe
# is attached (tests/launch_path.py runs the real command up to there, the
# kernel stubbed) costs seconds under emulation, during which nothing counts.
# None of these is needed to attach: decoding (numpy), the loop and the
# collector (asyncio), the UI (Textual, Rich), the exporter's library, YAML
# (no file given), the BTF decoder's types (no name used), the C generator
# (the generic engine compiles nothing) and the NDJSON writer.
HEAVY = {"numpy", "asyncio", "textual", "rich", "prometheus_client", "yaml", "ktui.btf.types",
         "ktui.kernel.codegen.program", "ktui.pipeline.ndjson", "ktui.pipeline.collector"}


def _loaded_before_attach(tmp_path, *args: str) -> set[str]:
    out = tmp_path / "modules.txt"
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-m", "tests.launch_path", str(out), *args], capture_output=True,
                         text=True, cwd=ROOT, env=env, timeout=120)
    assert run.returncode == 0 and out.exists(), run.stderr
    return set(out.read_text().split())


@pytest.mark.parametrize("command", [
    ["stream", "--no-stats", "--pid", "1", "-e", "vfs_read:c:a3"],  # through the dispatcher
    ["stream", "--no-stats", "-e", "vfs_read:c"],  # a counting program of its own
    ["record", "-e", "vfs_read:c:a3", "-o", "{tmp}/out.ktrec"],
    ["run", "-e", "vfs_read:c:a3"],  # the dashboard
], ids=["stream", "stream-counting", "record", "dashboard"])
def test_a_launch_attaches_before_it_imports_the_heavy_modules(tmp_path, command):
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    loaded = _loaded_before_attach(tmp_path, *args[:1], "--attach", "kprobe", *args[1:])
    assert "ktui.kernel.session.live" in loaded  # it got as far as the session
    assert sorted(loaded & HEAVY) == []


def test_the_launch_check_can_fail(tmp_path):
    """A probe set file needs YAML before the attach: the check sees it."""
    path = tmp_path / "set.yaml"
    path.write_text("name: s\nprobes:\n  - spec: vfs_read:c:a3\n")
    loaded = _loaded_before_attach(tmp_path, "stream", "--attach", "kprobe", str(path))
    assert sorted(loaded & HEAVY) == ["yaml"]
