"""Parameters to registers, member chains to offsets: the answers phase 2's
fetches by name are built on, from BTF built in the test."""

from __future__ import annotations

import pytest

from ktui.btf.access import Access, AccessError, Step
from ktui.btf.decode import RawBtf
from tests.btfbuild import BtfBuilder, vfs_like


def steps(text: str) -> list[Step]:
    """`->f_path.dentry` -> [Step('->', 'f_path'), Step('.', 'dentry')]."""
    out, i = [], 0
    while i < len(text):
        op = "->" if text.startswith("->", i) else "."
        i += len(op)
        j = i
        while j < len(text) and (text[j].isalnum() or text[j] == "_"):
            j += 1
        out.append(Step(op, text[i:j]))
        i = j
    return out


@pytest.fixture
def kernel():
    b = BtfBuilder()
    t = vfs_like(b)
    return Access(RawBtf(b.blob())), t


def test_parameters_by_name(kernel):
    access, t = kernel
    count = access.param(t["vfs_read_proto"], "count")
    assert (count.index, count.registers, count.note) == (2, (3,), "")
    leaf = access.leaf(count.type_id)
    assert (leaf.ctype, leaf.kind, leaf.size, leaf.signed) == ("size_t", "int", 8, False)
    buf = access.leaf(access.param(t["vfs_read_proto"], "buf").type_id)
    assert (buf.kind, buf.size, buf.text, buf.user) == ("pointer", 8, True, False)


def test_an_unknown_parameter_shows_the_prototype_and_close_names(kernel):
    access, t = kernel
    with pytest.raises(AccessError) as exc:
        access.param(t["vfs_read_proto"], "cout")
    assert str(exc.value) == ("no parameter 'cout' (did you mean count?): the parameters are "
                              "(struct file *file, char *buf, size_t count, loff_t *pos)")
    assert exc.value.close == ("count",) and exc.value.step == -1


def test_struct_fields_through_pointers(kernel):
    access, t = kernel
    fpos = access.member_path(t["file_ptr"], steps("->f_pos"), "file")
    assert fpos.loads == (32,)
    assert (fpos.leaf.ctype, fpos.leaf.size, fpos.leaf.signed) == ("loff_t", 8, True)
    # file->f_path.dentry->d_name.name: f_path at 8 + dentry at 8, then d_name at 8 + name at 8
    name = access.member_path(t["file_ptr"], steps("->f_path.dentry->d_name.name"), "file")
    assert name.loads == (16, 16)
    assert (name.leaf.kind, name.leaf.text, name.leaf.ctype) == ("pointer", True, "const unsigned char *")
    iname = access.member_path(t["file_ptr"], steps("->f_path.dentry->d_iname"), "file")
    assert iname.loads == (16, 24)
    assert (iname.leaf.kind, iname.leaf.text, iname.leaf.nelems, iname.leaf.size) == ("array", True, 16, 16)


def test_members_of_anonymous_unions_are_found_by_name(kernel):
    access, t = kernel
    path = access.member_path(t["file_ptr"], steps("->f_count"), "file")
    assert path.loads == (0,) and path.leaf.ctype == "long int"
    names = [n for n, _off, _m in access.members(t["file"])]
    assert names[:2] == ["f_count", "f_rcuhead"] and "f_pos" in names


def test_a_bitfield_says_which_bits(kernel):
    access, t = kernel
    mode = access.member_path(t["file_ptr"], steps("->f_mode"), "file")
    assert mode.loads == (24,) and mode.leaf.bitfield == (0, 3)
    flags = access.member_path(t["file_ptr"], steps("->f_flags"), "file")
    assert flags.loads == (24,) and flags.leaf.bitfield == (3, 29)


@pytest.mark.parametrize("chain, message, step", [
    ("->f_pso", "struct file has no member 'f_pso' (did you mean f_pos, f_op?)", 0),
    ("->f_path->dentry", "`->dentry` on `file->f_path`, a struct path (not a pointer): use `.`", 1),
    ("->f_path.dentry.d_name", "`.d_name` on `file->f_path.dentry`, a pointer (struct dentry *): use `->`", 2),
    ("->f_pos->x", "`->x` on `file->f_pos`, a loff_t: not a pointer to a struct or union", 1),
    ("->f_mode.x", "`file->f_mode` is a bitfield: it has no members", 1),
    ("->f_op->read", "struct file_operations is only declared in this BTF, its members are unknown", 1),
    (".f_pos", "`.f_pos` on `file`: it is a struct file *, not a struct in memory; use `->` through a pointer", 0),
])
def test_refusals_name_the_step_and_say_why(kernel, chain, message, step):
    access, t = kernel
    with pytest.raises(AccessError) as exc:
        access.member_path(t["file_ptr"], steps(chain), "file")
    assert str(exc.value) == message
    assert exc.value.step == step


def test_arrow_on_a_pointer_to_a_scalar_is_refused(kernel):
    access, t = kernel
    with pytest.raises(AccessError, match=r"`->x` on `buf`, a char \*: not a pointer to a struct"):
        access.member_path(t["buf"], steps("->x"), "buf")


def test_registers_by_the_calling_convention():
    b = BtfBuilder()
    i = b.int("int", 4, signed=True)
    long_ = b.int("long", 8, signed=True)
    pair = b.struct("pair", 16, [("a", long_, 0), ("b", long_, 64)])
    big = b.struct("big", 24, [("a", long_, 0), ("b", long_, 64), ("c", long_, 128)])
    small = b.struct("small", 8, [("a", i, 0), ("b", i, 32)])
    proto = b.func_proto(i, [("a", i), ("p", pair), ("big", big), ("s", small), ("c", i),
                             ("d", i), ("e", i), ("f", i)])
    slots = Access(RawBtf(b.blob())).arg_slots(proto)
    assert [(s.name, s.registers) for s in slots] == [
        ("a", (1,)), ("p", (2, 3)), ("big", ()), ("s", (4,)), ("c", (5,)), ("d", (6,)),
        ("e", ()), ("f", ())]
    assert slots[1].note == "takes two registers (a2, a3): a 16-byte value passed by value"
    assert slots[2].note == "passed in memory (24-byte struct by value)"
    assert slots[6].note.startswith("on the stack")


def test_a_two_register_struct_that_does_not_fit_goes_to_the_stack_and_later_ints_do_not():
    b = BtfBuilder()
    i = b.int("int", 4, signed=True)
    long_ = b.int("long", 8, signed=True)
    pair = b.struct("pair", 16, [("a", long_, 0), ("b", long_, 64)])
    proto = b.func_proto(i, [(n, i) for n in "abcde"] + [("p", pair), ("z", i)])
    slots = Access(RawBtf(b.blob())).arg_slots(proto)
    assert [(s.name, s.registers) for s in slots][-2:] == [("p", ()), ("z", (6,))]


def test_user_tags_are_reported_only_when_present():
    b = BtfBuilder()
    c = b.int("char", 1)
    tagged = b.ptr(b.type_tag("user", c))
    plain = b.ptr(c)
    access = Access(RawBtf(b.blob()))
    assert access.leaf(tagged).user and access.leaf(tagged).text
    assert not access.leaf(plain).user
