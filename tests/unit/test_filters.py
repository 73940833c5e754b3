"""The filter language: ktui.lang.filters (and the model's filter printer)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ktui.lang.filters import (
    comparisons,
    parse_filter,
    parse_filter_with_columns,
    tree_depth,
)
from ktui.lang.limits import FILTER_INT_MAX as INT_MAX
from ktui.lang.limits import FILTER_INT_MIN as INT_MIN
from ktui.lang.limits import STRING_LITERAL_MAX as MAX_STRING
from ktui.lang.model import (
    COMPARE_OPS,
    And,
    Compare,
    Field,
    IntLit,
    Not,
    Or,
    SpecError,
    StrLit,
)
from ktui.lang.names import canonical_name, is_reserved


def F(name):
    return Field(name)


def cmp(op, left, right):
    return Compare(op, left, right)


A3_BIG = cmp(">", F("a3"), IntLit(4096))
COMM_DD = cmp("==", F("comm"), StrLit("dd"))

# ---------------------------------------------------------------- parsing

PARSED = [
    ('a3 > 4096 && comm == "dd"', And(A3_BIG, COMM_DD)),
    ('a3>4096&&comm=="dd"', And(A3_BIG, COMM_DD)),
    ("arg3 > 0x1000", A3_BIG),
    ("4096 < a3", cmp("<", IntLit(4096), F("a3"))),
    ("retval <= -1", cmp("<=", F("retval"), IntLit(-1))),
    ("retval>=-0x10", cmp(">=", F("retval"), IntLit(-16))),
    ("pid != 1", cmp("!=", F("pid"), IntLit(1))),
    ("di == 0 || rdi == 0", Or(cmp("==", F("rdi"), IntLit(0)), cmp("==", F("rdi"), IntLit(0)))),
    ("eflags == 0 || ip == 1", Or(cmp("==", F("flags"), IntLit(0)), cmp("==", F("rip"), IntLit(1)))),
    ("size == a2", cmp("==", F("size"), F("a2"))),
    (r'comm == "a\"b\\c"', cmp("==", F("comm"), StrLit('a"b\\c'))),
    ('comm == ""', cmp("==", F("comm"), StrLit(""))),
    ("!(a1 == 0)", Not(cmp("==", F("a1"), IntLit(0)))),
    ("!!(a1 == 0)", Not(Not(cmp("==", F("a1"), IntLit(0))))),
    ("!(a1 == 0 && a2 == 0)", Not(And(cmp("==", F("a1"), IntLit(0)), cmp("==", F("a2"), IntLit(0))))),
    (f"a1 == {INT_MAX}", cmp("==", F("a1"), IntLit(INT_MAX))),
    (f"a1 == {INT_MIN}", cmp("==", F("a1"), IntLit(INT_MIN))),
    ("\ta1 == 1\n", cmp("==", F("a1"), IntLit(1))),
]


@pytest.mark.parametrize("text, expected", PARSED)
def test_parses(text, expected):
    assert parse_filter(text) == expected


def test_precedence_and_binds_tighter_than_or():
    a, b, c = (cmp("==", F(n), IntLit(1)) for n in ("a1", "a2", "a3"))
    assert parse_filter("a1 == 1 || a2 == 1 && a3 == 1") == Or(a, And(b, c))
    assert parse_filter("a1 == 1 && a2 == 1 || a3 == 1") == Or(And(a, b), c)
    assert parse_filter("a1 == 1 && (a2 == 1 || a3 == 1)") == And(a, Or(b, c))
    assert parse_filter("!(a1 == 1) && a2 == 1") == And(Not(a), b)


def test_chains_group_to_the_left():
    a, b, c = (cmp("==", F(n), IntLit(1)) for n in ("a1", "a2", "a3"))
    assert parse_filter("a1 == 1 && a2 == 1 && a3 == 1") == And(And(a, b), c)
    assert parse_filter("a1 == 1 || a2 == 1 || a3 == 1") == Or(Or(a, b), c)


@pytest.mark.parametrize("op", COMPARE_OPS)
def test_every_comparison_operator(op):
    assert parse_filter(f"a1 {op} 5") == cmp(op, F("a1"), IntLit(5))


def test_names_are_normalised():
    assert canonical_name("arg6") == "a6"
    assert canonical_name("ax") == "rax"
    assert canonical_name("r8") == "r8"
    assert canonical_name("eflags") == "flags"
    assert canonical_name("fname") is None
    assert is_reserved("a9") and is_reserved("eax") and is_reserved("comm")
    assert not is_reserved("fname")


def test_columns_of_each_comparison():
    _, cols = parse_filter_with_columns('a3 > 4096 &&  comm == "dd"')
    assert [(c.left, c.op, c.right) for c in cols] == [(1, 4, 6), (15, 20, 23)]


def test_comparisons_and_depth_walk_the_tree_in_order():
    expr = parse_filter("(a1 == 1 || !(a2 == 2)) && a3 == 3")
    assert [c.left for c in comparisons(expr)] == [F("a1"), F("a2"), F("a3")]
    assert tree_depth(expr) == 4


# ---------------------------------------------------------------- errors

ERRORS = [
    ("", 1, "empty filter"),
    ("   ", 1, "empty filter"),
    ("a3", 1, "compare it, e.g. a3 != 0"),
    ("arg3", 1, "compare it, e.g. a3 != 0"),
    ("a1 == 1 && a3", 12, "compare it"),
    ("a1); bpf_override_return(ctx, 0); (", 1, "compare it"),
    ("a1 == 1); bpf_override_return(ctx, 0); (", 8, 'unexpected ")"'),
    ("a1 == 1 ; a2 == 2", 9, 'unexpected character ";"'),
    ("a1 = 1", 4, "use =="),
    ("a1 == 1 & a2 == 1", 9, "use &&"),
    ("a1 == 1 | a2 == 1", 9, "use ||"),
    ("a1 == 1 a2 == 1", 9, 'unexpected "a2"'),
    ("1 == 2", 1, "two constants"),
    ('"a" == "b"', 1, "two constants"),
    ("!a1 == 0", 1, "!(a3 == 0)"),
    ("(a1 == 1", 9, "expected ) to close the ( at column 1"),
    ("a1 == 1)", 8, 'unexpected ")"'),
    ("()", 2, "expected a condition"),
    ("== 1", 1, "expected a condition"),
    ("a1 ==", 6, "after =="),
    ("a1 == )", 7, "after =="),
    ("a1 < < 2", 6, "after <"),
    ("a1 == 1 &&", 11, "expected a condition"),
    ("a1 == 1 || || a2 == 1", 12, "expected a condition"),
    ('comm == "dd', 9, "unterminated string"),
    (r'comm == "d\n"', 11, "escapes"),
    ('comm == "d\x01"', 11, "U+0001 (a control character) is not allowed"),
    ('comm == "é"', 10, "printable ASCII"),
    ('f == "' + "x" * (MAX_STRING + 1) + '"', 6, "longer than 63"),
    ("a1 == 0xg", 7, 'bad number "0xg"'),
    ("a1 == 12ab", 7, 'bad number "12ab"'),
    ("a1 == 0x", 7, "bad number"),
    (f"a1 == {INT_MAX + 1}", 7, "64-bit"),
    (f"a1 == {INT_MIN - 1}", 7, "64-bit"),
    ("a1 == - 1", 7, 'unexpected character "-"'),
    ("a7 == 1", 1, "a1..a6"),
    ("arg0 == 1", 1, "a1..a6"),
    ("eax == 1", 1, "rax:u32"),
    # `a.b` and `a->b` are member chains (test_member_chains_are_one_name); a
    # `.` or `->` not followed by a member's name is still no filter syntax.
    ("a.1 == 1", 2, 'unexpected character "."'),
    ("a..b == 1", 2, 'unexpected character "."'),
    ("a-> == 1", 2, 'unexpected character "-"'),
    ("file->f_pos:u8 == 1", 12, 'unexpected character ":"'),
    ("a3.x == 1", 3, "a3 is a value, not a name with members"),
    ("comm->x == 1", 5, "comm is a value, not a name with members"),
    ("x" * 33 + " == 1", 1, "longer than 32"),
    ("(" * 33 + "a1 == 1" + ")" * 33, 33, "deeper than 32"),
    ("!" * 40 + "(a1 == 1)", 33, "deeper than 32"),
    ("a1 == 1 && " * 64 + "a1 == 1", 64 * 11 + 1, "more than 64 comparisons"),
    ("a1 == 1 " + "x" * 5000, 4097, "longer than 4096"),
    ("a1 == 1 ₁", 9, "unexpected character"),
    ("a1 ＝＝ 1", 4, "unexpected character"),
]


@pytest.mark.parametrize("text, col, words", ERRORS)
def test_errors_have_the_column_of_the_offending_token(text, col, words):
    with pytest.raises(SpecError) as info:
        parse_filter(text)
    assert info.value.col == col, str(info.value)
    assert words in info.value.message


@pytest.mark.parametrize("text, name", [
    ("a.b == 1", "a.b"),
    ("file->f_pos > 0", "file->f_pos"),
    ("file->f_path.dentry->d_flags != 0", "file->f_path.dentry->d_flags"),
    ("args.count > 4096", "count"),  # the fetch `args.count` is called count too
    ("args.flags == 2", "args.flags"),  # flags alone is the register
    ("args.pid == 1", "args.pid"),
])
def test_member_chains_are_one_name(text, name):
    """The same names a fetch takes (`lang.bind` gives them their meaning),
    in the spelling the fetch of that text is called."""
    compare = parse_filter(text)
    assert isinstance(compare, Compare) and compare.left == F(name)
    assert parse_filter(str(compare)) == compare


def test_the_earliest_problem_is_reported_first():
    # A syntax error before a lexical one: the syntax error wins.
    with pytest.raises(SpecError) as info:
        parse_filter("a1 a2 == 1 ; rm")
    assert info.value.col == 1
    assert "compare it" in info.value.message


def test_non_text_is_a_spec_error():
    with pytest.raises(SpecError):
        parse_filter(42)  # type: ignore[arg-type]


# ---------------------------------------------------------------- printing and round trips


@pytest.mark.parametrize("text, expected", PARSED)
def test_examples_round_trip(text, expected):
    assert parse_filter(str(expected)) == expected


def test_canonical_text():
    assert str(parse_filter("a3>4096&&comm==\"dd\"")) == 'a3 > 4096 && comm == "dd"'
    assert str(parse_filter("arg1 == 0x10")) == "a1 == 16"
    assert str(parse_filter("a1==1 || a2==2 && a3==3")) == "a1 == 1 || (a2 == 2 && a3 == 3)"


def test_right_nested_chains_keep_their_shape():
    # The model printer once printed And(a, And(b, c)) as "a && b && c",
    # which parses back as And(And(a, b), c).
    a, b, c = (cmp("==", F(n), IntLit(1)) for n in ("a1", "a2", "a3"))
    for node in (And(a, And(b, c)), Or(a, Or(b, c)), And(And(a, b), c), Or(a, And(b, Or(a, c)))):
        assert parse_filter(str(node)) == node
    assert str(And(And(a, b), c)) == "a1 == 1 && a2 == 1 && a3 == 1"


_NAMES = st.sampled_from(["a1", "a6", "retval", "comm", "pid", "cpu", "rdi", "r8", "rip", "flags", "fname", "x_1"])
_INTS = st.builds(IntLit, st.integers(INT_MIN, INT_MAX))
_STRS = st.builds(StrLit, st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=MAX_STRING))
_FIELDS = st.builds(Field, _NAMES)


@st.composite
def _compare(draw, strings=_STRS):
    op = draw(st.sampled_from(COMPARE_OPS))
    field = draw(_FIELDS)
    other = draw(st.one_of(_FIELDS, _INTS, strings))
    return Compare(op, field, other) if draw(st.booleans()) else Compare(op, other, field)


def _trees(leaf):
    return st.recursive(
        leaf,
        lambda sub: st.one_of(st.builds(And, sub, sub), st.builds(Or, sub, sub), st.builds(Not, sub)),
        max_leaves=16,
    ).filter(lambda e: tree_depth(e) <= 16)  # printed nesting stays within MAX_DEPTH


filter_trees = _trees(_compare())
# String literals without && or || in them, for textual rewriting below.
plain_trees = _trees(_compare(st.builds(StrLit, st.from_regex(r"[a-z/. ]{0,20}", fullmatch=True))))


@settings(max_examples=400, deadline=None)
@given(filter_trees)
def test_generated_trees_round_trip(expr):
    text = str(expr)
    assert parse_filter(text) == expr
    assert str(parse_filter(text)) == text


@settings(max_examples=300, deadline=None)
@given(plain_trees, st.sampled_from([" ", "  ", "\t"]))
def test_extra_whitespace_does_not_change_the_tree(expr, ws):
    spaced = str(expr).replace(" && ", f"{ws}&&{ws}").replace(" || ", f"{ws}||{ws}")
    assert parse_filter(spaced) == expr
