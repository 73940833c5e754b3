"""In-kernel aggregations of a probe's fetched values: `hist`, `count`, `sum`.

The short form follows the spec, each clause a word and a parenthesised
list, separated by spaces (and before ` if FILTER` on the command line):

    vfs_read:c hist(a3)                         a log2 histogram of the size argument
    vfs_read:c hist(a3, comm)                   ... one per process (keys as count's)
    vfs_read:r count(comm) sum(retval)          bytes read per process
    vfs_read:c count(a3) max_keys(64)           the read sizes seen, at most 64 of them
    vfs_read:c stack(kernel)                    who calls it: each kernel stack counted
    vfs_read:c stack(user)                      which code in which process: user stacks
    vfs_read:c stack(both)                      kernel and user frames as one stack

In a probe set the same are keys: `hist: a3` (keyed: `hist: [a3, comm]`
or `hist: a3, comm`), `count: [comm, a3]` (or one
string), `sum: retval`, `max_keys: 64`. A clause's argument is a fetch of
the spec language (`a3`, `retval`, `+8(a1):u32`, `pid`...); `count` keys
may also be `comm`. Names (`count`, `file->f_pos`) are taken as in a
spec's fetches, bound to the kernel's BTF with the probe (`lang.bind`),
which checks their types again once it knows them.

The text becomes `model.Aggregate`; `str()` prints the canonical form,
which parses back equal."""

from __future__ import annotations

import dataclasses
import re

from ktui.lang.checks import tracepoint_value_problem
from ktui.lang.latency import NOT_HIST, NOT_KEY, NOT_TIMED, is_latency
from ktui.lang.model import (
    AGG_KEYS_MAX,
    INT_TYPES,
    Aggregate,
    Builtin,
    Fetch,
    Kind,
    SpecError,
    StartValue,
)

AGG_MAX_KEYS_MIN, AGG_MAX_KEYS_MAX = 1, 1 << 20


CLAUSES = ("hist", "count", "sum", "max_keys", "stack")
STACK_KINDS = ("kernel", "user", "both")
# A clause starts after whitespace: `hist(` never occurs inside a spec,
# whose fetches have no spaces before a name followed by `(`.
_CLAUSE_START = re.compile(r"[ \t]+(?=(?:hist|count|sum|max_keys|stack)\()")


def split_clauses(text: str) -> tuple[str, str, int]:
    """`SPEC CLAUSES` -> (spec, clauses, where the clauses start in text)."""
    m = _CLAUSE_START.search(text)
    if m is None:
        return text, "", len(text)
    return text[:m.start()], text[m.end():], m.end()


def parse_clauses(text: str, kind: Kind | None = None, timed: bool | None = None) -> Aggregate:
    """`hist(a3) count(comm,a3) sum(retval) max_keys(64)` -> Aggregate.
    A SpecError's column counts in `text`. `timed`: check_aggregate's."""
    from ktui.lang.numbers import parse_int  # numbers imports limits, limits model

    found: dict[str, object] = {}
    at: dict[str, int] = {}
    pos = 0
    while True:
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos >= len(text):
            break
        m = re.compile(r"([a-z_]+)\(").match(text, pos)
        if m is None or m.group(1) not in CLAUSES:
            raise SpecError("expected hist(FETCH[,KEY...]), count(FETCH,...), sum(FETCH) or max_keys(N)",
                            col=pos + 1)
        word = m.group(1)
        if word in found:
            raise SpecError(f"{word}(...) given twice", col=pos + 1)
        close = closing(text, m.end())
        if close is None:
            raise SpecError(f"{word}( is not closed with )", col=pos + 1)
        inner, inner_at = text[m.end():close], m.end()
        if word == "stack":
            found[word] = inner.strip()
        elif word == "max_keys":
            number = parse_int(inner.strip())
            if number is None:
                raise SpecError(f"max_keys: expected a whole number, got {inner.strip()!r}", col=inner_at + 1)
            found[word] = number
        else:
            fetches = tuple(_fetch(word, piece, inner_at + start, kind) for piece, start in split_fetches(inner))
            if word == "sum" and len(fetches) != 1:
                raise SpecError(f"{word}(...) takes one fetch", col=inner_at + 1)
            found[word] = fetches if word == "count" else fetches[0]
            if word == "hist":
                found["hist_keys"] = fetches[1:]
                at[word] = m.start() + 1
        pos = close + 1
    agg = Aggregate(hist=found.get("hist"), keys=found.get("count", ()), sum=found.get("sum"),  # type: ignore[arg-type]
                    stack=found.get("stack"), hist_keys=found.get("hist_keys", ()))  # type: ignore[arg-type]
    if "max_keys" in found:
        agg = dataclasses.replace(agg, max_keys=found["max_keys"])
    try:
        check_aggregate(agg, kind, timed)
    except SpecError as err:
        # a keyed histogram's own errors point at its clause (the others
        # have no column here: the caller's, as before)
        if err.col is None and err.message.startswith("hist") and "hist" in at:
            raise SpecError(err.message, col=at["hist"]) from None
        raise
    return agg


