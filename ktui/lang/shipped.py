"""Where the probe sets that ship with ktui are, installed or in a checkout.

probesets/ stays at the top of the repository, where users browse it and
the docs point; the wheel carries the same files inside the package as
ktui/probesets (pyproject.toml, hatch's force-include). So an installed ktui
finds them among its package files, and a checkout (run from the source
tree, or installed in editable mode, where the package is the source tree)
finds them beside the package. Everything that needs a shipped set asks
here, so no caller guesses a path relative to its own file.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

DEFAULT_NAME = "default.yaml"


def shipped_dir() -> Path:
    """The folder of shipped probe sets: the package's copy, else the checkout's."""
    installed = files("ktui") / "probesets"
    if isinstance(installed, Path) and installed.is_dir():
        return installed
    return Path(__file__).resolve().parents[2] / "probesets"


def shipped_sets() -> list[Path]:
    """Every shipped probe set, by name."""
    return sorted(shipped_dir().glob("*.yaml"))


def default_set() -> Path:
    """The set the dashboard loads when given none."""
    return shipped_dir() / DEFAULT_NAME
