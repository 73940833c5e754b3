"""The function browser's model on a fake kernel (tests/fakesysfs.py):
verdict lines, which parameters and members can be ticked and why not, the
spec text they make, and what the add dialog completes."""

from __future__ import annotations

import pytest

from ktui.screens.browse_model import FunctionIndex, param_ref, spec_text
from ktui.screens.spec_complete import complete
from tests.btfbuild import BtfBuilder, vfs_like
from tests.fakesysfs import FakeKernel


@pytest.fixture
def fk(tmp_path):
    return FakeKernel(tmp_path)


@pytest.fixture
def functions(fk):
    return FunctionIndex(fk.catalog).load()


def test_spec_text_and_reserved_parameter_names():
    assert spec_text("vfs_read", "c", []) == "vfs_read:c"
    assert spec_text("vfs_read", "c", [("count", ""), ("file->f_pos", "")]) == "vfs_read:c:count,file->f_pos"
    assert spec_text("vfs_read", "r", [("retval", ""), ("buf", "ustring")]) == "vfs_read:r:retval,buf:ustring"
    assert param_ref("count") == "count"
    for word in ("flags", "di", "pid", "comm", "a1", "retval", "cpu"):
        assert param_ref(word) == f"args.{word}"


def test_the_index_loads_once_and_reports_the_symbol_count(fk):
    counted = []
    index = FunctionIndex(fk.catalog)
    assert index.loaded is None
    first = index.load(counted.append)
    assert index.load(counted.append) is first and index.loaded is first
    assert counted == [len(fk.catalog().src.symbols.names())]
    assert "vfs_read" in first.entries and "mymod_open" in first.entries
    assert first.btf_problem is None and first.problems == ()


def test_vfs_read_parameters_by_register_and_members_one_level(functions):
    d = functions.detail("vfs_read")
    assert d.verdict_line.startswith("traceable") and d.named == ""
    assert [(c.ref, c.register, c.shown, c.tickable) for c in d.params] == [
        ("file", "a1", "struct file *file", True), ("buf", "a2", "char *buf", True),
        ("count", "a3", "size_t count", True), ("pos", "a4", "loff_t *pos", True)]
    assert d.retval.shown == "ssize_t retval"
    file, buf = d.params[0], d.params[1]
    assert file.expandable and not buf.expandable and buf.text
    members = {c.ref: c for c in functions.members(d, file)}
    assert list(members) == ["file->f_count", "file->f_rcuhead", "file->f_path", "file->f_mode",
                             "file->f_flags", "file->f_pos", "file->f_op"]  # the anonymous union flattened
    assert members["file->f_pos"].tickable and members["file->f_pos"].depth == 1
    assert "bitfield" in members["file->f_mode"].why_not
    assert "file->f_path.MEMBER" in members["file->f_path"].why_not
    assert functions.members(d, buf) == ()


def test_a_char_array_member_is_read_as_a_string(fk, tmp_path):
    # dentry->d_iname is `unsigned char [16]`: tickable, fetched as :string by default
    b = BtfBuilder()
    t = vfs_like(b)
    b.func("d_walk", b.func_proto(t["int"], [("dentry", b.ptr(t["dentry"]))]))
    (fk.btf_dir / "vmlinux").write_bytes(b.blob())
    (fk.btf_dir / "mymod").unlink()  # built on the old base
    fk.kallsyms.write_text(fk.kallsyms.read_text() + "ffffffff81001000 t d_walk\n")
    functions = FunctionIndex(fk.catalog).load()
    d = functions.detail("d_walk")
    iname = next(c for c in functions.members(d, d.params[0]) if c.ref == "dentry->d_iname")
    assert iname.tickable and iname.text and iname.default_type == "string"


def test_a_compiler_copy_and_an_ambiguous_name_are_positional_only(functions):
    d = functions.detail("zstd_build.isra.0")
    assert "compiler copy of zstd_build" in d.named and "positional" in d.named
    assert d.params and not any(c.tickable for c in d.params)
    assert all(c.why_not == d.named for c in d.params)
    d = functions.detail("dup_fn")
    assert "several prototypes" in d.named and not any(c.tickable for c in d.params)


def test_verdicts_and_notes(functions):
    assert functions.detail("do_int3").verdict_line.startswith("not traceable: on the kprobe blacklist")
    assert functions.detail("notrace_fn").verdict_line.startswith("not traceable: notrace")
    assert functions.detail("zstd_build").verdict_line.startswith("no symbol of its own")
    assert functions.detail("inlined_fn").verdict_line.startswith("no symbol: inlined")
    assert functions.detail("mymod_open").notes == ("module mymod",)
    d = functions.detail("mymod_open")  # a module function: its BTF is split on vmlinux's
    assert [c.ref for c in d.params] == ["file"] and d.params[0].expandable
    assert "file->f_pos" in {c.ref for c in functions.members(d, d.params[0])}
    assert functions.detail("mymod_helper").retval is None  # void
    assert functions.detail("no_such_function") is None


