"""ktui installed from its wheel works away from the checkout.

The wheel is built once per test session and installed into a fresh venv
(system site packages, for bcc, as users make it); every command then runs
from a directory that is not the checkout, so nothing can quietly come from
the source tree: the shipped probe sets must come from the package itself.
pip may fetch Textual, Rich and click from PyPI (its cache makes that quick).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ktui.lang.kernel_names import KernelNames
from ktui import __version__
from ktui.kernel.codegen import NOT_COMPILED, compiled_part, generate
from ktui.cli import _BtfOnly
from ktui.lang.probeset import load_probeset
from ktui.lang.shipped import default_set, shipped_dir, shipped_sets
from ktui.kernel.generic.shipped import VARIANTS

REPO = Path(__file__).resolve().parents[2]
PIP_TIMEOUT = 600  # a cold pip cache downloads Textual and Rich


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Path:
    """The bin/ folder of a fresh venv holding ktui from a freshly built wheel."""
    root = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(root / "dist"), str(REPO)],
                   check=True, capture_output=True, timeout=PIP_TIMEOUT)
    (wheel,) = (root / "dist").glob("ktui-*.whl")
    venv = root / "venv"
    # --without-pip, then this pip installs into it (--python): the venv is
    # the same, and ensurepip's copy of pip would take longer than the rest.
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
                   check=True, timeout=120)
    subprocess.run([*pip, "--python", str(venv / "bin" / "python"), "install", str(wheel)],
                   check=True, capture_output=True, timeout=PIP_TIMEOUT)
    return venv / "bin"


def run(bindir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    d = tmp_path / "elsewhere"
    d.mkdir()
    return d


def _installed_sets(bindir: Path, cwd: Path) -> Path:
    out = run(bindir, "python", "-c", "from ktui.lang.shipped import shipped_dir; print(shipped_dir())", cwd=cwd)
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip())


def test_in_the_checkout_the_shipped_sets_are_the_top_level_folder():
    assert shipped_dir() == REPO / "probesets"
    assert default_set() == REPO / "probesets" / "default.yaml"
    assert [p.name for p in shipped_sets()] == sorted(p.name for p in (REPO / "probesets").glob("*.yaml"))


def test_the_installed_package_carries_the_shipped_sets(installed, elsewhere):
    sets = _installed_sets(installed, elsewhere)
    assert sets.is_relative_to(installed.parent), sets  # inside the venv, not the checkout
    assert sorted(p.name for p in sets.glob("*.yaml")) == [p.name for p in shipped_sets()]
    for p in shipped_sets():
        assert (sets / p.name).read_bytes() == p.read_bytes()


def test_installed_check_and_compile_work_on_the_shipped_sets(installed, elsewhere):
    files = [str(p) for p in sorted(_installed_sets(installed, elsewhere).glob("*.yaml"))]
    # --syntax-only: the function names are the running kernel's business
    # (memory.yaml names 6.1's allocators); this is about the package data
    out = run(installed, "ktui", "check", "--syntax-only", *files, cwd=elsewhere)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count(": ok (") == len(files) == len(shipped_sets())
    # A set that names parameters (vfs.yaml) is bound to this machine's BTF
    # by `ktui compile`, as by the checkout here; without BTF both refuse it.
    kernel = KernelNames()
    for f, ours in zip(files, shipped_sets()):
        out = run(installed, "ktui", "compile", f, cwd=elsewhere)
        if kernel.problem() is not None and any(p.uses_names for p in load_probeset(ours).probes):
            assert out.returncode != 0 and "need the kernel's BTF" in out.stderr, (f, out.stderr)
            continue
        assert out.returncode == 0, (f, out.stderr)
        # the program the checkout makes, its tracepoints left out (they never compile: no tracefs read)
        compiled, tracepoints = compiled_part(load_probeset(ours, _BtfOnly(kernel)))
        left_out = "".join(f"/* {p.name}: {NOT_COMPILED} */\n" for p in tracepoints)
        assert out.stdout == left_out + (generate(compiled).text if compiled else ""), f


def test_installed_dashboard_gets_past_loading_its_default_set(installed, elsewhere):
    """`ktui` alone loads the default set, then checks the machine. Our hosts
    have no kprobes, so it stops there, with exit 3: not at a missing file."""
    out = run(installed, "ktui", cwd=elsewhere)
    assert "no such file" not in out.stderr.lower(), out.stderr
    assert out.returncode == 3, out.stderr
    assert "kprobes" in out.stderr


def test_installed_version_is_the_package_version(installed, elsewhere):
    out = run(installed, "ktui", "--version", cwd=elsewhere)
    assert out.stdout.strip() == f"ktui, version {__version__}"
    meta = run(installed, "python", "-c", "import importlib.metadata as m; print(m.version('ktui'))", cwd=elsewhere)
    assert meta.stdout.strip() == __version__


def test_the_installed_package_carries_the_prebuilt_generic_program(installed, elsewhere):
    """Its shipped objects are in the wheel, and each is the one built
    from the installed package's own program text: a start away from the
    checkout needs no compiler for it."""
    code = ("from ktui.kernel.generic.loader import program_text\n"
            "from ktui.kernel.generic.shipped import VARIANTS, shipped_dir, shipped_program\n"
            "print(shipped_dir())\n"
            "for name, t, h in VARIANTS:\n"
            "    assert shipped_program(program_text(t, func_arg_helpers=h), t, h) is not None, name\n"
            "print('ok', len(VARIANTS))\n")
    out = run(installed, str(installed / "python"), "-c", code, cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    where, said = out.stdout.split()[0], out.stdout.split("\n")[1]
    assert not Path(where).is_relative_to(REPO), where
    assert said == f"ok {len(VARIANTS)}"
