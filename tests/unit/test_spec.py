"""The probe spec language: ktui.lang.spec."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ktui.lang import names
from ktui.lang.filters import parse_filter
from ktui.lang.model import (
    FETCH_TYPES,
    INT_TYPES,
    REGISTERS,
    STRING_TYPES,
    Arg,
    Builtin,
    Compare,
    Deref,
    Fetch,
    Field,
    IntLit,
    Kind,
    Named,
    Probe,
    Reg,
    RetVal,
    SpecError,
    Target,
    UsdtArg,
)
from ktui.lang.spec import parse_fetch, parse_spec, parse_target, validate_probe

# ---------------------------------------------------------------- examples

EXAMPLES = {
    "vfs_read:c:a3": Probe(Target("vfs_read"), Kind.CALL, (Fetch(Arg(3)),)),
    "vfs_read:r:retval:s64": Probe(Target("vfs_read"), Kind.RETURN, (Fetch(RetVal(), "s64"),)),
    "do_sys_openat2:c:fname=+0(a2):ustring": Probe(
        Target("do_sys_openat2"), Kind.CALL, (Fetch(Deref(0, Arg(2)), "ustring", "fname"),)
    ),
    "tcp_sendmsg:c:size=a3:u64": Probe(Target("tcp_sendmsg"), Kind.CALL, (Fetch(Arg(3), "u64", "size"),)),
    "0xffffffff81234560:c:rdi,rsi": Probe(
        Target(address=0xFFFFFFFF81234560), Kind.CALL, (Fetch(Reg("di")), Fetch(Reg("si")))
    ),
    "vfs_read:c": Probe(Target("vfs_read"), Kind.CALL),
    "vfs_read:r:retval:s64,a3:u32": Probe(
        Target("vfs_read"), Kind.RETURN, (Fetch(RetVal(), "s64"), Fetch(Arg(3), "u32"))
    ),
    "tcp_sendmsg+0x1c:c:a1": Probe(Target("tcp_sendmsg", 0x1C), Kind.CALL, (Fetch(Arg(1)),)),
    "foo.isra.0:c:comm,pid,tid,cpu": Probe(
        Target("foo.isra.0"),
        Kind.CALL,
        tuple(Fetch(Builtin(n)) for n in ("comm", "pid", "tid", "cpu")),
    ),
    "f:c:-16(+8(rsp)):x32": Probe(Target("f"), Kind.CALL, (Fetch(Deref(-16, Deref(8, Reg("sp"))), "x32"),)),
}


@pytest.mark.parametrize("text", sorted(EXAMPLES))
def test_examples_parse_to_the_model(text):
    assert parse_spec(text) == EXAMPLES[text]


@pytest.mark.parametrize("text", sorted(EXAMPLES))
def test_examples_print_canonically_and_round_trip(text):
    probe = parse_spec(text)
    assert probe.spec_text == text
    assert str(probe) == text
    assert parse_spec(probe.spec_text) == probe


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("tcp_sendmsg+28:c", "tcp_sendmsg+0x1c:c"),
        ("tcp_sendmsg+0:c", "tcp_sendmsg:c"),
        ("f:c:arg1,arg6", "f:c:a1,a6"),
        # rflags is no register: it parses as a parameter's name, which only
        # the kernel's BTF can refuse (test_a_word_that_is_no_register_is_refused_when_bound)
        ("f:c:ax,di,eflags,ip,flags2=rflags", "f:c:rax,rdi,flags,rip,flags2=rflags"),
        ("f:c:ax,di,eflags,ip", "f:c:rax,rdi,flags,rip"),
        ("  f : c : a1 , x = +0x10 ( a2 ) : u8 ", "f:c:a1,x=+16(a2):u8"),
        ("0XFFFF:r", "0xffff:r"),
        ("f:c:-0(a1)", "f:c:+0(a1)"),
    ],
)
def test_accepted_spellings_normalise(text, canonical):
    if canonical is None:
        with pytest.raises(SpecError):
            parse_spec(text)
        return
    probe = parse_spec(text)
    assert probe.spec_text == canonical
    assert parse_spec(canonical) == probe


def test_every_register_spelling_maps_to_pt_regs_names():
    for reg in REGISTERS:
        assert parse_fetch(reg) == Fetch(Reg(reg))
        assert parse_fetch(str(Reg(reg))) == Fetch(Reg(reg))
    assert parse_fetch("rax").expr == Reg("ax")
    assert parse_fetch("r15").expr == Reg("r15")


def test_parse_target_forms():
    assert parse_target("vfs_read") == Target("vfs_read")
    assert parse_target("tcp_sendmsg+0x1c") == Target("tcp_sendmsg", 0x1C)
    assert parse_target("tcp_sendmsg+28") == Target("tcp_sendmsg", 28)
    assert parse_target("0xffffffff81234560") == Target(address=0xFFFFFFFF81234560)
    assert parse_target("foo.constprop.0") == Target("foo.constprop.0")


def test_parse_fetch_forms():
    assert parse_fetch("a3") == Fetch(Arg(3))
    assert parse_fetch("fname=+0(a2):ustring") == Fetch(Deref(0, Arg(2)), "ustring", "fname")
    assert parse_fetch("retval") == Fetch(RetVal())  # kind unknown: allowed here
    assert parse_fetch("x=comm") == Fetch(Builtin("comm"), label="x")


def test_type_suffix_splits_from_the_fetch_list():
    probe = parse_spec("vfs_read:r:retval:s64,a3:u32,n=a2:x16")
    assert [f.type for f in probe.fetches] == ["s64", "u32", "x16"]
    assert [f.name for f in probe.fetches] == ["retval", "a3", "n"]


def test_string_types_allowed_on_args_registers_and_derefs():
    for text in ("f:c:a1:string", "f:c:rdi:ustring", "f:c:+8(a1):string", "f:r:+0(retval):string"):
        assert parse_spec(text).fetches[0].type in STRING_TYPES


def test_eight_fetches_are_fine():
    text = "f:c:" + ",".join(f"v{i}=a1" for i in range(8))
    assert len(parse_spec(text).fetches) == 8


def test_eight_dereferences_are_fine():
    text = "f:c:" + "+0(" * 8 + "a1" + ")" * 8
    assert parse_spec(text).spec_text == text


# ---------------------------------------------------------------- errors


def _error(fn, text) -> SpecError:
    with pytest.raises(SpecError) as info:
        fn(text)
    return info.value


ERRORS = [
    # text, column, words the message must contain
    ("vfs_read:x:a1", 10, 'kind must be c, r or t, got "x"'),
    ("vfs_read:call", 10, 'got "call"'),
    ("vfs_read", 9, "expected :c or :r"),
    ("", 1, "empty spec"),
    ("   ", 1, "empty spec"),
    (":c", 1, "expected a kernel symbol"),
    ("1234:c", 1, "hex"),
    ("0x:c", 1, "bad address"),
    ("0x0:c", 1, "address 0"),
    ("0x1ffffffffffffffff:c", 1, "too large"),
    ("f+:c", 3, "expected an offset"),
    ("f+0xzz:c", 3, "bad offset"),
    ("f-8:c", 2, "offset is added"),
    ("f+8:r", 3, "return probe"),
    ("vfs_read:c:retval", 12, "return probes"),
    ("vfs_read:c:+8(retval)", 15, "return probes"),
    ("vfs_read:c:eax", 12, "rax:u32"),
    ("vfs_read:c:a7", 12, "a1..a6"),
    ("vfs_read:c:arg0", 12, "a1..a6"),
    ("vfs_read:c:%di", 12, "write rdi without the %"),
    ("vfs_read:c:$arg2", 12, "write a2 without the $"),
    ("vfs_read:c:comm:u8", 17, "comm is text"),
    ("vfs_read:c:pid:string", 16, "pid is an integer"),
    ("vfs_read:c:cpu:symbol", 16, "cpu is an integer"),
    ("vfs_read:r:retval:string", 19, "retval cannot be :string"),
    ("vfs_read:c:+0(comm)", 15, "cannot be dereferenced"),
    ("vfs_read:c:a1:u7", 15, 'unknown type "u7"'),
    ("vfs_read:c:a1:", 15, "unknown type"),
    ("vfs_read:c:a1:u8:u8", 17, "expected , between fetches"),
    ("vfs_read:c:a1,a1", 15, 'fetch name "a1" is used twice'),
    ("vfs_read:c:x=a1,x=a2", 17, 'fetch name "x" is used twice'),
    ("vfs_read:c:a1,", 15, "expected a fetch"),
    ("vfs_read:c:", 12, "expected a fetch"),
    ("vfs_read:c a1", 12, "expected : before the fetches"),
    ("vfs_read:c:comm=a1", 12, '"comm" is a reserved name'),
    ("vfs_read:c:rdi=a1", 12, "reserved"),
    ("vfs_read:c:a2=a1", 12, "reserved"),
    ("vfs_read:c:" + "x" * 33 + "=a1", 12, "longer than 32"),
    ("vfs_read:c:+8a1", 13, 'bad offset "8a1"'),
    ("vfs_read:c:+8 a1", 15, "expected ( after the offset"),
    ("vfs_read:c:+(a1)", 13, "expected an offset"),
    ("vfs_read:c:+0(a1", 17, "expected ) to close the ( at column 14"),
    ("vfs_read:c:+99999999999999999999999(a1)", 13, "too large"),
    ("vfs_read:c:+0x8000000000000000(a1)", 13, "too large"),
    ("vfs_read:c:" + "+0(" * 9 + "a1" + ")" * 9, 12 + 3 * 8, "deeper than 8"),
    ("vfs_read:c:" + ",".join(f"v{i}=a1" for i in range(9)), 12 + 6 * 8, "at most 8 fetches"),
    ("f" * 4097 + ":c", 4097, "longer than 4096"),
    ("vfs_read:c:a1;rm -rf /", 14, "expected , between fetches"),
]


@pytest.mark.parametrize("text, col, words", ERRORS)
def test_errors_have_a_column_and_a_helpful_message(text, col, words):
    err = _error(parse_spec, text)
    assert err.col == col, str(err)
    assert words in err.message
    assert str(err) == f"{col}: {err.message}"


def test_error_message_lists_what_fetches_are_allowed():
    err = _error(parse_spec, "vfs_read:c:1")
    assert err.col == 12
    for word in ("a parameter by name", "a1..a6", "retval", "comm", "register", "+OFFSET(FETCH)"):
        assert word in err.message


# An unknown word in a fetch is a parameter's name to the parser (it cannot
# tell one from a typo); binding it to the kernel's BTF refuses it, with
# the column, the prototype and a did-you-mean over the parameters and the
# predefined names. These were parse errors before names existed.
BIND_ERRORS = [
    ("vfs_read:c:rdj", 12, "did you mean rdx?"),
    ("vfs_read:c:bogus", 12, "vfs_read has no parameter 'bogus'"),
    ("vfs_read:c:a1,x=cuont", 17, "did you mean count?"),
    ("vfs_read:c:flags2=rflags", 19, "did you mean flags?"),
]


@pytest.mark.parametrize("text, col, words", BIND_ERRORS)
def test_unknown_words_parse_as_names_and_are_refused_when_bound(tmp_path, text, col, words):
    from ktui.lang.bind import bind_probe
    from tests.unit.namedkernel import VFS_READ, kernel_names

    probe = parse_spec(text)
    assert isinstance(probe.fetches[-1].expr, Named) and probe.fetches[-1].expr.binding is None
    with pytest.raises(SpecError) as info:
        bind_probe(probe, kernel_names(tmp_path), text=text)
    assert info.value.col == col, str(info.value)
    assert words in info.value.message and info.value.message.endswith(VFS_READ)


def test_a_word_that_is_no_register_is_refused_when_bound(tmp_path):
    from ktui.lang.bind import bind_probe
    from tests.unit.namedkernel import kernel_names

    probe = parse_spec("vfs_read:c:ax,di,eflags,ip,flags2=rflags")
    assert probe.fetches[-1] == Fetch(Named("rflags"), label="flags2")
    with pytest.raises(SpecError, match=r"no parameter 'rflags' \(did you mean flags\?\)"):
        bind_probe(probe, kernel_names(tmp_path))


def test_without_btf_a_name_says_to_use_a1_to_a6(tmp_path):
    from ktui.lang.bind import bind_probe
    from tests.unit.namedkernel import no_btf

    for kernel in (None, no_btf(tmp_path)):
        with pytest.raises(SpecError) as info:
            bind_probe(parse_spec("vfs_read:c:bogus"), kernel)
        assert info.value.col == 12
        assert info.value.message.startswith("bogus: parameters by name need the kernel's BTF (no BTF")
        assert info.value.message.endswith("use a1..a6")


def test_parse_fetch_and_target_errors_are_located():
    assert _error(parse_fetch, "a1:u7").col == 4
    assert _error(parse_fetch, "comm:u8").col == 6
    assert _error(parse_fetch, "a1 a2").col == 4
    assert _error(parse_target, "vfs_read:c").col == 9
    assert _error(parse_target, "vfs read").col == 5
    assert _error(parse_target, "").col == 1


def test_non_text_is_a_spec_error():
    for fn in (parse_spec, parse_fetch, parse_target):
        with pytest.raises(SpecError):
            fn(None)  # type: ignore[arg-type]


# ---------------------------------------------------------------- odd unicode

# Bidi controls, zero-width characters and other invisible ones
# (ktui/chars.py), each where the grammar would otherwise accept the text
# around it: the error names the code point and points at it.
ODD = [
    ("\u202e", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    ("\u2066", "U+2066 LEFT-TO-RIGHT ISOLATE"),
    ("\u200f", "U+200F RIGHT-TO-LEFT MARK"),
    ("\u061c", "U+061C ARABIC LETTER MARK"),
    ("\u200b", "U+200B ZERO WIDTH SPACE"),
    ("\u2060", "U+2060 WORD JOINER"),
    ("\ufeff", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
    ("\x00", "U+0000 NULL (a control character)"),
    ("\ue000", "U+E000 (a private-use character)"),
    ("\u2029", "U+2029 PARAGRAPH SEPARATOR"),
]
ODD_PLACES = [
    (parse_spec, "spec", "vfs_read:c:a1{}", 14),
    (parse_spec, "spec", "{}vfs_read:c", 1),
    (parse_fetch, "fetch", "n{}=a1", 2),
    (parse_target, "target", "vfs_read{}", 9),
    (parse_filter, "filter", "a1 == 1{}", 8),
    (parse_filter, "filter", 'comm == "d{}d"', 11),  # inside a string, too
]


@pytest.mark.parametrize("char, name", ODD)
@pytest.mark.parametrize("parse, what, template, col", ODD_PLACES)
def test_odd_unicode_is_refused_by_code_point(parse, what, template, col, char, name):
    err = _error(parse, template.format(char))
    assert err.col == col, str(err)
    assert err.message.startswith(f"{name} is not allowed in a {what}"), err.message
    assert char not in str(err)


def test_other_non_ascii_is_named_by_code_point_not_shown_raw():
    err = _error(parse_spec, "vfs_r\u00ebad:c")
    assert err.col == 6 and "U+00EB LATIN SMALL LETTER E WITH DIAERESIS" in err.message


@pytest.mark.parametrize("label", ["rx\u202e", "\u200b", "a\u2028b"])
def test_validate_refuses_a_probe_label_with_odd_unicode(label):
    probe = dataclasses.replace(parse_spec("vfs_read:c"), label=label)
    with pytest.raises(SpecError, match=r"^label: U\+[0-9A-F]{4} .* is not allowed"):
        validate_probe(probe)
    validate_probe(dataclasses.replace(probe, label="größe ✓"))  # printable text is fine


# ---------------------------------------------------------------- validate_probe


def test_validate_accepts_parsed_probes():
    for text in EXAMPLES:
        validate_probe(parse_spec(text))


def _with(spec: str, **changes) -> Probe:
    return dataclasses.replace(parse_spec(spec), **changes)


@pytest.mark.parametrize(
    "probe, words",
    [
        (Probe(Target("f"), Kind.CALL, (Fetch(RetVal()),)), "return probes"),
        (Probe(Target("f"), Kind.CALL, (Fetch(Arg(1)), Fetch(Arg(1), "u8"))), "used twice"),
        (Probe(Target("f"), Kind.CALL, tuple(Fetch(Arg(1), label=f"v{i}") for i in range(9))), "at most 8"),
        (Probe(Target("f"), Kind.CALL, (Fetch(Builtin("comm"), "u8"),)), "comm is text"),
        (Probe(Target("f"), Kind.CALL, (Fetch(Arg(7)),)), "a1..a6"),
        (Probe(Target("f"), Kind.CALL, (Fetch(Reg("rax")),)), "canonical"),
        (Probe(Target("f"), Kind.CALL, (Fetch(Arg(1), "u7"),)), "unknown type"),
        (Probe(Target("f"), Kind.CALL, (Fetch(Arg(1), label="pid"),)), "reserved"),
        (Probe(Target(), Kind.CALL), "canonical"),
        (Probe(Target("f", offset=-1), Kind.CALL), "bad offset"),
        (Probe(Target("f", 8), Kind.RETURN), "return probe"),
        (Probe(Target("f"), "c"), "malformed"),  # type: ignore[arg-type]
        (Probe(Target("f"), Kind.CALL, sample=0), "sample"),
        (Probe(Target("f"), Kind.CALL, sample=True), "sample"),
        (Probe(Target("f"), Kind.CALL, rate_limit=0), "rate_limit"),
        (Probe(Target("f"), Kind.CALL, fetches=[Fetch(Arg(1))]), "tuple"),  # type: ignore[arg-type]
        (Probe(Target("f"), Kind.CALL, (Fetch(Deref(0, Arg(1))),)), None),
    ],
)
def test_validate_rejects(probe, words):
    if words is None:  # control case: valid
        validate_probe(probe)
        return
    with pytest.raises(SpecError) as info:
        validate_probe(probe)
    assert words in info.value.message


def test_validate_accepts_sample_and_rate_limit():
    validate_probe(_with("f:c:a1", sample=10, rate_limit=1000))


def test_validate_rejects_hand_built_deep_nesting_without_recursing():
    expr = Arg(1)
    for _ in range(100_000):
        expr = Deref(0, expr)
    with pytest.raises(SpecError, match="deeper than 8"):
        validate_probe(Probe(Target("f"), Kind.CALL, (Fetch(expr),)))


def test_validate_columns_point_into_the_canonical_text():
    probe = Probe(Target("vfs_read"), Kind.CALL, (Fetch(Arg(1)), Fetch(RetVal())))
    with pytest.raises(SpecError) as info:
        validate_probe(probe)
    assert info.value.col == probe.spec_text.index("retval") + 1


# ---- filters checked against the probe

FILTER_OK = [
    ("vfs_read:r:retval,n=a3", "retval < 0 && n > 4096"),
    ("vfs_read:c:a3", 'a3 > 4096 && comm == "dd"'),
    ("vfs_read:c", "pid == 42 || tid != 1 || cpu >= 0"),
    ("vfs_read:c", "a6 == 1 && rdi != 0 && r15 == 2 && rip > 0 && flags == 0"),
    ("vfs_read:c:f=+0(a2):string", 'f == "/etc/passwd"'),
    ("vfs_read:c:a2:ustring", 'a2 != "x"'),  # the fetch named a2 is a string
    ("vfs_read:c", 'comm == "123456789012345"'),
    ("vfs_read:c:f=a2:string", '"ok" == f'),
]


@pytest.mark.parametrize("spec, text", FILTER_OK)
def test_filters_that_resolve(spec, text):
    validate_probe(_with(spec, filter=parse_filter(text)), filter_text=text)
    validate_probe(_with(spec, filter=parse_filter(text)))


FILTER_BAD = [
    # spec, filter text, column in the filter text, words
    ("vfs_read:c:a3", "retval < 0", 1, "return probes"),
    # Inside a function (or at an address) a name cannot be a parameter: refused here.
    # At a function's entry it can: see test_filter_names_that_may_be_parameters_wait_for_btf.
    ("vfs_read+4:c:size=a3", "sise > 1", 1, "did you mean size"),
    ("vfs_read+4:c:size=a3", "a1 == 1 && nope > 1", 12, 'unknown name "nope"'),
    ("0xffffffff81000000:c:size=a3", "a1 == 1 && nope > 1", 12, 'unknown name "nope"'),
    ("vfs_read:c", 'a3 == "x"', 7, "a3 is an integer"),
    ("vfs_read:c", "comm == 1", 9, "comm is a string"),
    ("vfs_read:c", "1 == comm", 1, "comm is a string"),
    ("vfs_read:c", 'comm < "x"', 6, "only with == or !="),
    ("vfs_read:c", "comm == a3", 6, "cannot compare string comm with integer a3"),
    ("vfs_read:c", 'comm == "1234567890123456"', 9, "at most 15"),
    ("vfs_read:c:f=a2:string", "f > 5", 5, "f is a string"),
    ("vfs_read:c:f=a2:u32", 'f == "x"', 6, "f is an integer"),
    ("vfs_read:c:p=pid", '  p  ==  "x"', 10, "p is an integer"),
    # codegen compares a string with a literal's bytes only (it accepted this, then failed to compile)
    ("vfs_read:c:f=+0(a2):string", "f == comm", 6, 'compares only with a quoted "text"'),
]


@pytest.mark.parametrize("spec, text, col, words", FILTER_BAD)
def test_filters_that_do_not_resolve(spec, text, col, words):
    probe = _with(spec, filter=parse_filter(text))
    with pytest.raises(SpecError) as info:
        validate_probe(probe, filter_text=text)
    assert info.value.col == col
    assert words in info.value.message
    assert info.value.message.startswith("filter: ")
    # Without the text the column is in the canonical filter text.
    with pytest.raises(SpecError) as canon:
        validate_probe(probe)
    canonical = str(probe.filter)
    assert canon.value.message == info.value.message
    assert 1 <= canon.value.col <= len(canonical)


def test_filter_names_that_may_be_parameters_wait_for_btf(tmp_path):
    """At a function's entry an unknown filter name may be a parameter: the
    checks let it through, marked deferred, and binding to BTF refuses it
    with the prototype and the did-you-mean (the columns: test_bind)."""
    from ktui.lang.bind import bind_probe
    from tests.unit.namedkernel import VFS_READ, kernel_names

    kernel = kernel_names(tmp_path)
    for spec, text, name, words in [
        ("vfs_read:c:size=a3", "a1 == 1 && nope > 1", "nope", "vfs_read has no parameter 'nope'"),
        ("vfs_read:c:a3", "cuont > 1", "cuont", "(did you mean count?)"),
    ]:
        probe = _with(spec, filter=parse_filter(text))
        validate_probe(probe, filter_text=text)
        assert names.resolve(probe, name).deferred
        with pytest.raises(SpecError) as info:
            bind_probe(probe, kernel)
        message = info.value.message
        assert message.startswith("filter: ") and words in message and VFS_READ in message


def test_filter_text_that_is_another_filter_falls_back_to_canonical_columns():
    probe = _with("vfs_read+4:c", filter=parse_filter("nope == 1"))
    with pytest.raises(SpecError) as info:
        validate_probe(probe, filter_text="   pid == 1 && nope == 1")
    assert info.value.col == 1


def test_hand_built_non_canonical_filters_are_rejected():
    for bad in (
        Compare("==", Field("arg1"), IntLit(1)),  # not normalised
        Compare("=~", Field("a1"), IntLit(1)),
        Compare("==", IntLit(1), IntLit(1)),
        "a1 == 1",
    ):
        with pytest.raises(SpecError, match="filter: "):
            validate_probe(_with("f:c", filter=bad))


# ---------------------------------------------------------------- round trip property

_IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,31}", fullmatch=True)
_LABELS = _IDENT.filter(lambda w: not names.is_reserved(w))
_SYMBOLS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,30}(\.(isra|constprop|cold)(\.[0-9])?)?", fullmatch=True)
_OFFSETS = st.integers(-(2**63 - 1), 2**63 - 1)
# a user function's file: absolute, no ':' and no blank (the grammar's limits)
_PATHS = st.from_regex(r"(/[A-Za-z0-9_.+@,=-]{1,12}){1,4}", fullmatch=True)


@st.composite
def _fetch_expr(draw, kind: Kind):
    leaves = [st.builds(Arg, st.integers(1, 6)), st.builds(Reg, st.sampled_from(REGISTERS))]
    if kind is Kind.TRACEPOINT:  # fields by name; `flags`, `pid`, `ip` print as args.NAME
        leaves = [st.builds(Named, st.sampled_from(("filename", "count", "flags", "pid", "ip", "prev_comm")))]
    if kind is Kind.RETURN:
        leaves.append(st.just(RetVal()))
    if kind is Kind.USDT:  # a probe point's arguments, where its note says
        leaves = [st.builds(UsdtArg, st.integers(1, 6))]
    offsets = draw(st.lists(_OFFSETS, max_size=8))
    if not offsets and draw(st.booleans()):
        return Builtin(draw(st.sampled_from(("comm", "pid", "tid", "cpu"))))
    expr = draw(st.one_of(leaves))
    for offset in offsets:
        expr = Deref(offset, expr)
    return expr


def _types_for(expr) -> list[str | None]:
    if isinstance(expr, Builtin):
        return [None, "string"] if expr.name == "comm" else [None, *INT_TYPES]
    if isinstance(expr, RetVal):
        return [None, *INT_TYPES, "symbol"]
    return [None, *FETCH_TYPES]


@st.composite
def _fetch(draw, kind: Kind, user: bool = False):
    expr = draw(_fetch_expr(kind))
    types = _types_for(expr)
    if user and isinstance(expr, RetVal):
        types += ["string", "ustring"]  # a user function's char *: its string
    type_ = draw(st.sampled_from(types))
    label = draw(st.one_of(st.none(), _LABELS))
    return Fetch(expr, type_, label)


@st.composite
def valid_probes(draw):
    kind = draw(st.sampled_from(Kind))
    if kind is Kind.TRACEPOINT:
        target = Target(tracepoint=draw(st.sampled_from(("syscalls/sys_enter_openat", "sched/sched_switch",
                                                         "9p/9p_client_req"))))
    elif kind is Kind.USDT:  # PATH:PROVIDER:NAME; a NAME that is a kind word reads as the kind
        name = draw(_IDENT.filter(lambda w: w not in ("c", "r", "t", "usdt")))
        target = Target(path=draw(_PATHS), usdt=f"{draw(_IDENT)}:{name}")
    elif draw(st.booleans()):  # a user function: PATH:SYMBOL[+OFF] or PATH:0xADDR
        if draw(st.booleans()):
            target = Target(address=draw(st.integers(1, 2**64 - 1)), path=draw(_PATHS))
        else:
            offset = 0 if kind is Kind.RETURN else draw(st.one_of(st.just(0), st.integers(1, 2**64 - 1)))
            target = Target(draw(_SYMBOLS), offset, path=draw(_PATHS))
    elif draw(st.booleans()):
        target = Target(address=draw(st.integers(1, 2**64 - 1)))
    elif draw(st.booleans()):  # alternatives: `a|b`, one of them in use
        names = draw(st.lists(_SYMBOLS, min_size=2, max_size=8, unique=True))
        target = Target(draw(st.sampled_from(names)), alternatives=tuple(names))
    else:
        offset = 0 if kind is Kind.RETURN else draw(st.one_of(st.just(0), st.integers(1, 2**64 - 1)))
        target = Target(draw(_SYMBOLS), offset)
    fetches = draw(st.lists(_fetch(kind, target.is_user), max_size=8, unique_by=lambda f: f.name))
    return Probe(target, kind, tuple(fetches))


@settings(max_examples=400, deadline=None)
@given(valid_probes())
def test_generated_probes_round_trip(probe):
    validate_probe(probe)
    assert parse_spec(probe.spec_text) == probe
    for fetch in probe.fetches:
        assert parse_fetch(str(fetch), probe.kind if probe.kind is Kind.USDT else None) == fetch
    assert parse_target(str(probe.target)) == probe.target


# ---------------------------------------------------------------- a label in the spec


def test_a_spec_may_start_with_the_probe_label_as_perf_probe_does():
    probe = parse_spec("reads=vfs_read:c:n=a3")
    assert probe.label == "reads" and probe.name == "reads"
    assert probe.spec_text == "vfs_read:c:n=a3"  # the spec proper, without the label
    assert str(probe) == "reads=vfs_read:c:n=a3" and parse_spec(str(probe)) == probe
    assert parse_spec(" r = 0xffffffff81234560:c").label == "r"
    assert parse_spec("a3=vfs_read:c").label == "a3"  # a probe label is no filter name


@pytest.mark.parametrize("text, col, words", [
    ("x" * 65 + "=vfs_read:c", 1, "label longer than 64 characters"),
    ("reads=", 7, "expected a kernel symbol"),
    ("reads==vfs_read:c", 7, "expected a kernel symbol"),
    ("re.ads=vfs_read:c", 7, "a probe label is a word"),
])
def test_a_bad_spec_label_is_located(text, col, words):
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    assert info.value.col == col and words in info.value.message


def test_a_label_that_is_not_a_word_prints_as_the_spec():
    probe = dataclasses.replace(parse_spec("vfs_read:c"), label="read size")
    assert str(probe) == "vfs_read:c"