def test_a_reserved_parameter_name_is_written_args_name(fk):
    b = BtfBuilder()
    t = vfs_like(b)
    b.func("do_mmap", b.func_proto(t["ulong"], [("flags", t["ulong"]), ("pid", t["int"]),
                                                 ("len", t["size_t"])]))
    (fk.btf_dir / "vmlinux").write_bytes(b.blob())
    (fk.btf_dir / "mymod").unlink()
    fk.kallsyms.write_text(fk.kallsyms.read_text() + "ffffffff81001000 T do_mmap\n")
    d = FunctionIndex(fk.catalog).load().detail("do_mmap")
    assert [c.ref for c in d.params] == ["args.flags", "args.pid", "len"]


def test_a_big_struct_by_value_takes_two_registers_and_is_not_tickable(fk):
    b = BtfBuilder()
    t = vfs_like(b)
    b.func("takes_path", b.func_proto(t["int"], [("p", t["path"]), ("n", t["int"])]))
    (fk.btf_dir / "vmlinux").write_bytes(b.blob())
    (fk.btf_dir / "mymod").unlink()
    fk.kallsyms.write_text(fk.kallsyms.read_text() + "ffffffff81001000 T takes_path\n")
    d = FunctionIndex(fk.catalog).load().detail("takes_path")
    p, n = d.params
    assert not p.tickable and "two registers" in p.why_not
    assert n.tickable and n.register == "a3"


def test_without_btf_names_are_still_listed_and_say_so(fk):
    functions = FunctionIndex(lambda: fk.catalog(btf=None)).load()
    assert "vfs_read" in functions.entries and functions.btf_problem
    d = functions.detail("vfs_read")
    assert d.params == () and "no BTF" in d.named and d.retval.ref == "retval"
    assert complete(functions, "vfs_r") == "vfs_read"
    assert complete(functions, "vfs_read:c:c") is None


def test_no_catalog_at_all_is_an_empty_index():
    functions = FunctionIndex(None).load()
    assert len(functions) == 0 and functions.problems


@pytest.mark.parametrize("typed, completed", [
    ("vfs", "vfs_read"),
    ("vfs_read", None),  # nothing longer starts with it
    ("reads=vfs_r", "reads=vfs_read"),
    ("Vfs", None),  # case-sensitive
    ("mymod_o", "mymod_open"),
    ("vfs_read:c:", None),
    ("vfs_read:c:c", "vfs_read:c:count"),
    ("vfs_read:c:count,f", "vfs_read:c:count,file"),
    ("vfs_read:c:n=co", "vfs_read:c:n=count"),
    ("vfs_read:r:r", "vfs_read:r:retval"),
    ("vfs_read:c:r", None),  # no retval at the call
    ("vfs_read:c:file->f_po", "vfs_read:c:file->f_pos"),
    ("vfs_read:c:count:u", None),  # a type, not a name
    ("vfs_read:x:c", None),
    ("zstd_build.isra.0:c:x", None),  # positional only
    ("nosuch:c:x", None),
    ("mymod_open:c:fi", "mymod_open:c:file"),
])
def test_completion(functions, typed, completed):
    assert complete(functions, typed) == completed


def test_a_pointer_to_a_number_offers_the_number_it_points_to(fk, functions):
    """Issue #29: `*pos` (loff_t *pos, the position pread uses) could not be
    ticked. The parameter offers what it points to, as the language reads
    it: `+0(pos)` with the pointee's width and sign, and it binds to a4."""
    from ktui.lang.bind import bind_probe
    from ktui.lang.kernel_names import KernelNames
    from ktui.lang.model import positional
    from ktui.lang.spec import parse_probe_text

    d = functions.detail("vfs_read")
    pos = d.params[3]
    assert pos.pointee is not None and pos.pointee.tickable
    assert (pos.pointee.ref, pos.pointee.default_type, pos.pointee.depth) == ("+0(pos)", "s64", 1)
    assert "*pos" in pos.pointee.shown and "loff_t" in pos.pointee.shown
    assert d.params[1].pointee is None  # char *buf: a text, read with :string
    assert d.params[0].pointee is None  # struct file *: its members instead
    text = spec_text("vfs_read", "c", [(pos.pointee.ref, pos.pointee.default_type)])
    probe = bind_probe(parse_probe_text(text), KernelNames(fk.btf()), text=text)
    assert text == "vfs_read:c:+0(pos):s64" and str(positional(probe.fetches[0].expr)) == "+0(a4)"
