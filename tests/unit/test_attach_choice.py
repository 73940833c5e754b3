"""Which probe goes by fentry/fexit and which by kprobe, and why (issue 13),
on a BTF built for the test (tests/btfbuild.py)."""

from __future__ import annotations

import dataclasses

import pytest

from ktui.btf.index import KernelBtf
from ktui.kernel.attach.attach_choice import FENTRY, KPROBE, choose, many_args_target, max_args
from ktui.kernel.machine.features import Finding, given
from ktui.lang.spec import parse_spec
from tests.btfbuild import BtfBuilder, vfs_like

# what the probes find on Debian's 6.1 and 6.12 (kernel/machine/features; tests/kernel/test_features)
ON_6_1 = given(fentry=True, trace_args=6)
ON_6_12 = given(fentry=True, trace_args=12)


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


def pick(spec: str, btf, mode="auto", features=ON_6_1, generic=True):
    return choose(parse_spec(spec), mode, features=features, btf=btf, generic=generic)


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


def test_twelve_arguments_where_the_kernel_took_seven():
    """The argument limit is the probed one (trace_args), never the version's;
    where it could not be probed, the 6 every trampoline takes."""
    assert max_args(ON_6_1) == 6 and max_args(ON_6_12) == 12
    assert max_args(given(trace_args=None)) == 6 and max_args(given()) == 6


def test_many_arguments_by_the_probed_limit(btf):
    assert pick("twelve_args:c", btf).via == KPROBE
    assert pick("twelve_args:c", btf, features=ON_6_12).via == FENTRY
    assert pick("seven_args:c", btf, features=ON_6_12).nargs == 7
    unsure = pick("seven_args:c", btf, features=given(fentry=None, trace_args=None))
    assert unsure.via == KPROBE and "take 6 on this kernel (more could not be checked)" in unsure.reason


def test_kernel_facts(btf, tmp_path):
    assert "generic engine" in pick("vfs_read:c", btf, generic=False).reason
    broken = given(fentry=False)
    broken.findings["fentry"] = Finding(False, "the kernel refused a trampoline")
    assert "fentry/fexit do not work (the kernel refused a trampoline)" in pick("vfs_read:c", btf, features=broken).reason
    # not checked (no privilege to probe): tried, and the kernel answers at the attach
    assert pick("vfs_read:c", btf, features=given(fentry=None)).via == FENTRY
    assert pick("vfs_read:c", None).via == KPROBE
    missing = KernelBtf(btf_dir=tmp_path / "none", notes=tmp_path / "notes")
    assert "no BTF" in pick("vfs_read:c", missing).reason


def test_names_are_arguments_not_registers(btf):
    probe = dataclasses.replace(parse_spec("vfs_read:c:a1"), attach="fentry")
    assert choose(probe, "fentry", features=ON_6_1, btf=btf, generic=True).via == FENTRY


def test_auto_takes_a_kprobe_rather_than_wait_for_a_compile(btf):
    """`auto` keeps a probe counting from the first moment: where the
    tracing variant would have to be compiled first, a kprobe (counting
    through the dispatcher at once), saying why; `attach: fentry` asked
    for fentry and waits for it."""
    from ktui.kernel.attach.attach_choice import NO_CACHE, NOT_COMPILED, without_compile

    fentry = pick("vfs_read:c:a3", btf)
    assert without_compile(fentry, "auto", variant_ready=True, cache=True) is fentry
    later = without_compile(fentry, "auto", variant_ready=False, cache=True)
    assert (later.via, later.reason, later.refused) == (KPROBE, NOT_COMPILED, False)
    assert without_compile(fentry, "auto", variant_ready=False, cache=False).reason == NO_CACHE
    forced = pick("vfs_read:c:a3", btf, mode="fentry")
    assert without_compile(forced, "fentry", variant_ready=False, cache=True) is forced
    offset = pick("vfs_read+0x5:c", btf)  # a kprobe anyway, with its own reason
    assert without_compile(offset, "auto", variant_ready=False, cache=True) is offset


def test_the_many_arguments_probe_takes_a_plain_function(btf, monkeypatch):
    """feature_probes tries a trampoline on a function of 7..12 plain
    arguments: the first candidate in that shape, none when none is."""
    from ktui.kernel.attach import attach_choice

    monkeypatch.setattr(attach_choice, "MANY_ARGS_CANDIDATES", ("by_value", "twice", "vfs_read", "seven_args"))
    name, btf_id, nargs = many_args_target(btf, 12)
    assert (name, nargs) == ("seven_args", 7) and btf_id == btf.function_ids("seven_args")[0]
    assert many_args_target(btf, 6) is None
    monkeypatch.setattr(attach_choice, "MANY_ARGS_CANDIDATES", ("vfs_read",))
    assert many_args_target(btf, 12) is None
