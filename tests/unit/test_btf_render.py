"""C declarators and one-line prototypes from BTF built in the test."""

from __future__ import annotations

import pytest

from ktui.btf.decode import BtfError, RawBtf
from ktui.btf.render import Renderer
from tests.btfbuild import BtfBuilder, info, vfs_like


def renderer(b: BtfBuilder) -> Renderer:
    return Renderer(RawBtf(b.blob()))


def test_vfs_read_prints_as_the_kernel_declares_it():
    b = BtfBuilder()
    t = vfs_like(b)
    r = renderer(b)
    assert r.prototype(t["vfs_read"]) == (
        "vfs_read(struct file *file, char *buf, size_t count, loff_t *pos) -> ssize_t")
    assert r.params(t["vfs_read_proto"]) == [
        ("file", "struct file *"), ("buf", "char *"), ("count", "size_t"), ("pos", "loff_t *")]


@pytest.mark.parametrize("build, expected", [
    (lambda b, i, c: b.ptr(b.const(c)), "const char *"),
    (lambda b, i, c: b.const(b.ptr(c)), "char *const"),
    (lambda b, i, c: b.const(b.ptr(b.const(c))), "const char *const"),
    (lambda b, i, c: b.volatile(i), "volatile int"),
    (lambda b, i, c: b.restrict(b.ptr(i)), "int *restrict"),
    (lambda b, i, c: b.ptr(b.ptr(c)), "char **"),
    (lambda b, i, c: b.array(c, 16, i), "char [16]"),
    (lambda b, i, c: b.array(b.array(c, 3, i), 2, i), "char [2][3]"),
    (lambda b, i, c: b.ptr(b.array(i, 4, i)), "int (*)[4]"),
    (lambda b, i, c: b.array(b.ptr(i), 4, i), "int *[4]"),
    (lambda b, i, c: b.ptr(b.func_proto(i, [("", b.ptr(0))])), "int (*)(void *)"),
    (lambda b, i, c: b.ptr(b.func_proto(0, [])), "void (*)(void)"),
    (lambda b, i, c: b.ptr(b.func_proto(b.ptr(b.func_proto(i, [("", i)])), [("", c)])),
     "int (*(*)(char))(int)"),
    (lambda b, i, c: b.ptr(b.type_tag("user", c)), "char __user *"),
    (lambda b, i, c: b.ptr(b.type_tag("user", b.const(c))), "const char __user *"),
    (lambda b, i, c: b.ptr(b.struct("", 4, [("x", i, 0)])), "struct {...} *"),
    (lambda b, i, c: b.ptr(b.struct("", 4, [("x", i, 0)], union=True)), "union {...} *"),
    (lambda b, i, c: b.enum("", [("A", 0)]), "enum {...}"),
    (lambda b, i, c: b.enum64("big", [("A", 0)]), "enum big"),
    (lambda b, i, c: b.ptr(b.fwd("sock")), "struct sock *"),
    (lambda b, i, c: b.ptr(b.fwd("u", union=True)), "union u *"),
    (lambda b, i, c: b.ptr(0), "void *"),
    (lambda b, i, c: b.float("double", 8), "double"),
])
def test_declarators(build, expected):
    b = BtfBuilder()
    i, c = b.int("int", 4, signed=True), b.int("char", 1, char=True)
    tid = build(b, i, c)
    assert renderer(b).type_name(tid) == expected


def test_a_name_goes_inside_the_declarator():
    b = BtfBuilder()
    i, c = b.int("int", 4, signed=True), b.int("char", 1)
    fp = b.ptr(b.func_proto(i, [("", b.ptr(0))]))
    arr = b.array(c, 16, i)
    proto = b.func_proto(i, [("threadfn", fp), ("comm", arr), ("n", i)])
    fn = b.func("kthread_like", proto)
    r = renderer(b)
    assert r.declaration(fp, "threadfn") == "int (*threadfn)(void *)"
    assert r.declaration(arr, "comm") == "char comm[16]"
    assert r.declaration(i, "") == "int"
    assert r.prototype(fn) == "kthread_like(int (*threadfn)(void *), char comm[16], int n) -> int"


def test_variadic_nameless_and_empty_parameter_lists():
    b = BtfBuilder()
    i, c = b.int("int", 4, signed=True), b.int("char", 1)
    printk_proto = b.func_proto(i, [("fmt", b.ptr(b.const(c)))], variadic=True)
    printk = b.func("_printk", printk_proto)
    noargs = b.func("ktime_get", b.func_proto(b.typedef("ktime_t", i), []))
    nameless = b.func("cb", b.func_proto(0, [("", i), ("", b.ptr(c))]))
    r = renderer(b)
    assert r.prototype(printk) == "_printk(const char *fmt, ...) -> int"
    assert r.prototype(noargs) == "ktime_get(void) -> ktime_t"
    assert r.prototype(nameless) == "cb(int, char *) -> void"
    assert r.params(printk_proto) == [("fmt", "const char *"), ("", "...")]


def test_functions_sharing_a_prototype_share_its_rendering():
    b = BtfBuilder()
    i = b.int("int", 4, signed=True)
    proto = b.func_proto(i, [("x", i)])
    f1, f2 = b.func("one", proto), b.func("two", proto)
    r = renderer(b)
    assert (r.prototype(f1), r.prototype(f2)) == ("one(int x) -> int", "two(int x) -> int")


def test_not_a_function_and_no_prototype_are_errors():
    b = BtfBuilder()
    i = b.int("int", 4)
    bad = b.func("bad", i)
    r = renderer(b)
    with pytest.raises(BtfError, match="type id 1 is not a function"):
        r.prototype(i)
    with pytest.raises(BtfError, match="function 'bad' has no prototype"):
        r.prototype(bad)


def test_a_pointer_loop_is_an_error_not_a_hang():
    b = BtfBuilder()
    b.raw(0, info("PTR"), 1)  # id 1 points at itself
    with pytest.raises(BtfError, match="nested deeper than 64"):
        renderer(b).type_name(1)
