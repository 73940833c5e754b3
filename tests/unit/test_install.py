"""`make run` installs once (issue 15): on a fresh clone it ran
install.sh and then install.sh --vm, and the second pip-installed ktui all
over again. Run here on a copy of the Makefile and scripts/install.sh with
stand-ins for pip, apt's queries, the venv's python and ktui, counting the
pip installs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUBS = {
    # every apt package is there; no per-kernel headers package exists
    "bin/dpkg-query": "#!/bin/sh\necho 'install ok installed'\n",
    "bin/apt-cache": "#!/bin/sh\nexit 1\n",
    ".venv/bin/python": "#!/bin/sh\nexit 0\n",  # `import bcc` works
    ".venv/bin/pip": '#!/bin/sh\necho "$*" >> "$(dirname "$0")/../../pip-calls"\n',
    ".venv/bin/ktui": '#!/bin/sh\necho "ktui $*" >> "$(dirname "$0")/../../ktui-calls"\n',
}


@pytest.fixture
def clone(tmp_path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "install.sh", tmp_path / "scripts")
    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for name, text in STUBS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    return tmp_path


def _run(clone: Path, *args: str) -> None:
    env = {**os.environ, "PATH": f"{clone / 'bin'}:{os.environ['PATH']}"}
    env.pop("MAKEFLAGS", None)
    subprocess.run(args, cwd=clone, env=env, check=True, capture_output=True, timeout=60)


def _pip_calls(clone: Path) -> list[str]:
    calls = clone / "pip-calls"
    return calls.read_text().splitlines() if calls.exists() else []


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_on_a_fresh_clone_installs_once(clone):
    _run(clone, "make", "run")
    assert len(_pip_calls(clone)) == 1, _pip_calls(clone)
    assert (clone / "ktui-calls").read_text().startswith("ktui")
    _run(clone, "make", "run")  # and nothing the second time
    assert len(_pip_calls(clone)) == 1


def test_each_option_installs_only_what_it_adds(clone):
    _run(clone, "bash", "scripts/install.sh")
    _run(clone, "bash", "scripts/install.sh", "--vm")
    _run(clone, "bash", "scripts/install.sh", "--vm")
    _run(clone, "bash", "scripts/install.sh", "--test")
    _run(clone, "bash", "scripts/install.sh")
    calls = _pip_calls(clone)
    assert len(calls) == 3, calls
    assert "-e ." in calls[0] and "virtme" not in calls[0]
    assert calls[1].split()[-1].startswith("virtme-ng") and "-e" not in calls[1]  # ktui not again
    assert "-e .[test]" in calls[2] and "virtme" not in calls[2]


def test_a_changed_pyproject_installs_again(clone):
    _run(clone, "bash", "scripts/install.sh", "--vm")
    os.utime(clone / "pyproject.toml", (2e9, 2e9))  # newer than the stamps
    _run(clone, "bash", "scripts/install.sh", "--vm")
    calls = _pip_calls(clone)
    assert len(calls) == 2 and all("virtme-ng" in c and "-e ." in c for c in calls), calls
