"""A wildcard's names, bound in every tracepoint it matches (`lang.bind`
for a pattern).

One program reads every event of a pattern by one plan, so each field it
names must be read alike in all of them: the same place in the record and
the same type (`syscalls/sys_exit_*:t:ret` is; `syscalls/sys_enter_*read*:t:fd`
is not: sys_enter_readlink has no fd). Each match is bound as a probe of
its own, and the first that reads differently from the first match is
named in the refusal. A kernel-function pattern binds nothing: its
functions' parameters differ, so it fetches by position only (the grammar
refuses names there), and its return values are of different types, so no
errno is read from them.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from typing import Callable

from ktui.lang.model import Fetch, Kind, Probe, SpecError, Target, positional

# the return class a kernel-function pattern's return probe reports (lang.errnos: "off: ...")
MIXED_RETURNS = "mixed (a wildcard)"


def bind_wildcard(probe: Probe, kernel: object, bind_one: Callable[[Probe], Probe]) -> Probe:
    """`probe` (a pattern) with its matches (`Probe.members`, tracepoints)
    and its names bound, by `bind_one` on each match. A kernel that
    lists no tracepoints (none, or BTF alone) leaves a tracepoint pattern
    unbound: it is bound where it runs."""
    if probe.kind is not Kind.TRACEPOINT:
        return dataclasses.replace(probe, errno_width=0, return_class=MIXED_RETURNS)
    matches = getattr(kernel, "tracepoint_matches", None)
    if matches is None:
        return probe
    pattern = probe.target.tracepoint or ""
    members = matches(pattern)
    bound, first = None, ""
    for member in members:
        try:
            one = bind_one(dataclasses.replace(probe, target=Target(tracepoint=member)))
        except SpecError as err:
            raise SpecError(f"{pattern} matches {member}, and there: {err.message}", col=err.col) from None
        if bound is None:
            bound, first = one, member
        elif _reads(one) != _reads(bound):
            raise SpecError(f"{pattern}: {member} does not lay out its fields as {first} does: a pattern's "
                            "fields must read alike in every event it matches (narrow the pattern)", col=1)
    assert bound is not None  # matches() refuses a pattern that matches nothing
    return dataclasses.replace(bound, target=probe.target, members=members)


def expand_events(pattern: str, categories: list[str], events_of: Callable[[str], list[str]]) -> tuple[str, ...]:
    """`CATEGORY/NAME` of every event `pattern` matches (a glob in either part), sorted."""
    category_glob, _, event_glob = pattern.partition("/")
    return tuple(sorted(f"{c}/{e}" for c in categories if fnmatch.fnmatchcase(c, category_glob)
                        for e in events_of(c) if fnmatch.fnmatchcase(e, event_glob)))


def _reads(probe: Probe) -> tuple:
    """What the program reads for `probe`'s names: each fetch's positional
    expression and type, and each filter name's."""
    fetches = probe.fetches + (probe.agg.fetches() if probe.agg is not None else ())
    bindings = probe.bindings or {}
    return (tuple(_fetch_reads(f) for f in fetches),
            tuple(sorted((name, str(positional(v)), v.binding.type) for name, v in bindings.items()
                         if v.binding is not None)))


def _fetch_reads(fetch: Fetch) -> tuple:
    return (str(positional(fetch.expr)), fetch.effective_type)
