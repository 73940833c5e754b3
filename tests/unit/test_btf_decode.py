"""BTF decoding: blobs built in the test (tests/btfbuild.py), every kind,
split BTF, and every way a blob can be malformed."""

from __future__ import annotations

import struct
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ktui.btf.decode import BtfError, RawBtf, _find_bad_record, walk
from ktui.btf.types import (
    Array, Composite, Datasec, DeclTag, Enum, EnumValue, Float, Func, FuncProto, Fwd, Int, Kind,
    Member, Param, Ptr, Ref, SecVar, Var, VOID,
)
from tests.btfbuild import BtfBuilder, info, vfs_like


def test_every_kind_decodes_to_what_was_built():
    b = BtfBuilder()
    i = b.int("int", 4, signed=True)
    c = b.int("char", 1, char=True, signed=True)
    bo = b.int("_Bool", 1, bool_=True)
    bf = b.int("u3", 1, bits=3, offset=2)
    fl = b.float("double", 8)
    p = b.ptr(i)
    ar = b.array(c, 16, i)
    s = b.struct("s", 8, [("a", i, 0), ("b", i, 32, 5), ("c", i, 37, 27)])
    u = b.struct("u", 4, [("x", i, 0), ("y", c, 0)], union=True)
    e = b.enum("color", [("RED", 0), ("NEG", -5)], signed=True)
    e64 = b.enum64("big", [("HUGE", 1 << 40), ("MINUS", -1)], signed=True)
    eu = b.enum("flags", [("TOP", 0x80000000)])
    fw = b.fwd("later", union=True)
    td = b.typedef("myint", i)
    co, vo, re_ = b.const(i), b.volatile(i), b.restrict(p)
    tt = b.type_tag("user", c)
    fp = b.func_proto(i, [("x", i), ("p", p)], variadic=True)
    fn = b.func("f", fp, linkage=0)
    va = b.var("v", i, linkage=2)
    ds = b.datasec(".data", 16, [(va, 0, 4)])
    dt = b.decl_tag("tag", fn, component=1)
    btf = RawBtf(b.blob())
    assert btf.type(0) is VOID
    assert btf.type(i) == Int(i, Kind.INT, "int", 4, 32, 0, True, False, False)
    assert btf.type(c) == Int(c, Kind.INT, "char", 1, 8, 0, True, True, False)
    assert btf.type(bo).bool and btf.type(bf).bits == 3 and btf.type(bf).bit_offset == 2
    assert btf.type(fl) == Float(fl, Kind.FLOAT, "double", 8)
    assert btf.type(p) == Ptr(p, Kind.PTR, "", i)
    assert btf.type(ar) == Array(ar, Kind.ARRAY, "", c, i, 16)
    assert btf.type(s) == Composite(s, Kind.STRUCT, "s", 8, (
        Member("a", i, 0, 0), Member("b", i, 32, 5), Member("c", i, 37, 27)))
    assert btf.type(u).kind == Kind.UNION and [m.bit_offset for m in btf.type(u).members] == [0, 0]
    assert btf.type(e) == Enum(e, Kind.ENUM, "color", 4, True, (EnumValue("RED", 0), EnumValue("NEG", -5)))
    assert btf.type(e64).values == (EnumValue("HUGE", 1 << 40), EnumValue("MINUS", -1))
    assert btf.type(eu).values == (EnumValue("TOP", 0x80000000),) and not btf.type(eu).signed
    assert btf.type(fw) == Fwd(fw, Kind.FWD, "later", True)
    assert btf.type(td) == Ref(td, Kind.TYPEDEF, "myint", i)
    assert [btf.type(x).kind for x in (co, vo, re_, tt)] == [Kind.CONST, Kind.VOLATILE,
                                                           Kind.RESTRICT, Kind.TYPE_TAG]
    assert btf.type(fp) == FuncProto(fp, Kind.FUNC_PROTO, "", i, (Param("x", i), Param("p", p)), True)
    assert btf.type(fn) == Func(fn, Kind.FUNC, "f", fp, "static")
    assert btf.type(va) == Var(va, Kind.VAR, "v", i, 2)
    assert btf.type(ds) == Datasec(ds, Kind.DATASEC, ".data", 16, (SecVar(va, 0, 4),))
    assert btf.type(dt) == DeclTag(dt, Kind.DECL_TAG, "tag", fn, 1)
    assert btf.func_ids == [fn]
    assert btf.end_id == dt + 1
    assert btf.resolve(td) == i and btf.resolve(co) == i


