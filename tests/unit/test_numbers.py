"""One integer parser (ktui.lang.numbers) for specs, filters, files and
the command line: ASCII digits only, the sign read once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktui.lang.filters import parse_filter
from ktui.lang.model import ProbeSetError, SpecError
from ktui.lang.numbers import MAX_YAML_CHARS, parse_int
from ktui.lang.probeset import loads_probeset
from ktui.lang.spec import parse_spec


@pytest.mark.parametrize("text, value", [
    ("0", 0), ("4096", 4096), ("007", 7), ("0x1c", 28), ("0X1C", 28), ("0xffffffffffffffff", 2**64 - 1),
])
def test_the_language_form(text, value):
    assert parse_int(text) == value
    assert parse_int(text, yaml=True) == (value if not text.startswith("00") else 7)


@pytest.mark.parametrize("text", [
    "", "-", "0x", "1a", "0x1g", " 1", "1 ", "+1", "1_000", "0b1", "0o7", "1.0", "\uff11", "\u0663", "1:30",
])
def test_what_the_language_form_refuses(text):
    assert parse_int(text) is None


@pytest.mark.parametrize("text, value", [
    ("-5", -5), ("-0x10", -16), ("5", 5),
])
def test_signed(text, value):
    assert parse_int(text, signed=True) == value
    assert parse_int(text) == (None if text.startswith("-") else value)


@pytest.mark.parametrize("text, value", [
    ("1_000", 1000), ("+7", 7), ("-7", -7), ("0o17", 15), ("017", 15), ("0b101", 5), ("0x_ff", 255), ("0", 0),
])
def test_yaml_extras(text, value):
    assert parse_int(text, yaml=True) == value


@pytest.mark.parametrize("text", ["+-7", "-+7", "--7", "\uff11", "\u0663", "1:30:00", "08", "0b2", "0x", "_", "9" * 41])
def test_yaml_refuses(text):
    assert parse_int(text, yaml=True) is None


@pytest.mark.parametrize("value", ['!!int "+-7"', '!!int "\uff11"', '!!int " 7"'])
def test_a_file_refuses_what_is_not_a_number(value):
    """Before one parser, `+-7` loaded as 7 and a full-width 1 as 1."""
    with pytest.raises(ProbeSetError, match="cannot read .* as an integer"):
        loads_probeset(f"name: x\nprobes:\n  - spec: vfs_read:c\n    sample: {value}\n")


def test_spec_filter_and_file_read_a_number_alike():
    assert parse_spec("f+0x1c:c").target.offset == parse_spec("f+28:c").target.offset == 28
    assert str(parse_filter("a1 == 0x1c")) == "a1 == 28"
    assert str(parse_filter("a1 == -0x1c")) == "a1 == -28"
    text = "name: x\nfilter: {pid: 0x1c}\nprobes: [vfs_read:c]\n"
    assert loads_probeset(text).pid == 28


@pytest.mark.parametrize("parse, text", [
    (parse_spec, "f+\uff11:c"), (parse_filter, "a1 == \u0663"), (parse_spec, "f:c:+1_0(a1)"),
])
def test_spec_and_filter_refuse_non_ascii_and_yaml_digits(parse, text):
    with pytest.raises(SpecError):
        parse(text)


@given(st.integers(-(2**70), 2**70))
def test_every_integer_reads_back(n):
    assert parse_int(str(n), signed=True) == n
    assert parse_int(hex(n) if n >= 0 else "-" + hex(-n), signed=True) == n
    if len(str(n)) <= MAX_YAML_CHARS:
        assert parse_int(str(n), yaml=True) == n
