"""Characters ktui refuses in text a user writes, and how to name one.

Bidi controls (U+202E RIGHT-TO-LEFT OVERRIDE, U+2066..U+2069 isolates...)
and zero-width characters (U+200B, U+2060, U+FEFF...) make text show as
something other than what it is: a label that reads "vfs_read" may not be
it, or the rest of a table row may come out reversed. Labels, names and
specs are shown on the dashboard and in error messages, so wherever a user
names something ktui refuses every character of these Unicode categories:

    Cc control, Cf format (bidi and zero-width characters are all Cf),
    Co private use, Cs surrogate, Zl line separator, Zp paragraph separator.

Printable text in any script stays allowed (`größe`, `✓`). An error names
the refused character by code point and name and never prints it raw.
"""

from __future__ import annotations

import unicodedata

from ktui.lang.model import SpecError

REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Zl", "Zp"})

# unicodedata has no names for control characters; these are the ones a
# user is likely to meet (their Unicode name aliases).
_CONTROL_NAMES = {
    0x00: "NULL", 0x07: "BELL", 0x08: "BACKSPACE", 0x09: "CHARACTER TABULATION",
    0x0A: "LINE FEED", 0x0B: "LINE TABULATION", 0x0C: "FORM FEED",
    0x0D: "CARRIAGE RETURN", 0x1B: "ESCAPE", 0x7F: "DELETE", 0x85: "NEXT LINE",
}
_CATEGORY_WORDS = {
    "Cc": "a control character", "Cf": "a format character", "Co": "a private-use character",
    "Cs": "a surrogate", "Cn": "unassigned",
}
WHY = "no control, invisible or text-direction characters"


def char_name(c: str) -> str:
    """`U+202E RIGHT-TO-LEFT OVERRIDE`, `U+000A LINE FEED (a control character)`."""
    code = ord(c)
    text = f"U+{code:04X}"
    name = unicodedata.name(c, "") or _CONTROL_NAMES.get(code, "")
    category = unicodedata.category(c)
    if name and category != "Cc":
        return f"{text} {name}"
    what = _CATEGORY_WORDS.get(category, "no name")
    return f"{text} {name} ({what})" if name else f"{text} ({what})"


def show_char(c: str) -> str:
    """A character for a one-line message: `"x"`, or by code point and
    name (`U+00E9 LATIN SMALL LETTER E WITH ACUTE`), never raw."""
    return f'"{c}"' if " " <= c <= "~" else char_name(c)


def is_refused(c: str) -> bool:
    return unicodedata.category(c) in REFUSED_CATEGORIES


def first_refused(text: str, allowed: str = "") -> int | None:
    """Index of the first refused character in `text` (ignoring `allowed`), or None."""
    for index, c in enumerate(text):
        if c not in allowed and unicodedata.category(c) in REFUSED_CATEGORIES:
            return index
    return None


def refused_message(c: str, where: str = "") -> str:
    """`U+202E RIGHT-TO-LEFT OVERRIDE is not allowed in a spec (no control, ...)`;
    `where` is e.g. "in a spec", or empty."""
    place = f" {where}" if where else ""
    return f"{char_name(c)} is not allowed{place} ({WHY})"


def refuse(text: str, where: str = "", allowed: str = "") -> None:
    """Raise SpecError at the first refused character of `text` (ignoring
    `allowed`), with its 1-based column; `where` as in refused_message."""
    odd = first_refused(text, allowed)
    if odd is not None:
        raise SpecError(refused_message(text[odd], where), col=odd + 1)


def escape_refused(text: str) -> str:
    """`text` with every refused character escaped (`\\u202e`), so a message
    quoting user text stays one line and shows what is really there."""
    if first_refused(text) is None:
        return text
    return "".join(ascii(c)[1:-1] if is_refused(c) else c for c in text)