def test_split_btf_continues_ids_and_strings_of_its_base():
    base = BtfBuilder()
    t = vfs_like(base)
    mod = BtfBuilder(base=base)
    proto = mod.func_proto(t["int"], [("file", t["file_ptr"]), ("mode", t["uint"])])
    own = mod.struct("xfs_inode", 8, [("i_ino", t["ulong"], 0)])
    fn = mod.func("xfs_file_open", proto)
    vml = RawBtf(base.blob(), source="vmlinux")
    split = RawBtf(mod.blob(), base=vml, source="xfs")
    assert split.first_id == vml.end_id == proto
    assert split.func_ids == [fn]
    assert split.name_of(fn) == "xfs_file_open"
    assert split.type(own).members[0] == Member("i_ino", t["ulong"], 0, 0)
    # a base type, reached through the module, is the base's own record
    assert split.type(t["file"]) is vml.type(t["file"])
    assert split.type(proto).params[0] == Param("file", t["file_ptr"])
    with pytest.raises(BtfError, match="type id 9999 does not exist"):
        split.type(9999)


def test_a_name_with_control_characters_is_shown_with_question_marks():
    b = BtfBuilder()
    i = b.int("in\x1b[2Jt", 4)
    assert RawBtf(b.blob()).name_of(i) == "in?[2Jt"


# ---------------------------------------------------------------- malformed blobs


def _blob_with(types: bytes, strings: bytes = b"\0", *, hdr_len: int = 24, type_off: int = 0,
               str_off: int | None = None) -> bytes:
    if str_off is None:
        str_off = len(types)
    header = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, hdr_len, type_off, len(types), str_off, len(strings))
    return header + b"\0" * (hdr_len - 24) + types + strings


@pytest.mark.parametrize("data, message", [
    (b"", "0 bytes, too short for a BTF header"),
    (struct.pack("<HBBIIIII", 0x1234, 1, 0, 24, 0, 0, 0, 1) + b"\0", "not BTF (magic 0x1234"),
    (struct.pack(">HBBIIIII", 0xEB9F, 1, 0, 24, 0, 0, 0, 1) + b"\0", "big-endian BTF is not supported"),
    (struct.pack("<HBBIIIII", 0xEB9F, 2, 0, 24, 0, 0, 0, 1) + b"\0", "BTF version 2 is not supported"),
    (struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 8, 0, 0, 0, 1) + b"\0", "header length 8 is impossible"),
    (struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, 400, 0, 1) + b"\0", "type section (400 bytes at 0)"),
    (struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 2, 12, 0, 1) + b"\0" * 16, "misaligned"),
    (struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, 0, 0, 50) + b"\0", "string section (50 bytes at 0)"),
    (_blob_with(b"", b"\0abc"), "does not end with a NUL byte"),
    (_blob_with(b"", b"abc\0"), "does not start with an empty string"),
])
def test_malformed_headers_are_one_line_errors(data, message):
    with pytest.raises(BtfError) as exc:
        RawBtf(data, source="blob")
    assert str(exc.value).startswith("blob: ")
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_an_empty_blob_is_valid_and_has_no_types():
    data = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, 0, 0, 1) + b"\0"
    btf = RawBtf(data)
    assert (btf.first_id, btf.end_id, btf.func_ids) == (1, 1, [])


def test_unknown_kind_names_the_type_and_its_offset():
    types = struct.pack("<III", 0, info("INT"), 4) + struct.pack("<I", 32)
    types += struct.pack("<III", 0, info(25), 0)
    with pytest.raises(BtfError, match=r"blob: type id 2 \(byte 16 of the type section\): unknown kind 25"):
        RawBtf(_blob_with(types), source="blob")


