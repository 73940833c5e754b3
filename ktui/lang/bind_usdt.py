"""A USDT probe's arguments bound to where its note places them.

`PATH:PROVIDER:NAME:usdt:a1,a2:string` parses without the file: `a1` is a
`UsdtArg(1)`, the probe point's first argument, wherever that is. Its
note says (`ktui.kernel.symbols.usdt_args`): `-4@%edi` is a signed int in
edi, `8@-24(%rbp)` a u64 on the stack, `4@$5` the constant 5. Binding
puts that on the node (`UsdtArg.binding`, ignored by equality, as BTF's
on a `Named`): the expression that reads it, its type (`s32` for `-4`,
unless the fetch says its own) and `usdt -4@%edi` as its C type. So the
probe still prints, saves and compares as written, and `positional()`
gives the generic program what it reads. A filter's `a2` is bound the
same way into `Probe.bindings`.

What the note says, and is refused in one line with the column of the
argument in `probe.spec_text`: an argument past the probe's count, one
whose place ktui does not read (an indexed place...), one at different
places at the probe's sites, a narrow value or a constant read as an
address (`+8(a1)`, `a1:string`).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol, Sequence

from ktui.lang import filters, names
from ktui.lang.grammar import FetchSpan, parse_raw
from ktui.lang.model import (
    STRING_TYPES,
    Binding,
    Deref,
    Fetch,
    FetchExpr,
    Field,
    Probe,
    SpecError,
    UsdtArg,
)


class ArgSource(Protocol):
    """One argument as the note places it (`usdt_args.ArgSpec`)."""

    text: str
    size: int
    expr: FetchExpr | None
    problem: str

    @property
    def type(self) -> str: ...

    @property
    def ctype(self) -> str: ...

    @property
    def is_constant(self) -> bool: ...


def bind_usdt_args(probe: Probe, sites: Sequence[Sequence[ArgSource]]) -> Probe:
    """`probe` with every a1..a6 bound; `sites`: each site's arguments
    (one site for most probe points). Raises SpecError (one line)."""
    binder = _Binder(probe, sites)
    spans = _spans(probe)
    fetches = tuple(binder.fetch(f, spans[i] if i < len(spans) else FetchSpan(start=None))  # type: ignore[arg-type]
                    for i, f in enumerate(probe.fetches))
    agg = probe.agg
    if agg is not None:
        def bound(fetch: Fetch | None) -> Fetch | None:
            return None if fetch is None else binder.fetch(fetch, FetchSpan(start=None))  # type: ignore[arg-type]

        agg = dataclasses.replace(agg, hist=bound(agg.hist), sum=bound(agg.sum),
                                  keys=tuple(bound(k) for k in agg.keys),
                                  hist_keys=tuple(bound(k) for k in agg.hist_keys))  # type: ignore[misc]
    bindings: dict = {}
    for name in _filter_arguments(probe):
        arg = binder.argument(int(name[1:]), None)
        bindings[name] = UsdtArg(int(name[1:]), Binding(arg.expr, arg.type, arg.ctype))
    bound_probe = dataclasses.replace(probe, fetches=fetches, agg=agg, bindings=bindings)
    if bound_probe.filter is not None:
        from ktui.lang.checks import check_filter  # the kinds again, with the arguments' types

        check_filter(bound_probe, None)
    if agg is not None:
        from ktui.lang.aggregate import check_aggregate

        check_aggregate(agg, probe.kind)
    return bound_probe


class _Binder:
    def __init__(self, probe: Probe, sites: Sequence[Sequence[ArgSource]]) -> None:
        self.probe, self.sites = probe, sites
        self.where = probe.target.usdt or ""

    def argument(self, index: int, col: int | None) -> ArgSource:
        """Argument `index` (1-based), the same at every site, readable."""
        args = self.sites[0] if self.sites else ()
        if index > len(args):
            have = f"{len(args)} argument{'s' if len(args) != 1 else ''}"
            listed = f" ({' '.join(a.text for a in args)})" if args else ""
            raise SpecError(f"a{index}: {self.where} has {have}{listed}", col=col)
        arg = args[index - 1]
        places = list(dict.fromkeys(site[index - 1].text for site in self.sites if len(site) >= index))
        if len(places) > 1 or any(len(site) < index for site in self.sites):
            raise SpecError(f"a{index} of {self.where} is in different places at its {len(self.sites)} "
                            f"sites ({', '.join(places)}): ktui reads one place for all", col=col)
        if arg.expr is None:
            raise SpecError(f"a{index} of {self.where} ({arg.text}) cannot be read: {arg.problem}", col=col)
        return arg

    def fetch(self, fetch: Fetch, span: FetchSpan) -> Fetch:
        outer: list[int] = []
        expr = fetch.expr
        while isinstance(expr, Deref):
            outer.append(expr.offset)
            expr = expr.inner
        if not isinstance(expr, UsdtArg):
            return fetch
        col = span.exprs[len(outer)] if len(outer) < len(span.exprs) else span.start
        type_col = span.type if span.type is not None else col
        arg = self.argument(expr.index, col)
        what = f"{expr} ({arg.text})"
        if outer or fetch.type in STRING_TYPES:
            reading = f"+OFFSET({expr}) reads memory at {expr}" if outer else f":{fetch.type} reads text at {expr}"
            if arg.is_constant:
                raise SpecError(f"{reading}, but {what} is a constant, not an address", col=col)
            if arg.size != 8:
                raise SpecError(f"{reading}, but {what} is a {arg.size}-byte value, not an address",
                                col=col if outer else type_col)
        if outer:
            binding = Binding(arg.expr, "x64", arg.ctype)  # an address: the fetch keeps its own type
        elif fetch.type in STRING_TYPES and isinstance(arg.expr, Deref):
            # the pointer is in memory: the text is where it points (a string
            # reads at its last dereference's address)
            binding = Binding(Deref(0, arg.expr), fetch.type, arg.ctype)
        else:
            binding = Binding(arg.expr, fetch.type or arg.type, arg.ctype)
        bound: FetchExpr = dataclasses.replace(expr, binding=binding)
        for offset in reversed(outer):
            bound = Deref(offset, bound)
        return dataclasses.replace(fetch, expr=bound)


def _spans(probe: Probe) -> list[FetchSpan]:
    try:
        parsed, span = parse_raw(probe.spec_text)
    except SpecError:
        return []
    return span.fetches if parsed.fetches == probe.fetches else []


def _filter_arguments(probe: Probe) -> list[str]:
    """The a1..a6 the filter reads that are no fetch's name."""
    if probe.filter is None:
        return []
    fetched = {f.name for f in probe.fetches}
    out: list[str] = []
    for compare in filters.comparisons(probe.filter):
        for side in (compare.left, compare.right):
            if isinstance(side, Field) and side.name in names.ARG_NAMES and side.name not in fetched \
                    and side.name not in out:
                out.append(side.name)
    return out
