"""Reading a whole number a user wrote: one parser for specs, filters,
probe set files and the command line.

There were three (the spec scanner, the filter tokenizer, the YAML reader),
and they did not agree: the YAML one took `!!int "+-7"` as 7 and a
full-width `１` as 1, because Python's int() reads any Unicode digit and
the sign was stripped rather than read. Here only ASCII digits count, the
sign is read once, and the length is capped before int() sees the text.

The language's form is decimal or 0x hex (`4096`, `0x1c`). A file written
by hand in YAML may also use YAML 1.1's integer forms (`1_000`, `0o17`,
`017`, `0b101`, a `+` sign), so `yaml=True` accepts those too. Base 60
(`1:30:00`) is not supported anywhere.
"""

from __future__ import annotations

DIGITS = frozenset("0123456789")
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_BASES = {"0x": (16, HEX_DIGITS), "0b": (2, frozenset("01")), "0o": (8, frozenset("01234567"))}
_OCTAL = frozenset("01234567")

MAX_CHARS = 4096  # below Python's 4300-digit int() limit; no spec or filter is longer
MAX_YAML_CHARS = 40  # enough for any 64-bit number written with underscores


def parse_int(text: str, *, signed: bool = False, yaml: bool = False) -> int | None:
    """The integer `text` spells, or None if it spells none.

    Decimal or 0x hex, ASCII only. `signed` allows a leading `-`; `yaml`
    allows a `-` or `+` sign, `_` between digits, 0b, 0o and 0-prefixed
    octal (YAML 1.1), and caps the text at MAX_YAML_CHARS."""
    if not isinstance(text, str) or len(text) > (MAX_YAML_CHARS if yaml else MAX_CHARS):
        return None
    sign = 1
    if text[:1] == "-" and (signed or yaml):
        sign, text = -1, text[1:]
    elif text[:1] == "+" and yaml:
        text = text[1:]
    if yaml:
        text = text.replace("_", "")
    prefix = text[:2].lower()
    if prefix == "0x" or (yaml and prefix in _BASES):
        base, allowed = _BASES[prefix]
        body = text[2:]
    elif yaml and len(text) > 1 and text[0] == "0":
        base, allowed, body = 8, _OCTAL, text[1:]
    else:
        base, allowed, body = 10, DIGITS, text
    if not body or not all(c in allowed for c in body):
        return None
    return sign * int(body, base)
