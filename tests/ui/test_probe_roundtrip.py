"""What the add/edit dialog accepts, a saved file gives back.

The dialog once accepted an 80-character label; the set was saved, and the
saved file then failed to load ("label: too long"), so the user's work was
lost. Here every probe `build_probe` accepts from its three text fields
goes through `dumps_probeset` and `loads_probeset` and must come back equal.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ktui.lang import limits
from ktui.lang.model import (
    COMPARE_OPS,
    FETCH_TYPES,
    REGISTERS,
    And,
    Compare,
    Field,
    IntLit,
    Not,
    Or,
    ProbeSet,
    StrLit,
    reg_display,
)
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.screens.probe_dialog import FieldProblem, build_probe

_WORD = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
_LEAVES = ["a1", "a2", "a3", "a6", "retval", "comm", "pid", "tid", "cpu", "rdi", "r8", "rip"]


@st.composite
def fetch_texts(draw) -> str:
    expr = draw(st.sampled_from(_LEAVES))
    for offset in draw(st.lists(st.integers(-4096, 4096), max_size=2)):
        expr = f"{offset:+d}({expr})"
    text = expr
    if draw(st.booleans()):
        text = f"{draw(_WORD)}={text}"
    if draw(st.booleans()):
        text += ":" + draw(st.sampled_from(FETCH_TYPES))
    return text


@st.composite
def spec_texts(draw) -> str:
    """Specs as a user types them: mostly valid, some not (the dialog refuses those)."""
    target = draw(st.one_of(
        st.from_regex(r"[a-z_][a-z0-9_]{0,20}(\.isra\.0)?", fullmatch=True),
        st.integers(1, 2**64 - 1).map(hex),
        st.tuples(_WORD, st.integers(0, 255)).map(lambda t: f"{t[0]}+{t[1]:#x}"),
    ))
    text = f"{target}:{draw(st.sampled_from('cr'))}"
    fetches = draw(st.lists(fetch_texts(), max_size=4))
    if fetches:
        text += ":" + ",".join(fetches)
    if draw(st.booleans()):
        text = f"{draw(_WORD)}={text}"  # a label in the spec, as on the command line
    return text


_NAMES = st.sampled_from([*_LEAVES, "fname", "x", "size", *(reg_display(r) for r in REGISTERS[:4])])
_STRINGS = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=20)
_OPERANDS = st.one_of(st.builds(Field, _NAMES), st.builds(IntLit, st.integers(-(2**63), 2**64 - 1)),
                      st.builds(StrLit, _STRINGS))


@st.composite
def _compare(draw):
    op = draw(st.sampled_from(COMPARE_OPS))
    field, other = Field(draw(_NAMES)), draw(_OPERANDS)
    return Compare(op, field, other) if draw(st.booleans()) else Compare(op, other, field)


FILTER_TEXTS = st.one_of(
    st.just(""),
    st.recursive(_compare(), lambda sub: st.one_of(st.builds(And, sub, sub), st.builds(Or, sub, sub),
                                                   st.builds(Not, sub)), max_leaves=6).map(str),
)
# Anything a user can type in the label field, long ones included.
LABEL_TEXTS = st.one_of(
    st.just(""),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=limits.PROBE_LABEL_MAX + 20),
    st.integers(limits.PROBE_LABEL_MAX - 2, limits.PROBE_LABEL_MAX + 20).map(lambda n: "r" * n),
    st.sampled_from(["null", "true", "~", "- x", "#x", "a: b", "'q'", '"q"', " x ", "größe ✓", "读取"]),
)


def _round_trip(probe):
    ps = ProbeSet(name="saved from the dialog", probes=(probe,))
    return loads_probeset(dumps_probeset(ps)).probes[0]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec_texts(), FILTER_TEXTS, LABEL_TEXTS)
def test_every_probe_the_dialog_accepts_loads_back_equal(spec, filter_text, label):
    try:
        probe = build_probe(spec, filter_text, label)
    except FieldProblem:
        return
    assert _round_trip(probe) == probe


def test_the_strategies_reach_accepted_probes():
    """The property above is not all refusals: these inputs are accepted."""
    probe = build_probe("vfs_read:r:n=+8(a2):u32", "n > 3 && comm == \"dd\"", "reads")
    assert probe.label == "reads" and _round_trip(probe) == probe
    probe = build_probe("reads=vfs_read:c:a3", "", "")
    assert probe.label == "reads" and _round_trip(probe) == probe
    probe = build_probe("0x10:c:rdi", "", "r" * limits.PROBE_LABEL_MAX)
    assert _round_trip(probe) == probe


@pytest.mark.parametrize("size", [limits.PROBE_LABEL_MAX + 1, 80])
def test_the_dialog_refuses_a_label_too_long_to_load(size):
    with pytest.raises(FieldProblem) as info:
        build_probe("vfs_read:c", "", "x" * size)
    assert info.value.field == "label"
    assert f"at most {limits.PROBE_LABEL_MAX}" in info.value.error.message


def test_a_label_in_the_spec_and_in_the_label_field_is_refused():
    with pytest.raises(FieldProblem) as info:
        build_probe("reads=vfs_read:c", "", "other")
    assert info.value.field == "label" and "give the label once" in info.value.error.message