def test_a_record_running_past_the_section_is_named():
    types = struct.pack("<III", 0, info("STRUCT", 5), 8) + struct.pack("<III", 0, 0, 0)
    with pytest.raises(BtfError, match=r"type id 1 \(byte 0.*STRUCT record runs past the type section"):
        RawBtf(_blob_with(types), source="blob")


def test_a_truncated_record_header_is_named():
    types = struct.pack("<III", 0, info("PTR"), 0) + struct.pack("<I", 0)
    with pytest.raises(BtfError, match=r"type id 2 \(byte 12.*truncated record header"):
        RawBtf(_blob_with(types), source="blob")


def test_a_string_offset_outside_the_section_is_an_error_when_read():
    types = struct.pack("<III", 999, info("INT"), 4) + struct.pack("<I", 32)
    btf = RawBtf(_blob_with(types), source="blob")
    with pytest.raises(BtfError, match="string offset 999 is outside the string section"):
        btf.name_of(1)


def test_a_typedef_loop_is_an_error_not_a_hang():
    b = BtfBuilder()
    b.raw(b.s("a"), info("TYPEDEF"), 2)
    b.raw(b.s("b"), info("TYPEDEF"), 1)
    with pytest.raises(BtfError, match="typedef chain longer than 64"):
        RawBtf(b.blob()).resolve(1)


# ---------------------------------------------------------------- the walk


_KINDS = st.sampled_from(["int", "ptr", "array", "struct", "enum", "enum64", "proto", "func",
                          "typedef", "var", "datasec", "decl_tag", "float", "fwd"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_KINDS, st.integers(0, 5)), max_size=60))
def test_the_walk_finds_every_record_the_builder_wrote(spec):
    b = BtfBuilder()
    base_int = b.int("int", 4)
    for kind, n in spec:
        if kind == "int":
            b.int(f"i{n}", 4)
        elif kind == "ptr":
            b.ptr(base_int)
        elif kind == "array":
            b.array(base_int, n, base_int)
        elif kind == "struct":
            b.struct("s", 4 * n, [(f"m{k}", base_int, 32 * k) for k in range(n)])
        elif kind == "enum":
            b.enum("e", [(f"E{k}", k) for k in range(n)])
        elif kind == "enum64":
            b.enum64("e", [(f"E{k}", k << 33) for k in range(n)])
        elif kind == "proto":
            b.func_proto(base_int, [(f"p{k}", base_int) for k in range(n)])
        elif kind == "func":
            b.func(f"f{n}", base_int)
        elif kind == "typedef":
            b.typedef("t", base_int)
        elif kind == "var":
            b.var("v", base_int)
        elif kind == "datasec":
            b.datasec(".d", 4, [(base_int, 0, 4)] * n)
        elif kind == "decl_tag":
            b.decl_tag("d", base_int)
        elif kind == "float":
            b.float("f", 8)
        else:
            b.fwd("w")
    btf = RawBtf(b.blob())
    expected, at = [], 0
    for record in b.records:
        expected.append(at // 4)
        at += len(record)
    assert btf.starts == expected
    assert btf.func_ids == [1 + i for i, (k, _n) in enumerate([("int", 0)] + spec) if k == "func"]


def test_the_careful_walk_only_runs_for_a_bad_blob():
    words = array("I", struct.pack("<III", 0, info("PTR"), 0))
    assert walk(words) == ([0], [])
    with pytest.raises(BtfError):
        _find_bad_record(array("I", struct.pack("<II", 0, info("PTR"))), 1, "x")


# ---------------------------------------------------------------- this machine's kernel

VMLINUX = Path("/sys/kernel/btf/vmlinux")


@pytest.mark.skipif(not VMLINUX.exists(), reason="this machine's kernel has no BTF")
def test_this_kernels_own_btf_decodes():
    from ktui.btf.render import Renderer

    btf = RawBtf(VMLINUX.read_bytes(), source=str(VMLINUX))
    assert len(btf.func_ids) > 10_000
    render = Renderer(btf)
    protos = {btf.name_of(f): f for f in btf.func_ids}
    text = render.prototype(protos["vfs_read"])
    assert text.startswith("vfs_read(struct file *file, ")
    assert text.endswith(") -> ssize_t")
