"""What the generic program's compile depends on (kernel/generic/build_inputs.py),
on fake header trees: the headers bcc would pick, named by their content."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ktui.kernel.generic import build_inputs
from ktui.kernel.generic.build_inputs import KernelHeaders, find_headers, headers_identity
from ktui.kernel.generic.cache import cache_key

RELEASE = "6.1.0-57-amd64"
GENERATED = {
    "include/generated/utsrelease.h": '#define UTS_RELEASE "6.1.0-57-amd64"\n',
    "include/generated/utsversion.h": '#define UTS_VERSION "#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3"\n',
    "include/generated/compile.h": '#define UTS_MACHINE "x86_64"\n',
    "include/generated/uapi/linux/version.h": "#define LINUX_VERSION_CODE 393664\n",
    "include/generated/autoconf.h": "#define CONFIG_KPROBES 1\n",
}


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture
def debian(tmp_path) -> Path:
    """/lib/modules as Debian lays it out: build (generated) and source
    (the rest) in two directories, both linked from the release's."""
    common = tree(tmp_path / "src/common", {"include/linux/kconfig.h": "", "Makefile": ""})
    arch = tree(tmp_path / "src/amd64", GENERATED)
    kdir = tmp_path / "modules" / RELEASE
    kdir.mkdir(parents=True)
    (kdir / "build").symlink_to(arch)
    (kdir / "source").symlink_to(common)
    return tmp_path / "modules"


def test_split_headers_are_found_as_bcc_finds_them(debian):
    found = find_headers(RELEASE, env={}, modules=debian)
    assert found == KernelHeaders(debian / RELEASE / "source", debian / RELEASE / "build")


def test_one_tree_or_bccs_environment(tmp_path, debian):
    one = tree(tmp_path / "one", {"include/linux/kconfig.h": "", **GENERATED})
    kdir = tmp_path / "m" / "6.6.6"
    kdir.mkdir(parents=True)
    (kdir / "build").symlink_to(one)
    assert find_headers("6.6.6", env={}, modules=tmp_path / "m") == KernelHeaders(kdir / "build", kdir / "build")
    (kdir / "odd").symlink_to(one)
    (kdir / "build").unlink()
    assert find_headers("6.6.6", env={"BCC_KERNEL_MODULES_SUFFIX": "odd"}, modules=tmp_path / "m").objtree \
        == kdir / "odd"
    assert find_headers(RELEASE, env={"BCC_KERNEL_SOURCE": str(one)}, modules=debian) == KernelHeaders(one, one)


def test_no_kconfig_h_means_bccs_kheaders_of_the_running_kernel(tmp_path):
    (tmp_path / RELEASE / "build").mkdir(parents=True)  # a leftover build directory
    assert find_headers(RELEASE, env={}, modules=tmp_path) is None
    assert headers_identity(None).startswith("kheaders of " + os.uname().release)


def test_the_headers_are_named_by_their_generated_files(debian):
    found = find_headers(RELEASE, env={}, modules=debian)
    first = headers_identity(found)
    assert first.startswith("headers ") and RELEASE not in first
    assert headers_identity(found) == first
    for name in GENERATED:  # another package revision, another configuration...
        path = found.objtree / name
        before = path.read_text()
        path.write_text(before + "/* changed */\n")
        assert headers_identity(found) != first, name
        path.write_text(before)
    assert headers_identity(found) == first


def test_headers_that_do_not_name_their_build_count_only_for_the_running_kernel(debian):
    found = find_headers(RELEASE, env={}, modules=debian)
    (found.objtree / "include/generated/autoconf.h").unlink()
    assert headers_identity(found).endswith(build_inputs.running_kernel())


def test_the_key_follows_the_headers_not_the_running_kernel(debian, monkeypatch):
    """A host with kernel X's headers computes the key a guest running X
    looks up: the running kernel's release names the directory, its build
    string is no input."""
    monkeypatch.setattr(build_inputs, "MODULES", debian)
    monkeypatch.delenv("BCC_KERNEL_SOURCE", raising=False)
    monkeypatch.delenv("BCC_KERNEL_MODULES_SUFFIX", raising=False)
    real = os.uname()

    def running(version: str):
        return lambda: os.uname_result((real.sysname, "guest", RELEASE, version, real.machine))

    monkeypatch.setattr(build_inputs.os, "uname", running("#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3"))
    guest = cache_key("text", "1.0")
    monkeypatch.setattr(build_inputs.os, "uname", running("#7 whatever the host says"))
    assert cache_key("text", "1.0") == guest
    (debian / RELEASE / "build" / "include/generated/autoconf.h").write_text("#define CONFIG_KPROBES 0\n")
    assert cache_key("text", "1.0") != guest


def test_bccs_environment_is_an_input(monkeypatch):
    base = build_inputs.here(env={})
    assert build_inputs.here(env={"ARCH": "arm64"}).arch == "arm64"
    assert build_inputs.here(env={"BCC_LINUX_VERSION_CODE": "1"}) != base


@pytest.mark.parametrize("text, euid, visible", [
    ("0000000000000000 A fixed_percpu_data\nffffffff81000000 T startup_64\n", 0, True),
    ("0000000000000000 A fixed_percpu_data\n0000000000000000 T startup_64\n", 0, False),  # kptr_restrict
    ("ffffffff81000000 T startup_64\n", 1000, False),  # bcc reads kallsyms only as root
    ("", 0, False),
])
def test_bcc_finds_bpf_probe_read_kernel_where_kallsyms_shows_addresses(tmp_path, monkeypatch, text, euid,
                                                                         visible):
    (tmp_path / "kallsyms").write_text(text)
    monkeypatch.setattr(build_inputs, "KALLSYMS", tmp_path / "kallsyms")
    monkeypatch.setattr(build_inputs.os, "geteuid", lambda: euid)
    assert build_inputs.kallsyms_addresses_visible() is visible
