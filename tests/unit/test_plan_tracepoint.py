"""A tracepoint probe's plan: fields read from the record (SRC_RECORD),
dynamic fields by their __data_loc word, and filter names no event field
holds fetched into scratch past the record (tracepoints never compile)."""

from __future__ import annotations

from ktui.kernel.generic import abi
from ktui.kernel.generic.plan import build_plan, record_size
from ktui.lang.model import (Binding, Compare, DataLoc, Deref, Fetch, Field, IntLit, Kind, Named, Probe, Record,
                             StrLit, Target)
from ktui.record.layout import HEADER_SIZE

R = Record()


def field(name: str, expr, type_: str, ctype: str = "int") -> Named:
    return Named(name, binding=Binding(expr, type_, ctype))


def tracepoint(*fetches: Fetch, **kw) -> Probe:
    return Probe(Target(tracepoint="syscalls/sys_enter_openat"), Kind.TRACEPOINT, fetches=fetches, **kw)


def test_a_field_is_read_at_its_offset_from_the_record():
    probe = tracepoint(Fetch(field("flags", Deref(32, R), "s32")),
                       Fetch(field("filename", Deref(0, Deref(24, R)), "ustring", "const char *"), "ustring"))
    plan = build_plan(probe, gen=1)
    flags, name = plan.fetch[0], plan.fetch[1]
    assert (flags.src, flags.nderef, flags.offs[0], flags.width, flags.kind, flags.loc) == \
        (abi.SRC_RECORD, 1, 32, 4, abi.K_SINT, abi.LOC_NONE)
    # the pointer at +24, then the user's text it points to
    assert (name.src, name.nderef, list(name.offs[:2]), name.kind) == (abi.SRC_RECORD, 2, [24, 0], abi.K_USTR)
    assert not plan.flags & (abi.F_REGS | abi.F_ARGS)  # the record is all a tracepoint hit reads


def test_a_dynamic_field_reads_where_its_loc_word_says():
    for relative, loc in ((False, abi.LOC_DATA), (True, abi.LOC_REL)):
        plan = build_plan(tracepoint(Fetch(field("filename", DataLoc(8, relative), "string", "char[]"))), gen=1)
        f = plan.fetch[0]
        assert (f.src, f.nderef, f.offs[0], f.loc, f.kind) == (abi.SRC_RECORD, 1, 8, loc, abi.K_KSTR)


def test_a_filter_on_a_field_no_event_holds_fetches_it_into_scratch_first():
    count = field("count", Deref(32, R), "u64", "size_t")
    probe = tracepoint(filter=Compare("==", Field("count"), IntLit(4097)), bindings={"count": count})
    plan = build_plan(probe, gen=1)
    assert plan.nfetch == 1 and record_size(probe) == HEADER_SIZE  # the record holds none of it
    f = plan.fetch[0]
    assert (f.src, f.offs[0], f.width, f.dest) == (abi.SRC_RECORD, 32, 8, 0)
    c = plan.cmps[0]
    assert (c.lsrc, c.lreg, c.imm) == (abi.SRC_VAL, 0, 4097)
    assert plan.fetch_before == 1 and plan.fetch_after == 0
    assert not plan.flags & abi.F_EMITS


def test_a_string_filter_on_a_field_no_event_holds_compares_its_scratch_copy():
    name = field("filename", DataLoc(8), "string", "char[]")
    flags = Fetch(field("flags", Deref(32, R), "s32"))
    probe = tracepoint(flags, filter=Compare("==", Field("filename"), StrLit("/usr/bin/true")),
                       bindings={"filename": name})
    plan = build_plan(probe, gen=1)
    scratch = plan.fetch[1]
    assert scratch.loc == abi.LOC_DATA and scratch.kind == abi.K_KSTR
    assert scratch.dest == 8  # past flags, the record's only field: no record carries it
    assert (plan.cmps[0].lsrc, plan.cmps[0].lreg) == (abi.SRC_STRVAL, 8)
    assert plan.fetch_before == 0b10 and plan.fetch_after == 0b01


def test_a_narrower_argument_in_a_kprobe_filter_is_fetched_not_compiled():
    """`dfd` an int in a1: compared as an s32, by the generic program."""
    from ktui.lang.model import Arg

    dfd = Named("dfd", binding=Binding(Arg(1), "s32", "int"))
    probe = Probe(Target(symbol="do_sys_openat2"), Kind.CALL, filter=Compare("<", Field("dfd"), IntLit(0)),
                  bindings={"dfd": dfd})
    plan = build_plan(probe, gen=1)
    f = plan.fetch[0]
    assert (f.src, f.reg, f.width, f.kind) == (abi.SRC_REG, abi.REG_INDEX["di"], 4, abi.K_SINT)
    assert (plan.cmps[0].lsrc, plan.cmps[0].sign) == (abi.SRC_VAL, 1)


def test_a_usdt_constant_argument_is_its_value_in_the_fetch():
    """`-4@$7` in a probe point's note: no source to read, the value in offs[0]."""
    from ktui.lang.model import Const, UsdtArg

    a4 = UsdtArg(4, binding=Binding(Const(7), "s32", "usdt -4@$7"))
    probe = Probe(Target(path="/bin/prog", usdt="ktui:tick"), Kind.USDT, fetches=(Fetch(a4),))
    f = build_plan(probe, gen=1).fetch[0]
    assert (f.src, f.nderef, f.offs[0], f.width, f.kind) == (abi.SRC_CONST, 0, 7, 4, abi.K_SINT)
