"""Which probe goes by fentry/fexit and which by kprobe, and why (issue 13),
on a BTF built for the test (tests/btfbuild.py)."""

from __future__ import annotations

import dataclasses

import pytest

from ktui.btf.index import KernelBtf
from ktui.kernel.attach_choice import FENTRY, KPROBE, choose, max_args
from ktui.lang.spec import parse_spec
from tests.btfbuild import BtfBuilder, vfs_like


@pytest.fixture
def btf(tmp_path):
    b = BtfBuilder()
    t = vfs_like(b)
    long_ = t["long"]
    seven = b.func_proto(long_, [(f"p{i}", long_) for i in range(7)])
    b.func("seven_args", seven)
    twelve = b.func_proto(long_, [(f"p{i}", long_) for i in range(12)])
    b.func("twelve_args", twelve)
    b.func("by_value", b.func_proto(long_, [("p", b.typedef("path_t", t["path"]))]))
    b.func("printk_like", b.func_proto(long_, [("fmt", t["buf"])], variadic=True))
    b.func("migrate_disable", b.func_proto(0, []))
    b.func("twice", b.func_proto(long_, []))
    b.func("twice", b.func_proto(long_, [("x", long_)]))
    (tmp_path / "vmlinux").write_bytes(b.blob())
    return KernelBtf(btf_dir=tmp_path, notes=tmp_path / "notes")


def pick(spec: str, btf, mode="auto", release="6.1.0-57-amd64", generic=True):
    return choose(parse_spec(spec), mode, release=release, btf=btf, generic=generic)


def test_fentry_with_its_btf_id_and_argument_count(btf):
    choice = pick("vfs_read:c:a3", btf)
    assert choice.via == FENTRY and choice.reason == ""
    assert choice.btf_id == btf.function_ids("vfs_read")[0]
    assert choice.nargs == 4
    assert pick("vfs_read:r:retval,count", btf).via == FENTRY


def test_kprobe_when_told_whatever_else(btf):
    assert pick("vfs_read:c", btf, mode="kprobe") == pick("vfs_read+0x4:c", btf, mode="kprobe")
    assert pick("vfs_read:c", btf, mode="kprobe").via == KPROBE
    assert pick("vfs_read:c", btf, mode="kprobe").reason == ""


@pytest.mark.parametrize("spec, why", [
    ("vfs_read+0x4:c", "offset"),
    ("0xffffffff81000000:c", "address"),
    ("vfs_read:c:rdi", "register"),
    ("seven_args:c", "7 arguments; trampolines take 6"),
    ("by_value:c", "struct by value"),
    ("printk_like:c", "variable arguments"),
    ("migrate_disable:c", "deny list"),
    ("twice:c", "2 functions are called twice"),
    ("xfs_file_read_iter:c", "not in vmlinux's BTF"),
    ("vfs_read.isra.0:c", "not in vmlinux's BTF"),
])
def test_fallback_reasons(btf, spec, why):
    choice = pick(spec, btf)
    assert choice.via == KPROBE and not choice.refused
    assert why in choice.reason
    forced = pick(spec, btf, mode="fentry")
    assert forced.via == KPROBE and forced.refused and why in forced.reason


def test_twelve_arguments_from_6_6(btf):
    assert max_args("6.1.0-57-amd64") == 6 and max_args("6.6.1") == 12 and max_args("6.12.117+deb12-amd64") == 12
    assert pick("twelve_args:c", btf).via == KPROBE
    assert pick("twelve_args:c", btf, release="6.12.117+deb12-amd64").via == FENTRY
    assert pick("seven_args:c", btf, release="6.6.0").nargs == 7


def test_kernel_facts(btf, tmp_path):
    assert "generic engine" in pick("vfs_read:c", btf, generic=False).reason
    assert "5.5" in pick("vfs_read:c", btf, release="5.4.0").reason
    assert pick("vfs_read:c", None).via == KPROBE
    missing = KernelBtf(btf_dir=tmp_path / "none", notes=tmp_path / "notes")
    assert "no BTF" in pick("vfs_read:c", missing).reason


def test_names_are_arguments_not_registers(btf):
    probe = dataclasses.replace(parse_spec("vfs_read:c:a1"), attach="fentry")
    assert choose(probe, "fentry", release="6.1", btf=btf, generic=True).via == FENTRY


def test_auto_takes_a_kprobe_rather_than_wait_for_a_compile(btf):
    """`auto` keeps a probe counting from the first moment: where the
    tracing variant would have to be compiled first, a kprobe (counting
    through the dispatcher at once), saying why; `attach: fentry` asked
    for fentry and waits for it."""
    from ktui.kernel.attach_choice import NO_CACHE, NOT_COMPILED, without_compile

    fentry = pick("vfs_read:c:a3", btf)
    assert without_compile(fentry, "auto", variant_ready=True, cache=True) is fentry
    later = without_compile(fentry, "auto", variant_ready=False, cache=True)
    assert (later.via, later.reason, later.refused) == (KPROBE, NOT_COMPILED, False)
    assert without_compile(fentry, "auto", variant_ready=False, cache=False).reason == NO_CACHE
    forced = pick("vfs_read:c:a3", btf, mode="fentry")
    assert without_compile(forced, "fentry", variant_ready=False, cache=True) is forced
    offset = pick("vfs_read+0x5:c", btf)  # a kprobe anyway, with its own reason
    assert without_compile(offset, "auto", variant_ready=False, cache=True) is offset
