"""Random and hostile text: the parsers return a model object or raise
SpecError with a column inside the text, never anything else. Whatever
parses prints back to text that parses to the same object."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ktui.lang.filters import parse_filter
from ktui.lang.model import (
    And,
    Arg,
    Builtin,
    Compare,
    Deref,
    Fetch,
    Field,
    IntLit,
    Kind,
    Not,
    Or,
    Probe,
    Reg,
    RetVal,
    SpecError,
    StrLit,
    Target,
)
from ktui.lang.spec import parse_fetch, parse_spec, parse_target, validate_probe

PARSERS = {
    "spec": (parse_spec, Probe),
    "fetch": (parse_fetch, Fetch),
    "target": (parse_target, Target),
    "filter": (parse_filter, (Compare, And, Or, Not)),
}

SPEC_FRAGMENTS = [
    "vfs_read", "foo.isra.0", "tcp_sendmsg", "0xffffffff81234560", "0x", "0", "1c", "+0x1c", "+", "-",
    ":", "::", "c", "r", "x", ",", ", ", " ", "\t", "a1", "a6", "a7", "arg2", "retval", "comm", "pid",
    "rdi", "di", "eflags", "eax", "r15", "rdj", "+0(", "-8(", "(", ")", "=", "fname=", ":u8", ":s64",
    ":string", ":ustring", ":symbol", ":u7", "%", "$", "99999999999999999999999", "\x00", "é", "\n",
    "+0(" * 9, ")" * 9, "x" * 40,
]
FILTER_FRAGMENTS = [
    "a1", "arg3", "retval", "comm", "pid", "rdi", "eax", "a7", "fname", " ", "==", "!=", "<", "<=", ">",
    ">=", "=", "&&", "||", "&", "|", "!", "(", ")", "0", "-1", "0x10", "0xg", "-", "4096",
    "18446744073709551616", '"', '"dd"', r"\"", r"\\", r"\n", "é", ";", "bpf_override_return(ctx, 0)",
    "(" * 33, "!" * 33,
]


def _grammarish(fragments):
    return st.lists(st.sampled_from(fragments), max_size=40).map("".join)


def _check(kind: str, text: str) -> None:
    parse, model_type = PARSERS[kind]
    try:
        result = parse(text)
    except SpecError as err:
        assert err.col is not None, err
        assert 1 <= err.col <= len(text) + 1, err
        assert err.message and "\n" not in err.message
        return
    assert isinstance(result, model_type)
    assert parse(str(result)) == result  # whatever parses round-trips


@pytest.mark.parametrize("kind", sorted(PARSERS))
@settings(max_examples=300, deadline=None)
@given(text=st.text())
def test_random_unicode_text(kind, text):
    _check(kind, text)


@pytest.mark.parametrize("kind", ["spec", "fetch", "target"])
@settings(max_examples=400, deadline=None)
@given(text=_grammarish(SPEC_FRAGMENTS))
def test_spec_like_text(kind, text):
    _check(kind, text)


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(_grammarish(FILTER_FRAGMENTS), st.text(alphabet='a1 =!<>&|()"\\-0x9comrtv')))
def test_filter_like_text(text):
    _check("filter", text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="vfs_rad.:cr,+-()0x19=$% \tulgintmybp"))
def test_spec_alphabet_soup(text):
    _check("spec", text)
    _check("fetch", text)


HOSTILE = [
    "a1); bpf_override_return(ctx, 0); (",
    'comm == "x"); bpf_probe_write_user(0, 0, 0); ("',
    "vfs_read:c:a1); bpf_override_return(ctx, 0); (",
    "vfs_read:c:a1\n#include <linux/sched.h>",
    "vfs_read:c:fname=+0(a2):ustring */ int x; /*",
    "+0(" * 1000 + "a1" + ")" * 1000,
    "vfs_read:c:" + "+0(" * 1000 + "a1" + ")" * 1000,
    "vfs_read:c:" + "+0(" * 2000 + "a1" + ")" * 2000,
    "(" * 3000 + "a1 == 1" + ")" * 3000,
    "!" * 4000,
    "a1==1&&" * 580 + "a1==1",
    "a1==1||" * 580 + "a1==1",
    "x" * 100_000,
    "vfs_read:c:" + "a1," * 2000 + "a1",
    "\x00" * 10,
    "vfs_read:c:a1:" + "u8" * 3000,
    "0x" + "f" * 4000 + ":c",
    "f+" + "9" * 4000 + ":c",
    'comm == "' + "\\" * 4000 + '"',
]


@pytest.mark.parametrize("kind", sorted(PARSERS))
@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: t[:20])
def test_hostile_text_is_a_clean_spec_error(kind, text):
    _check(kind, text)


# ---------------------------------------------------------------- validate_probe on hand-built objects

_any_int = st.one_of(st.integers(), st.integers(-10, 10), st.just(2**64))
_any_text = st.one_of(st.text(max_size=40), st.sampled_from(["a1", "fname", "comm", "x,y", "x=y", ""]))
_exprs = st.recursive(
    st.one_of(
        st.builds(Arg, _any_int),
        st.builds(Reg, st.one_of(_any_text, st.sampled_from(["di", "rax", "flags"]))),
        st.just(RetVal()),
        st.builds(Builtin, st.one_of(_any_text, st.sampled_from(["comm", "pid"]))),
        _any_text,  # not a FetchExpr at all
    ),
    lambda inner: st.builds(Deref, _any_int, inner),
    max_leaves=10,
)
_fetches = st.builds(
    Fetch,
    _exprs,
    st.one_of(st.none(), st.sampled_from(["u8", "string", "symbol", "u7", ""]), _any_text),
    st.one_of(st.none(), _any_text),
)
_operands = st.one_of(
    st.builds(Field, st.one_of(_any_text, st.sampled_from(["a1", "comm", "retval", "fname"]))),
    st.builds(IntLit, _any_int),
    st.builds(StrLit, _any_text),
)
_filters = st.recursive(
    st.builds(Compare, st.sampled_from(["==", "<", "=~", ""]), _operands, _operands),
    lambda sub: st.one_of(st.builds(And, sub, sub), st.builds(Or, sub, sub), st.builds(Not, sub)),
    max_leaves=8,
)
_probes = st.builds(
    Probe,
    st.builds(
        Target,
        st.one_of(st.none(), _any_text, st.just("vfs_read")),
        _any_int,
        st.one_of(st.none(), _any_int),
    ),
    st.sampled_from(Kind),
    st.lists(_fetches, max_size=10).map(tuple),
    st.one_of(st.none(), _filters),
    sample=st.one_of(st.just(1), _any_int),
    rate_limit=st.one_of(st.none(), _any_int),
)


@settings(max_examples=400, deadline=None)
@given(_probes)
def test_validate_probe_only_raises_spec_errors(probe):
    try:
        validate_probe(probe)
    except SpecError as err:
        assert err.message and "\n" not in err.message
        return
    # Accepted: then it is canonical and parses back equal.
    assert parse_spec(probe.spec_text) == Probe(probe.target, probe.kind, probe.fetches)
