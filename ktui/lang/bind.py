"""Names in a probe, given their meaning by the running kernel's BTF.

`vfs_read:c:count,file->f_pos` parses without knowing the kernel (the
parser cannot tell a parameter from a typo). `bind_probe` looks the
function's prototype up in BTF and turns every name into the positional
expression ktui already runs, with the width and signedness of its C type:

    count                    -> a3:u64        (size_t, the third register)
    file->f_pos              -> +64(a1):s64   (loff_t, one read)
    file->f_path.dentry->d_name.name:string
                             -> +0(+40(+152(a1))):string  (two pointers, then the text)

A tracepoint's names are its record's fields, bound the same way from
its tracefs format instead of BTF (`lang.bind_fields`):

    syscalls/sys_enter_openat:t:dfd,filename:ustring
                             -> +16(record):s32, +0(+24(record)):ustring

The binding rides on the `Named` node (ignored by equality), so the probe
still prints, saves and compares as the user wrote it, and codegen, the
generic program, the record layout and the event detail all read the same
answer. A filter name that is a parameter (`count > 4096`) is bound the
same way into `Probe.bindings`.

Every refusal is one line that names the column: an unknown parameter
gives the prototype and a did-you-mean, an unknown member the struct's
close members, and what cannot be read (a bitfield, an array, a struct
passed by value, a parameter on the stack, a compiler copy whose BTF
describes the original) says so.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import TYPE_CHECKING, Protocol

from ktui.btf.errors import AccessError, BtfError
from ktui.lang import errnos, filters, names
from ktui.lang.alternatives import choose_alternative
from ktui.lang.checks import check_filter
from ktui.lang.grammar import FetchSpan, Scanner, parse_raw, scan_fetch
from ktui.lang.limits import MAX_DEREF
from ktui.lang.model import (
    INT_TYPES,
    STRING_TYPES,
    Arg,
    Binding,
    Deref,
    Fetch,
    FetchExpr,
    Field,
    GateSpan,
    Kind,
    Named,
    Probe,
    SpecError,
    StartValue,
    has_names,
)

if TYPE_CHECKING:
    from ktui.btf.access import Access, Leaf
    from ktui.lang.tracepoints import TracepointFormat

COPY_MARKS = (".isra.", ".constprop.", ".part.", ".cold", ".llvm.", ".lto_priv.")


class Prototype(Protocol):
    """One function as BTF describes it: what `bind_probe` needs."""

    access: Access
    proto_id: int
    text: str  # `vfs_read(struct file *file, ...) -> ssize_t`, for messages


class Kernel(Protocol):
    """Where prototypes and tracepoint formats come from
    (`lang.kernel_names.KernelNames`, or a test's own BTF blob and formats).
    One without `tracepoint_format` (the guest's, for `ktui vm`) leaves
    tracepoint probes unbound."""

    def problem(self) -> str | None: ...

    def prototype(self, function: str) -> Prototype: ...

    def tracepoint_format(self, tracepoint: str) -> "TracepointFormat": ...


class NoPrototype(Exception):
    """The function has no usable prototype; str() says why, in one line.
    `unknown`: BTF does not describe the function at all."""

    def __init__(self, message: str, *, unknown: bool = False) -> None:
        super().__init__(message)
        self.unknown = unknown


def needs_binding(probe: Probe) -> bool:
    """Whether `probe` names parameters, in a fetch or in its filter."""
    if probe.uses_names:
        return True
    if probe.filter is None or not names.may_be_parameter(probe):
        return False
    return any(_deferred(probe, name) for name in _filter_names(probe))


def bind_probe(probe: Probe, kernel: Kernel | None, *, text: str | None = None,
               filter_text: str | None = None) -> Probe:
    """`probe` with every name bound (unchanged when it names none).

    Raises SpecError (one line). Its column counts in `text`, the probe as
    the user wrote it (`SPEC` or `SPEC if FILTER`, as `-e` takes it), else
    in `probe.spec_text`; a filter's (message `filter: ...`) in
    `filter_text` when given, else in `text`, else in `str(probe.filter)`.

    A probe with alternatives is first given the first of them this
    kernel has (`lang.alternatives`): its names are bound by that one's
    prototype. A return probe also gets what its function returns (`bind_returns`),
    names or not. A user function's probe is returned as it is: it has no
    BTF here, and its names were refused when it was parsed. A pattern's
    matches are each bound, and must read alike (`lang.bind_wildcard`).
    A span's start is bound as the probe it is (its errors say `since:`),
    as are a gate's two ends (`within:`)."""
    if isinstance(probe.within, GateSpan):  # a gate between two events: each end bound as the probe it is
        ends = []
        for end in (probe.within.start, probe.within.end):
            try:
                ends.append(bind_probe(end, kernel))
            except SpecError as err:
                raise SpecError(f"within: {err.message}") from None
        gated = bind_probe(dataclasses.replace(probe, within=None), kernel, text=text, filter_text=filter_text)
        return dataclasses.replace(gated, within=GateSpan(*ends))
    if probe.since is not None:
        try:
            start = bind_probe(probe.since, kernel)
        except SpecError as err:
            raise SpecError(f"since: {err.message}") from None
        # the end keeps its since(...) while it is bound: its filter's
        # `latency` is a span's (lang.latency), checked again here
        end = bind_alone(probe, kernel, text=text, filter_text=filter_text)
        return bind_start_values(dataclasses.replace(end, since=start),
                                 lambda carrier: bind_alone(carrier, kernel, text=None, filter_text=None))
    return bind_alone(probe, kernel, text=text, filter_text=filter_text)


def bind_start_values(end: Probe, bind) -> Probe:
    """A span's end with the values it reads of its start (`start.X`,
    lang.spans) bound as the start reads them: `bind` binds the start's
    probe that reads them (lang.spans.carrier). Errors say `since:`."""
    from ktui.lang import spans  # spans imports the grammar, as this module does

    carrier = spans.carrier(end)
    if carrier is None:
        return end
    try:
        return spans.with_bound_values(end, bind(carrier).fetches)
    except SpecError as err:
        raise SpecError(f"since: {err.message}") from None


def bind_alone(probe: Probe, kernel: Kernel | None, *, text: str | None, filter_text: str | None) -> Probe:
    """bind_probe of one probe: a span's end as itself, its since(...)
    kept and left as it is (its start is bound apart)."""
    if probe.target.is_user:
        return probe
    if probe.target.is_wildcard:  # each match bound, alike (lang.bind_wildcard)
        from ktui.lang.bind_wildcard import bind_wildcard

        text = text if text is not None else probe.spec_text  # a match's own spec is longer or shorter
        return bind_wildcard(probe, kernel, lambda one: bind_probe(one, kernel, text=text, filter_text=filter_text))
    has_function = _has_function(kernel) if probe.target.alternatives else None
    if has_function is not None:
        probe = choose_alternative(probe, has_function, getattr(kernel, "close_functions", None))
    if probe.kind is Kind.TRACEPOINT:
        from ktui.lang.bind_fields import EventFields  # it imports this module's Binder

        fields = EventFields.of(probe, kernel)
        if fields is None:
            return probe  # bound where its format can be read (the guest, for `ktui vm`)
        return _bind_all(probe, fields, text=text, filter_text=filter_text)
    probe = bind_returns(probe, kernel)
    if not needs_binding(probe):
        return probe
    spans = _spans(probe, _head(text, filter_text))
    return _bind_all(probe, _Parameters(_prototype(probe, kernel, spans), probe.target.symbol or ""),
                     text=text, filter_text=filter_text)


class Binder(Protocol):
    """What gives a name in a probe its meaning: a function's parameters
    (BTF) or a tracepoint's fields (its tracefs format)."""

    def bind(self, named: Named, want: str | None, col: int | None, type_col: int | None, *,
             as_address: bool = False, known: tuple[str, ...] = ()) -> Binding: ...

    def check_filter_binding(self, name: str, binding: Binding, probe: Probe) -> str | None:
        """Why a filter cannot use this bound name (None: it can)."""


class _Parameters:
    """A function's parameters, from its BTF prototype."""

    def __init__(self, proto: Prototype, function: str) -> None:
        self.proto, self.function = proto, function

    def bind(self, named: Named, want: str | None, col: int | None, type_col: int | None, *,
             as_address: bool = False, known: tuple[str, ...] = ()) -> Binding:
        return _bind_named(named, want, self.proto, self.function, col, type_col,
                           as_address=as_address, known=known)

    def check_filter_binding(self, name: str, binding: Binding, probe: Probe) -> str | None:
        if isinstance(binding.expr, Arg):
            return None
        return (f"{name} reads memory: fetch it too ({probe.target}:{probe.kind.value}:...,{name}) "
                "to filter on it")


def _head(text: str | None, filter_text: str | None) -> str | None:
    """The spec part of `SPEC if FILTER` (the whole text when no filter is in it)."""
    if text is not None and " if " in text and filter_text is None:
        return text.partition(" if ")[0]
    return text


def _bind_all(probe: Probe, binder: "Binder", *, text: str | None, filter_text: str | None) -> Probe:
    """Every name of `probe` (fetches, filter, aggregation) bound by `binder`."""
    shift = 0
    if text is not None and " if " in text and filter_text is None:
        head, sep, filter_text = text.partition(" if ")
        text, shift = head, len(head) + len(sep)
    spans = _spans(probe, text)
    fetches = []
    for index, fetch in enumerate(probe.fetches):
        span = spans[index] if index < len(spans) else FetchSpan(start=1)
        fetches.append(_bind_fetch(fetch, span, binder))
    bindings: dict[str, Named] = {}
    try:
        for name in _filter_names(probe):
            if _deferred(probe, name):
                bindings[name] = _bind_filter_name(name, probe, binder, filter_text)
        bound = dataclasses.replace(probe, fetches=tuple(fetches), bindings=bindings,
                                    agg=_bind_aggregate(probe, binder))
        if bound.filter is not None:
            # The kinds of the comparisons with the names' real types (a
            # deferred name was not type-checked before it had one).
            check_filter(bound, filter_text)
    except SpecError as err:
        if err.col is None or not shift:
            raise
        raise SpecError(err.message, col=err.col + shift) from None
    return bound


def _has_function(kernel: Kernel | None):
    """What says whether the kernel has a function, for `choose_alternative`:
    the kernel's own answer (a `has_function` method), else whether its BTF
    describes the function. None where neither can tell (no kernel, no BTF):
    the alternative already in `target.symbol` is kept (the first, or what
    the caller chose by kallsyms: `Session._bind`)."""
    if kernel is None:
        return None
    own = getattr(kernel, "has_function", None)
    if own is not None:
        return own
    if kernel.problem() is not None:
        return None

    def described(function: str) -> bool:
        try:
            kernel.prototype(function)
        except NoPrototype as err:
            return not err.unknown  # described, if not usably (two prototypes): binding says so
        except BtfError:
            return True  # not known: binding says what BTF could not read
        return True

    return described


# ---------------------------------------------------------------- returns


def bind_returns(probe: Probe, kernel: Kernel | None) -> Probe:
    """A return probe with its function's return type from BTF
    (`errno_width`, `return_class`: `lang.errnos`), or unchanged (not
    known: None) where BTF cannot say. Never raises: a probe runs without."""
    function = probe.target.symbol
    if probe.kind is not Kind.RETURN or function is None or kernel is None or probe.target.is_user:
        return probe
    if any(mark in function for mark in COPY_MARKS):
        # a compiler copy may return other than the BTF of its original says
        # (GCC's IPA-SRA drops a return value no caller uses)
        return probe
    try:
        if kernel.problem() is not None:
            return probe
        proto = kernel.prototype(function)
        width, returns = errnos.return_class(proto.access.return_leaf(proto.proto_id))
    except (NoPrototype, BtfError):
        return probe
    return dataclasses.replace(probe, errno_width=width, return_class=returns)


# ---------------------------------------------------------------- lookup


def _prototype(probe: Probe, kernel: Kernel | None, spans: list[FetchSpan]) -> Prototype:
    function = probe.target.symbol or ""
    col = _first_named_col(probe, spans)
    if kernel is None or kernel.problem() is not None:
        # the problem's first clause: "use a1..a6" is said once, here
        why = ((kernel.problem() if kernel is not None else None) or "no BTF").split(";")[0]
        raise SpecError(f"{_first_name(probe)}: parameters by name need the kernel's BTF ({why}); "
                        "use a1..a6", col=col)
    if any(mark in function for mark in COPY_MARKS):
        base = function.split(".", 1)[0]
        raise SpecError(f"{function} is a compiler copy of {base}: its BTF prototype describes "
                        f"{base}, not the copy's real arguments; use a1..a6 here", col=col)
    try:
        return kernel.prototype(function)
    except NoPrototype as err:
        if err.unknown:
            # BTF describes every function of vmlinux and of the loaded modules:
            # a name it lacks is a typo or gone, which the user wants first.
            close = getattr(kernel, "close_functions", lambda _name: [])(function)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise SpecError(f"unknown kernel function {function!r}{hint}: its parameters "
                            "cannot be named", col=1) from None
        raise SpecError(f"{_first_name(probe)}: {err}; use a1..a6", col=col) from None
    except BtfError as err:
        raise SpecError(f"BTF: {err}", col=col) from None


# ---------------------------------------------------------------- fetches


def _bind_aggregate(probe: Probe, binder: "Binder"):
    """The probe's aggregation with its names bound, checked again with
    their types (a `char *` is no histogram's value). Its errors have no
    column in the spec's fetches: they say the clause."""
    agg = probe.agg
    if agg is None:
        return None

    labels = {f.label for f in probe.fetches if f.label is not None}

    def bound(fetch: Fetch | None) -> Fetch | None:
        if fetch is None:
            return None
        if names_label(fetch, labels):
            return fetch  # `count(dev)` of `dev=rq->part->bd_dev`: that fetch's value (kernel.generic.plan)
        return _bind_fetch(fetch, FetchSpan(start=None), binder)  # type: ignore[arg-type]

    out = dataclasses.replace(agg, hist=bound(agg.hist), sum=bound(agg.sum),
                              keys=tuple(bound(k) for k in agg.keys),
                              hist_keys=tuple(bound(k) for k in agg.hist_keys))
    # Always again: bindings do not count in equality, so `out == agg` even
    # where a name became text (a tracepoint's char array).
    from ktui.lang.aggregate import check_aggregate

    check_aggregate(out, probe.kind)
    return out


def labelled_fetch(probe: Probe, fetch: Fetch) -> Fetch | None:
    """The probe's own fetch an aggregated fetch names by its label (`dev`
    in `count(dev)` of `dev=rq->part->bd_dev`: that fetch), or None."""
    labels = {own.label: own for own in probe.fetches if own.label is not None}
    label = names_label(fetch, labels)
    return labels[label] if label is not None else None


def names_label(fetch: Fetch, labels) -> str | None:
    """The label of one of the probe's fetches an aggregated fetch names
    (`dev` in `count(dev)` of a probe fetching `dev=rq->part->bd_dev`), as
    a filter's name resolves to a fetch's label first (lang.names)."""
    expr = fetch.expr
    if isinstance(expr, Named) and not expr.steps and fetch.type is None and expr.param in labels:
        return expr.param
    return None


def _bind_fetch(fetch: Fetch, span: FetchSpan, binder: "Binder") -> Fetch:
    if not has_names(fetch.expr):
        return fetch
    outer: list[int] = []
    expr = fetch.expr
    while isinstance(expr, Deref):
        outer.append(expr.offset)
        expr = expr.inner
    assert isinstance(expr, Named)
    col = span.exprs[len(outer)] if len(outer) < len(span.exprs) else span.start
    type_col = span.type if span.type is not None else col
    # Under `+OFF(...)` the name is an address: read as a pointer-sized value.
    want = fetch.type if not outer else "x64"
    binding = binder.bind(expr, want, col, type_col, as_address=bool(outer))
    bound_expr: FetchExpr = dataclasses.replace(expr, binding=binding)
    for offset in reversed(outer):
        bound_expr = Deref(offset, bound_expr)
    # Under `+8(file)` the name only feeds a read; the fetch keeps its own type.
    return dataclasses.replace(fetch, expr=bound_expr)


def _bind_named(named: Named, want: str | None, proto: Prototype, function: str, col: int | None,
                type_col: int | None, *, as_address: bool = False,
                known: tuple[str, ...] = ()) -> Binding:
    access = proto.access
    try:
        slot = access.param(proto.proto_id, named.param)
    except AccessError as err:
        raise SpecError(_no_param(named.param, err, proto, function, known), col=col) from None
    if len(slot.registers) != 1:
        verb = "" if slot.note.startswith("takes") else "is "
        raise SpecError(f"{named.param} {verb}{slot.note}: ktui reads a parameter from one of "
                        f"the six argument registers ({proto.text})", col=col)
    expr: FetchExpr = Arg(slot.registers[0])
    if named.steps:
        # (here, not at the top: a launch whose probes name nothing needs no BTF decoder)
        from ktui.btf.access import Step as BtfStep

        try:
            path = access.member_path(slot.type_id, [BtfStep(s.op, s.name) for s in named.steps],
                                      root=named.param)
        except AccessError as err:
            raise SpecError(err.message, col=None if col is None else col + _step_col(named, err.step)) from None
        except BtfError as err:
            raise SpecError(f"BTF: {err}", col=col) from None
        if len(path.loads) > MAX_DEREF:
            raise SpecError(f"{named} reads through more than {MAX_DEREF} pointers", col=col)
        for offset in path.loads:
            expr = Deref(offset, expr)
        leaf = path.leaf
    else:
        leaf = access.leaf(slot.type_id)
    what = str(named)
    if leaf.bitfield is not None:
        raise SpecError(f"{what} is a bitfield ({leaf.bitfield[1]} bits of {leaf.ctype}): "
                        "ktui cannot read bitfields yet", col=col)
    if as_address:
        if leaf.kind != "pointer":
            raise SpecError(f"+OFFSET({what}) reads memory at {what}, but {what} is a "
                            f"{leaf.ctype}, not a pointer", col=col)
        return Binding(expr, "x64", leaf.ctype)
    ftype = _fetch_type(what, leaf, want, col, type_col)
    if ftype in STRING_TYPES and leaf.kind == "pointer" and named.steps:
        # The text is where the pointer read from memory points: one more
        # +0(...) (a string fetch reads at its last dereference's address).
        expr = Deref(0, expr)
    elif ftype in STRING_TYPES and leaf.kind == "array" and isinstance(expr, Deref):
        pass  # the characters lie at the member's own address
    return Binding(expr, ftype, leaf.ctype)


def _fetch_type(what: str, leaf: Leaf, want: str | None, col: int, type_col: int) -> str:
    """The fetch type: the user's when it fits the C type, else the C type's own."""
    if want in STRING_TYPES:
        if leaf.kind == "pointer" or (leaf.kind == "array" and leaf.text):
            return want
        raise SpecError(f"{what} is {_a(leaf)}, not a pointer or a char array: :{want} reads "
                        "text through a pointer", col=type_col)
    if leaf.kind in ("int", "bool", "enum", "pointer"):
        if want is not None:
            return want  # the user's width and sign (e.g. :u32 of a long, :x64 of a size_t)
        if leaf.kind == "pointer":
            return "x64"
        if leaf.size not in (1, 2, 4, 8):
            raise SpecError(f"{what} is {_a(leaf)} of {leaf.size} bytes: ktui reads integers "
                            "of 1, 2, 4 or 8 bytes", col=col)
        return f"{'s' if leaf.signed else 'u'}{leaf.size * 8}"
    if want == "symbol" and leaf.kind == "pointer":
        return want
    if leaf.kind == "array":
        if leaf.text:
            raise SpecError(f"{what} is a char array ({leaf.ctype}): add :string to read it as text "
                            "(or :ustring for user memory)", col=col)
        raise SpecError(f"{what} is an array ({leaf.ctype}): ktui reads integers and text, not "
                        "arrays", col=col)
    if leaf.kind in ("struct", "union"):
        raise SpecError(f"{what} is a {leaf.ctype}, not a value: name one of its members "
                        f"({what}.member)", col=col)
    raise SpecError(f"{what} is {_a(leaf)}: ktui reads integers, pointers and text", col=col)


def _a(leaf: Leaf) -> str:
    article = "an" if leaf.ctype[:1] in "aeiou" else "a"
    return f"{article} {leaf.ctype}"


def _no_param(name: str, err: AccessError, proto: Prototype, function: str,
              extra: tuple[str, ...] = ()) -> str:
    params = [s.name for s in proto.access.arg_slots(proto.proto_id) if s.name]
    close = difflib.get_close_matches(name, list(extra), n=2, cutoff=0.6)  # the probe's own fetch labels
    close += [c for c in (list(err.close) or difflib.get_close_matches(name, params, n=3, cutoff=0.5))
              if c not in close]
    predefined = difflib.get_close_matches(name, list(names.PREDEFINED) + list(names.REGISTER_SPELLINGS),
                                           n=1, cutoff=0.6)
    hint = ", ".join(dict.fromkeys(close + predefined))
    mean = f" (did you mean {hint}?)" if hint else ""
    return f"{function} has no parameter {name!r}{mean}: {proto.text}"


def _step_col(named: Named, step: int) -> int:
    """Offset from the name's column to step `step`'s name (-1: the parameter)."""
    if step < 0:
        return 0
    head = len(str(Named(named.param)))
    before = sum(len(str(s)) for s in named.steps[:step])
    return head + before + len(named.steps[step].op)


# ---------------------------------------------------------------- filters


def _filter_names(probe: Probe) -> list[str]:
    if probe.filter is None:
        return []
    out: list[str] = []
    for compare in filters.comparisons(probe.filter):
        for side in (compare.left, compare.right):
            if isinstance(side, Field) and side.name not in out:
                out.append(side.name)
    return out


def _deferred(probe: Probe, name: str) -> bool:
    unbound = dataclasses.replace(probe, bindings=None)
    try:
        resolved = names.resolve(unbound, name)
    except SpecError:
        return False
    return resolved.deferred and resolved.fetch_index is None  # a fetch is bound with the fetches


def _bind_filter_name(name: str, probe: Probe, binder: "Binder", filter_text: str | None) -> Named:
    col = _filter_name_col(probe, name, filter_text)
    sc = Scanner(name, "name", tracepoint=probe.kind is Kind.TRACEPOINT)
    try:
        fetch, _span = scan_fetch(sc)
    except SpecError as err:
        raise SpecError(f"filter: {err.message}", col=col) from None
    named = fetch.expr
    if not isinstance(named, Named):
        raise SpecError(f'filter: unknown name "{name}"', col=col)
    known = tuple(f.name for f in probe.fetches)
    try:
        binding = binder.bind(named, None, 0, 0, known=known)
    except SpecError as err:
        message = err.message
        if known and ("has no parameter" in message or "has no field" in message):
            message += f"; this probe's fetches are {', '.join(known)}"
        inner = err.col if err.col else 0  # a member's column within the name
        raise SpecError(f"filter: {message}", col=None if col is None else col + inner) from None
    refused = binder.check_filter_binding(name, binding, probe)
    if refused:
        raise SpecError(f"filter: {refused}", col=col)
    return dataclasses.replace(named, binding=binding)


def _filter_name_col(probe: Probe, name: str, filter_text: str | None) -> int | None:
    """The column of `name`'s first use in `filter_text` (or the canonical filter)."""
    for candidate in (filter_text, str(probe.filter)):
        if candidate is None:
            continue
        try:
            parsed, columns = filters.parse_filter_with_columns(candidate)
        except SpecError:
            continue
        if parsed != probe.filter:
            continue
        for compare, cols in zip(filters.comparisons(parsed), columns):
            if isinstance(compare.left, Field) and compare.left.name == name:
                return cols.left
            if isinstance(compare.right, Field) and compare.right.name == name:
                return cols.right
    return None


# ---------------------------------------------------------------- columns


def _spans(probe: Probe, text: str | None) -> list[FetchSpan]:
    for candidate in (text, probe.spec_text):
        if candidate is None:
            continue
        try:
            parsed, span = parse_raw(candidate)
        except SpecError:
            continue
        if parsed.fetches == probe.fetches:
            return span.fetches
    return []


def _first_named_col(probe: Probe, spans: list[FetchSpan]) -> int | None:
    for index, fetch in enumerate(probe.fetches):
        if has_names(fetch.expr):
            if index < len(spans):
                depth, expr = 0, fetch.expr
                while isinstance(expr, Deref):
                    expr, depth = expr.inner, depth + 1
                exprs = spans[index].exprs
                return exprs[depth] if depth < len(exprs) else spans[index].start
            return None
    return None


def _first_name(probe: Probe) -> str:
    for fetch in probe.fetches + (probe.agg.fetches() if probe.agg is not None else ()):
        expr = fetch.expr
        while isinstance(expr, Deref):
            expr = expr.inner
        if isinstance(expr, Named):
            return str(expr)
    for name in _filter_names(probe):
        return name
    return "names"


__all__ = ["Binder", "Kernel", "NoPrototype", "Prototype", "bind_probe", "bind_returns", "needs_binding", "INT_TYPES"]


# ---------------------------------------------------------------- recordings


def fetch_types(probe: Probe) -> list[list[str] | None]:
    """Per fetch, the [type, C type] its binding gave a name (None for the
    rest): what a recording keeps so a replay, which has no kernel to bind
    against, decodes and shows the values as they were read."""
    out: list[list[str] | None] = []
    for fetch in probe.fetches:
        binding = fetch.expr.binding if isinstance(fetch.expr, Named) else None
        carried = fetch.expr.carried if isinstance(fetch.expr, StartValue) else None
        if carried is not None:  # a span's start value: as its start read it
            out.append([carried.effective_type, carried.ctype or ""])
        else:
            out.append(None if binding is None else [binding.type, binding.ctype])
    return out


def with_fetch_types(probe: Probe, types: object) -> Probe:
    """`probe` with the types `fetch_types` kept (offsets unknown: not runnable)."""
    if not isinstance(types, list) or len(types) != len(probe.fetches):
        return probe
    fetches = []
    for fetch, kept in zip(probe.fetches, types):
        if isinstance(fetch.expr, StartValue) and isinstance(kept, list) and len(kept) == 2 \
                and kept[0] in INT_TYPES:
            # a span's start value: its type (the start's own fetch of it, offsets unknown)
            fetches.append(dataclasses.replace(fetch, expr=dataclasses.replace(
                fetch.expr, carried=Fetch(fetch.expr.inner, kept[0]))))
            continue
        ok = (isinstance(fetch.expr, Named) and isinstance(kept, list) and len(kept) == 2
              and kept[0] in INT_TYPES + STRING_TYPES and isinstance(kept[1], str) and len(kept[1]) < 200)
        if ok:
            fetch = dataclasses.replace(fetch, expr=dataclasses.replace(
                fetch.expr, binding=Binding(None, kept[0], kept[1])))
        fetches.append(fetch)
    return dataclasses.replace(probe, fetches=tuple(fetches))