def closing(text: str, start: int) -> int | None:
    """Where the parenthesis opened just before `start` closes (None: it
    does not): the clauses' own, and since(...) (lang.spans)."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


def split_fetches(text: str) -> list[tuple[str, int]]:
    """Split `a1, +0(a2):string` at top-level commas: (piece, offset in text).
    The one splitter of fetch lists: the short form's clauses here and the
    YAML `fetch:`/`count:` strings (probeset.py)."""
    pieces, depth, start = [], 0, 0
    for index, char in enumerate(text + ","):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth <= 0:
            piece = text[start:index]
            stripped = piece.lstrip()
            pieces.append((stripped.rstrip(), start + len(piece) - len(stripped)))
            start = index + 1
    if start < len(text):  # an unclosed ( ran to the end: its piece is still parsed, to be refused
        piece = text[start:]
        stripped = piece.lstrip()
        pieces.append((stripped.rstrip(), start + len(piece) - len(stripped)))
    return pieces


def _fetch(clause: str, text: str, at: int, kind: Kind | None) -> Fetch:
    from ktui.lang.spec import parse_fetch  # spec imports this module

    if not text:
        raise SpecError("expected a fetch (a1, retval, comm, ...)", col=at + 1)
    try:
        fetch = parse_fetch(text, kind)
    except SpecError as err:
        raise SpecError(err.message, col=None if err.col is None else err.col + at) from None
    return fetch


def check_aggregate(agg: Aggregate, kind: Kind | None, timed: bool | None = None) -> None:
    """What the grammar does not say: integers where a number is needed,
    retval only in return probes, bounded keys, latency (lang.latency)
    summed only, and only where the hits have one (`timed`: Probe.timed;
    None: not known yet, a span's end before its since(...) is read). No
    column: the caller knows where the clause or key is."""
    for what, fetch in (("hist", agg.hist), ("sum", agg.sum)):
        if fetch is not None:
            _check_one(what, fetch, kind, text_ok=False)
    if agg.hist is not None and is_latency(agg.hist.expr):
        if not agg.hist_keys:
            raise SpecError(NOT_HIST)
        if timed is False:
            raise SpecError(f"hist: {NOT_TIMED}")
    if agg.sum is not None and is_latency(agg.sum.expr) and timed is False:
        raise SpecError(f"sum: {NOT_TIMED}")
    for what, keys in (("count", agg.keys), ("hist", agg.hist_keys)):
        _check_keys(what, keys, kind)
    if agg.keys and agg.hist_keys and [str(k) for k in agg.keys] != [str(k) for k in agg.hist_keys]:
        raise SpecError(f"hist: keyed by {', '.join(str(k) for k in agg.hist_keys)} but count by "
                        f"{', '.join(str(k) for k in agg.keys)}: a probe has one key; give hist(...) "
                        "count's keys, or leave count out")
    if agg.stack is not None and agg.stack not in STACK_KINDS:
        raise SpecError(f"stack: unknown stack {agg.stack!r}; use kernel, user or both")
    if not AGG_MAX_KEYS_MIN <= agg.max_keys <= AGG_MAX_KEYS_MAX:
        raise SpecError(f"max_keys: must be {AGG_MAX_KEYS_MIN}..{AGG_MAX_KEYS_MAX}, got {agg.max_keys}")


def _check_keys(what: str, keys: tuple[Fetch, ...], kind: Kind | None) -> None:
    """count's keys, or a histogram's: bounded, integers or comm/cgroup/func, each once."""
    if len(keys) > AGG_KEYS_MAX:
        raise SpecError(f"{what}: at most {AGG_KEYS_MAX} keys, got {len(keys)}")
    names = [str(k) for k in keys]
    for key in keys:
        if is_latency(key.expr):
            raise SpecError(NOT_KEY if what == "count" else NOT_KEY.replace("count:", f"{what}:", 1))
        _check_one(what, key, kind, text_ok=True)
        if names.count(str(key)) > 1:
            raise SpecError(f"{what}: {key} is given twice")


def _check_one(what: str, fetch: Fetch, kind: Kind | None, *, text_ok: bool) -> None:
    if fetch.label is not None:
        raise SpecError(f"{what}: {fetch}: an aggregated value takes no label")
    if kind is Kind.CALL and "retval" in str(fetch) and not isinstance(fetch.expr, StartValue):
        raise SpecError(f"{what}: retval exists only in return probes (kind r)")
    if kind is Kind.TRACEPOINT:
        problem = tracepoint_value_problem(fetch.expr)
        if problem:
            raise SpecError(f"{what}: {problem}")
    is_comm = isinstance(fetch.expr, Builtin) and fetch.expr.name in ("comm", "func", "cgroup")
    if is_comm and text_ok:
        return  # comm; a wildcard's function (its place) or a cgroup (its id): counted as an integer
    if is_comm or fetch.effective_type not in INT_TYPES:
        allowed = "an integer, comm, func or cgroup" if text_ok else "an integer"
        text = " (it is text: text keys other than comm, func and cgroup are not counted yet)" if (
            text_ok and not is_comm and fetch.effective_type not in INT_TYPES) else ""
        raise SpecError(f"{what}: {fetch} is not {allowed}{text}")


def is_comm(fetch: Fetch) -> bool:
    return isinstance(fetch.expr, Builtin) and fetch.expr.name == "comm"


def is_signed(fetch: Fetch) -> bool:
    return fetch.effective_type.startswith("s")
