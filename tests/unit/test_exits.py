"""Exit statuses are written in one module (ktui/exits.py), used by all.

They were defined in cli.py, headless.py and dashboard.py, and written as
bare numbers elsewhere (run_replay's `return 1`)."""

from __future__ import annotations

import ast
from pathlib import Path

from click.testing import CliRunner

from ktui import cli, exits

ROOT = Path(__file__).resolve().parents[2]
EXITING = {"exit", "_exit", "_fail", "_leave"}  # sys.exit, os._exit, cli's helpers


def _python_files():
    return sorted(p for p in (ROOT / "ktui").rglob("*.py") if p.name != "exits.py")


def test_no_module_but_exits_defines_an_exit_status():
    for path in _python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            names = [t.id for t in targets if isinstance(t, ast.Name) and t.id.startswith("EXIT_")]
            assert not names, f"{path.relative_to(ROOT)} defines {names}: use ktui.exits"


def test_no_exit_is_a_bare_number():
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in EXITING:
                numbers = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, int)]
                assert not numbers, f"{path.relative_to(ROOT)}:{node.lineno} exits with a bare {numbers[0]}"


def test_the_statuses_are_distinct():
    values = [getattr(exits, n) for n in dir(exits) if n.startswith("EXIT_")]
    assert len(values) == len(set(values)) == 6


def test_a_recording_that_cannot_be_read_is_invalid_input(tmp_path):
    """run_replay said `return 1`; it is EXIT_INVALID, like `stream --from`."""
    missing = str(tmp_path / "missing.ktrec")
    for args in (["replay", missing], ["stream", "--from", missing]):
        result = CliRunner().invoke(cli.main, args)
        assert result.exit_code == exits.EXIT_INVALID, result.output
        assert result.output.startswith(f"ktui: {missing}:")
