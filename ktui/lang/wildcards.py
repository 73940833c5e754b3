"""Wildcard probes: `tcp_*:c`, `syscalls/sys_enter_*:t` make one probe on
every kernel function (tracepoint) the pattern matches, counted by member.

The pattern is fnmatch's (`*`, `?`, `[...]`, case-sensitive as the
kernel's names are). What it is matched against is the caller's: the
session hands `expand` available_filter_functions (every name there can
take a kprobe, so no match fails to attach for being notrace) or the
tracefs event list (`CATEGORY/NAME`). This module is pure: the matches
and the one-line refusals for too many and for none.

The fetches of a function pattern are positional (a1..a6, registers,
retval, builtins): the matched functions' parameters differ, so a name by
BTF would mean a different thing, or nothing, in each. A tracepoint
pattern reads its fields by name where every event it matches lays them
out alike (`syscalls/sys_exit_*:t:ret`): that is checked when it is bound
against the kernel's formats (lang.bind_wildcard).
"""

from __future__ import annotations

import difflib
import fnmatch
import string
from typing import Iterable

from ktui.lang.limits import WILDCARD_MAX_MULTI
from ktui.lang.model import WILDCARD_CHARS, Aggregate, Builtin, Probe, SpecError, has_names

FUNCTIONS = "kernel functions"
TRACEPOINTS = "tracepoints"

# The refusals the grammar and the checks share (one line each).
NO_NAMES = ("a wildcard's functions have different parameters: fetch by position "
            "(a1..a6, registers, retval) or a builtin (comm, pid, tid, cpu)")
NO_FENTRY = ("a wildcard attaches by kprobe (one kprobe_multi link, or a kprobe per function): "
             "not fentry")

_EXAMPLES_SHOWN = 3  # narrower patterns suggested in `too_many`
_BRACKET_CHARS = frozenset(string.ascii_letters + string.digits + "_-")


def names_problem(probe: Probe) -> str:
    """Why a name (a parameter by BTF) cannot be read in a function
    pattern: its functions' parameters differ ("" for any other probe; a
    tracepoint pattern's fields are bound, alike in each event, by
    lang.bind_wildcard)."""
    if not probe.target.is_wildcard or probe.target.tracepoint is not None:
        return ""
    return NO_NAMES


def check_aggregate(probe: Probe, agg: Aggregate | None) -> None:
    """A wildcard's hist/count/sum read no names, and only a wildcard counts
    by `func` (no column: the caller's)."""
    if agg is None:
        return
    if not probe.target.is_wildcard and any(isinstance(k.expr, Builtin) and k.expr.name == "func"
                                            for k in agg.key_fetches):
        from ktui.lang.names import FUNC_NOT_WILDCARD  # names imports this module

        raise SpecError(f"count: {FUNC_NOT_WILDCARD}")
    why = names_problem(probe)
    if not why:
        return
    for what, fetches in (("hist", (agg.hist,)), ("sum", (agg.sum,)), ("count", agg.keys), ("hist", agg.hist_keys)):
        for fetch in fetches:
            if fetch is not None and has_names(fetch.expr):
                raise SpecError(f"{what}: {fetch}: {why}")


def only_kernel(path: str, glob: str, usdt: bool = False) -> str:
    """Why a pattern in a user file is refused, with the listing to use."""
    listing = f"ktui list --usdt {path}" if usdt else f"ktui list {path}:'{glob}'"
    return (f"wildcards are for kernel functions and tracepoints, not a file's "
            f"{'USDT probes' if usdt else 'functions'}: `{listing}` lists them, to probe each by name")


def glob_problem(text: str, at: int) -> tuple[str, int]:
    """The `[...]` of a pattern at `text[at]`: ("", the index past its `]`),
    or (why it is refused, the index to point at). A kernel name holds
    letters, digits and `_`, so a bracket holds those and `-` ranges,
    after an optional `!` or `^` (fnmatch's negation)."""
    pos = at + 1
    if text[pos : pos + 1] in ("!", "^"):
        pos += 1
    first = pos
    while pos < len(text) and text[pos] in _BRACKET_CHARS:
        pos += 1
    if pos < len(text) and text[pos] == "]" and pos > first:
        return "", pos + 1
    if pos < len(text) and text[pos] not in "]:, \t":
        return "a [...] in a pattern holds letters, digits, _ and ranges (tcp_v[46]_*, [a-f]*)", pos
    return "unclosed or empty [ in a pattern: close it on the name, e.g. tcp_v[46]_*", at


def expand(pattern: str, names: Iterable[str]) -> tuple[str, ...]:
    """The names `pattern` matches, sorted, each once."""
    return tuple(sorted({name for name in names if fnmatch.fnmatchcase(name, pattern)}))


def too_many(pattern: str, count: int, cap: int, what: str, matches: Iterable[str] = ()) -> str:
    """One line: `pattern` matches `count` names, past `cap`; with its
    `matches`, suggests the commonest narrower patterns (`tcp_v4_*`)."""
    how = "attaches in one kprobe_multi link" if cap == WILDCARD_MAX_MULTI else "attaches one by one on this kernel"
    narrower = _narrower(pattern, matches)
    hint = f" ({', '.join(narrower)}, ...)" if narrower else ""
    return f"{pattern} matches {count:,} {what}, more than the {cap:,} ktui {how}: narrow the pattern{hint}"


def matches_nothing(pattern: str, what: str, close: list[str]) -> str:
    """One line: `pattern` matches no name; `close` are names near it
    (a did-you-mean, as for one unknown function)."""
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"{pattern} matches no {what} on this kernel{hint}"


def close_patterns(pattern: str, names: Iterable[str], limit: int = 3) -> list[str]:
    """Patterns near one that matched nothing, for its did-you-mean: its
    literal prefix swapped for the closest prefixes the names have
    (`tpc_*` -> `tcp_*`), each of which matches something."""
    literal = _literal_prefix(pattern)
    if not literal:
        return []
    names = list(names)
    prefixes = sorted({name[: len(literal)] for name in names if len(name) >= len(literal)})
    rest = pattern[len(literal):]
    out = []
    for prefix in difflib.get_close_matches(literal, prefixes, n=limit * 3, cutoff=0.6):
        candidate = prefix + rest
        if prefix != literal and any(fnmatch.fnmatchcase(name, candidate) for name in names):
            out.append(candidate)
    return out[:limit]


def _narrower(pattern: str, matches: Iterable[str]) -> list[str]:
    """For `PREFIX*`, the commonest longer prefixes of its matches up to
    their next `_`, each with `*`: `tcp_*` -> `tcp_v4_*`, `tcp_v6_*`. Other
    shapes of pattern get none (a narrower one is not so easy to guess)."""
    literal = _literal_prefix(pattern)
    if pattern != literal + "*":
        return []
    counts: dict[str, int] = {}
    for name in matches:
        cut = name.find("_", len(literal) + 1)
        if name.startswith(literal) and cut > 0:
            stem = name[: cut + 1] + "*"
            counts[stem] = counts.get(stem, 0) + 1
    return sorted(counts, key=lambda s: (-counts[s], s))[:_EXAMPLES_SHOWN]


def _literal_prefix(pattern: str) -> str:
    """The pattern up to its first glob character."""
    for index, char in enumerate(pattern):
        if char in WILDCARD_CHARS:
            return pattern[:index]
    return pattern
