"""The generic program compiled on the host for the VM's kernel
(ktui/vm/prebuild.py), and how `python -m ktui.vm` hands the guest its
cache. That the guest's ktui finds the host's compile under its own key is
proven in the VM: tests/kernel/conftest.py's warm_cache fails otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ktui.vm import __main__ as vm_main_module
from ktui.vm import boot, prebuild
from ktui.vm.__main__ import guest_cache
from ktui.vm.boot import Machine

KERNEL = "6.1.0-3-amd64"


def machine(cwd: Path) -> Machine:
    return Machine(kernel=KERNEL, cwd=cwd, rwdirs=(cwd,))


def test_the_guest_gets_the_cache_the_host_compiled_into(tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(vm_main_module, "prebuild",
                        lambda kernel, home: calls.append((kernel, home)) or (True, "kprobe compiled 2.0"))
    env = guest_cache(machine(tmp_path))
    home = tmp_path / ".vmout" / f"cache-{KERNEL}"
    assert calls == [(KERNEL, home)]
    assert env == {"XDG_CACHE_HOME": str(home), "KTUI_VM_PREBUILT": "1"}
    assert capsys.readouterr().err == f"vm: the generic program for {KERNEL}, compiled on the host: " \
                                      "kprobe compiled 2.0\n"


def test_without_a_host_compile_the_guest_compiles_and_is_told_nothing_was_built(tmp_path, monkeypatch,
                                                                                  capsys):
    monkeypatch.setattr(vm_main_module, "prebuild", lambda kernel, home: (False, "not root"))
    assert guest_cache(machine(tmp_path)) == {"XDG_CACHE_HOME": str(tmp_path / ".vmout" / f"cache-{KERNEL}")}
    assert "the guest compiles the generic program (not on the host: not root)" in capsys.readouterr().err
    monkeypatch.setenv("KTUI_VM_PREBUILD", "0")
    monkeypatch.setattr(vm_main_module, "prebuild", lambda kernel, home: pytest.fail("asked not to"))
    assert "KTUI_VM_PREBUILT" not in guest_cache(machine(tmp_path))


def test_no_headers_or_no_root_is_one_line_and_nothing_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(boot, "MODULES", tmp_path)
    monkeypatch.setattr(prebuild.subprocess, "run", lambda *a, **k: pytest.fail("nothing to run"))
    (tmp_path / KERNEL / "build").mkdir(parents=True)  # a leftover, no kconfig.h
    monkeypatch.setattr(prebuild.os, "geteuid", lambda: 0)
    assert prebuild.prebuild(KERNEL, tmp_path / "home") == (False, f"no headers for {KERNEL} in {tmp_path / KERNEL}")
    monkeypatch.setattr(prebuild.os, "geteuid", lambda: 1000)
    done, why = prebuild.prebuild(KERNEL, tmp_path / "home")
    assert not done and why.startswith("not root")


def split_headers(tmp_path: Path) -> Path:
    common, arch = tmp_path / "common", tmp_path / "amd64"
    (common / "include/linux").mkdir(parents=True)
    (common / "include/linux/kconfig.h").touch()
    arch.mkdir()
    kdir = tmp_path / "modules" / KERNEL
    kdir.mkdir(parents=True)
    (kdir / "build").symlink_to(arch)
    (kdir / "source").symlink_to(common)
    return tmp_path / "modules"


def test_the_compile_runs_in_a_namespace_where_the_running_kernel_has_the_guests_headers(tmp_path,
                                                                                        monkeypatch):
    """The namespace's /lib/modules/$(uname -r)/build and source are the
    guest kernel's (links resolved before the tmpfs hides them), and bcc's
    own environment is left out: the guest has none of it."""
    monkeypatch.setattr(boot, "MODULES", split_headers(tmp_path))
    monkeypatch.setattr(prebuild.os, "geteuid", lambda: 0)
    monkeypatch.setenv("BCC_KERNEL_SOURCE", "/elsewhere")
    monkeypatch.setenv("ARCH", "arm64")
    seen = {}

    def run(args, **kw):
        seen.update(args=args, env=kw["env"])
        return prebuild.subprocess.CompletedProcess(args, 0, "kprobe cache\ntracing compiled 3.1\n", "")

    monkeypatch.setattr(prebuild.subprocess, "run", run)
    done, said = prebuild.prebuild(KERNEL, tmp_path / "home")
    assert done and said.startswith("kprobe cache, tracing compiled 3.1 (")
    args = seen["args"]
    assert args[1:5] == ["--mount", "--propagation", "private", "sh"]
    script, positional = args[6], args[7:]
    assert "mount -t tmpfs" in script and "$(uname -r)" in script
    assert positional[:4] == ["sh", "/lib/modules", str(tmp_path / "amd64"), str(tmp_path / "common")]
    assert positional[-3:] == ["-m", "ktui.kernel.generic.prebuild", str(tmp_path / "home" / "ktui")]
    assert "BCC_KERNEL_SOURCE" not in seen["env"] and "ARCH" not in seen["env"]
    assert seen["env"]["PATH"] == os.environ["PATH"]


def test_a_failed_compile_says_its_last_line(tmp_path, monkeypatch):
    monkeypatch.setattr(boot, "MODULES", split_headers(tmp_path))
    monkeypatch.setattr(prebuild.os, "geteuid", lambda: 0)
    monkeypatch.setattr(prebuild.subprocess, "run", lambda args, **kw: prebuild.subprocess.CompletedProcess(
        args, 1, "", "clang chatter\nktui: prebuild: compiling the generic program: error: x\n"))
    assert prebuild.prebuild(KERNEL, tmp_path) == (False, "ktui: prebuild: compiling the generic program: error: x")
