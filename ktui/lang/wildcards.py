"""(lead's minimal stand-in until helper's lang/wildcards.py lands)"""
from __future__ import annotations

import fnmatch
from typing import Iterable


def expand(pattern: str, names: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({n for n in names if fnmatch.fnmatchcase(n, pattern)}))


def too_many(pattern: str, count: int, cap: int, what: str) -> str:
    return f"{pattern} matches {count:,} {what}, more than the {cap:,} ktui attaches at once on this kernel: narrow the pattern"


def matches_nothing(pattern: str, what: str, close: list[str]) -> str:
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"{pattern} matches no {what}{hint}"
