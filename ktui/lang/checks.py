"""The rules of the probe language that the grammar cannot express:
retval only in return probes, fetch types that fit what they apply to,
unique fetch names, and a filter whose names resolve in its probe.

A tracepoint (`CATEGORY/NAME:t`) reads its record, not a function's
registers: its values are its fields by name, the builtins (comm, pid,
tid, cpu) and `+OFFSET(field)` reads through a pointer field. a1..a6,
registers and retval are refused, and so is `field->member` (tracefs gives
a field's C type as text, with no BTF type to walk). `errno` and
`maxactive` belong to return probes, and a probe's own `attach: kprobe` or
`attach: fentry` cannot apply (the probe set refuses it where it is
written; a set-wide `attach:` just does not apply to tracepoints).

A user function (`PATH:FUNCTION:c`, a uprobe) has no BTF here: a name in
its fetches is refused with its column (`lang.user_probes` has its other
rules). `retval:string` is allowed there (a user function's `char *`, e.g.
readline's): the kernel side reads user memory for every string of one.
"""

from __future__ import annotations

from ktui.lang import filters, limits, names, wildcards
from ktui.lang.cgroups import is_cgroup
from ktui.lang.grammar import TRACEPOINT_VALUES, FetchSpan, SpecSpan
from ktui.lang.user_probes import USER_NO_BTF
from ktui.lang.limits import (
    COMM_MAX_BYTES,
    FETCH_LABEL_MAX,
    FILTER_MAX_COMPARES,
    FILTER_MAX_DEPTH,
    MAX_FETCHES,
)
from ktui.lang.model import (
    INT_TYPES,
    STRING_TYPES,
    Arg,
    Builtin,
    Compare,
    Deref,
    Fetch,
    FetchExpr,
    Field,
    IntLit,
    has_names,
    Kind,
    Named,
    Probe,
    Reg,
    RetVal,
    SpecError,
    StrLit,
)

# ---------------------------------------------------------------- semantics


def check_label(label: str, col: int | None) -> None:
    if len(label) > FETCH_LABEL_MAX:
        raise SpecError(f"label longer than {FETCH_LABEL_MAX} characters", col=col)
    if names.is_reserved(label):
        raise SpecError(f'"{label}" is a reserved name; pick another label', col=col)


def check_fetch(fetch: Fetch, span: FetchSpan, kind: Kind | None, *, user: bool = False) -> None:
    """Rules that hold for one fetch; `kind` None (the probe not known yet)
    skips the retval checks. `user`: a user function's (retval may be a string)."""
    if fetch.label is not None:
        check_label(fetch.label, span.label)
    chain: list[FetchExpr] = [fetch.expr]
    while isinstance(chain[-1], Deref):
        chain.append(chain[-1].inner)
    for depth, expr in enumerate(chain):
        col = span.exprs[depth] if depth < len(span.exprs) else span.start
        if kind is Kind.TRACEPOINT and tracepoint_value_problem(expr):
            step = _first_step_col(expr) if isinstance(expr, Named) else 0
            raise SpecError(tracepoint_value_problem(expr), col=None if col is None else col + step)
        if isinstance(expr, RetVal) and kind is Kind.CALL:
            raise SpecError("retval exists only in return probes (kind r)", col=col)
        if depth > 0 and isinstance(expr, Builtin):
            raise SpecError(f"{expr.name} cannot be dereferenced; dereference a1..a6, a register or retval", col=col)
    type_col = span.type if span.type is not None else span.start
    expr, type_ = fetch.expr, fetch.type
    if isinstance(expr, Builtin):
        if expr.name == "comm" and type_ not in (None, "string"):
            raise SpecError(f"comm is text; drop the :{type_} type", col=type_col)
        if expr.name == "cgroup" and type_ is not None:
            raise SpecError(f"cgroup is shown by its path; drop the :{type_} type", col=type_col)
        if expr.name != "comm" and type_ is not None and type_ not in INT_TYPES:
            raise SpecError(f"{expr.name} is an integer; :{type_} does not apply (use e.g. :u32)", col=type_col)
    if isinstance(expr, RetVal) and type_ in STRING_TYPES and kind is not None and not user:
        raise SpecError(
            f"retval cannot be :{type_}; a string type applies to a1..a6, a register or +OFFSET(...)",
            col=type_col,
        )


def tracepoint_value_problem(expr: FetchExpr) -> str:
    """Why `expr` cannot be read at a tracepoint ("" when it can)."""
    while isinstance(expr, Deref):
        expr = expr.inner
    if isinstance(expr, (Arg, Reg, RetVal)):
        return f"{expr}: {TRACEPOINT_VALUES}"
    if isinstance(expr, Named) and expr.steps:
        return (f"{expr}: a tracepoint's field has no members to name (tracefs gives its C type as "
                f"text, not a BTF type): read memory with +OFFSET({Named(expr.param)})")
    return ""


def _first_step_col(named: Named) -> int:
    """Offset from a name's column to its first member step."""
    return len(str(Named(named.param))) if named.steps else 0


def check_tracepoint_options(probe: Probe) -> None:
    """What a return probe or a kprobe has and a tracepoint cannot."""
    if probe.maxactive:
        raise SpecError("maxactive: only a return probe (:r) has one (the calls its kretprobe "
                        "follows at once), not a tracepoint")
    if probe.attach in ("kprobe", "fentry"):
        raise SpecError(f"attach: {probe.attach} is for kernel functions; a tracepoint attaches as "
                        "a tracepoint (leave attach: out)")


def check_probe(probe: Probe, span: SpecSpan, filter_text: str | None = None) -> None:
    if probe.kind is Kind.RETURN and probe.target.offset:
        raise SpecError(
            "a return probe attaches at function entry; drop the +offset", col=span.offset or span.target
        )
    if len(probe.fetches) > MAX_FETCHES:
        raise SpecError(f"at most {MAX_FETCHES} fetches per probe", col=fetch_col(span, MAX_FETCHES))
    seen: set[str] = set()
    for index, fetch in enumerate(probe.fetches):
        fetch_span = span.fetches[index] if index < len(span.fetches) else FetchSpan(start=1)
        check_fetch(fetch, fetch_span, probe.kind, user=probe.target.is_user)
        if has_names(fetch.expr) and probe.target.is_user:
            raise SpecError(f"{_named_leaf(fetch)}: {USER_NO_BTF}", col=_named_col(fetch, fetch_span))
        if isinstance(fetch.expr, Builtin) and fetch.expr.name == "func" and not probe.target.is_wildcard:
            raise SpecError(names.FUNC_NOT_WILDCARD, col=fetch_span.start)
        if isinstance(fetch.expr, Builtin) and fetch.expr.name == "latency":
            from ktui.lang.latency import NOT_FETCHED  # it imports filters, as this module does

            raise SpecError(NOT_FETCHED, col=fetch_span.start)
        if has_names(fetch.expr) and wildcards.names_problem(probe):
            raise SpecError(f"{_named_leaf(fetch)}: {wildcards.names_problem(probe)}",
                            col=_named_col(fetch, fetch_span))
        if has_names(fetch.expr) and not names.may_be_parameter(probe):
            where = "an address" if probe.target.address is not None else "an offset into a function"
            raise SpecError(f"parameters are known by name at a function's entry, not at {where}: "
                            "use a1..a6 or registers here", col=_named_col(fetch, fetch_span))
        if fetch.name in seen:
            raise SpecError(
                f'fetch name "{fetch.name}" is used twice; give one a label, e.g. x=...', col=fetch_span.start
            )
        seen.add(fetch.name)
    limits.check_count("sample", probe.sample)
    limits.check_count("rate_limit", probe.rate_limit, optional=True)
    if probe.filter is not None:
        check_filter(probe, filter_text)


def _named_leaf(fetch: Fetch) -> FetchExpr:
    expr = fetch.expr
    while isinstance(expr, Deref):
        expr = expr.inner
    return expr


def _named_col(fetch: Fetch, span: FetchSpan) -> int:
    depth, expr = 0, fetch.expr
    while isinstance(expr, Deref):
        expr, depth = expr.inner, depth + 1
    return span.exprs[depth] if depth < len(span.exprs) else span.start


def fetch_col(span: SpecSpan, index: int) -> int | None:
    return span.fetches[index].start if index < len(span.fetches) else None


# ---------------------------------------------------------------- filter vs probe

_INT, _STR = "integer", "string"


def _filter_error(message: str, col: int | None) -> SpecError:
    return SpecError(f"filter: {message}", col=col)


def _operand_kind(probe: Probe, operand: object, col: int) -> str:
    if not isinstance(operand, Field):
        return _STR if isinstance(operand, StrLit) else _INT
    return _STR if _resolve(probe, operand.name, col).is_string else _INT


def _resolve(probe: Probe, name: str, col: int) -> names.Resolved:
    try:
        return names.resolve(probe, name)
    except SpecError as err:
        raise _filter_error(err.message, col) from None


def check_filter(probe: Probe, filter_text: str | None) -> None:
    """The filter against its probe: names that resolve, operands of one kind."""
    expr = probe.filter
    if filters.tree_depth(expr) > 4 * FILTER_MAX_DEPTH + FILTER_MAX_COMPARES:
        raise _filter_error("filter nests too deeply", None)
    columns = None
    if filter_text is not None:
        try:
            parsed, columns = filters.parse_filter_with_columns(filter_text)
        except SpecError as err:
            raise _filter_error(err.message, err.col) from err
        if parsed != expr:
            columns = None  # the text is not this filter: point into the canonical text
    if columns is None:
        canonical = str(expr)
        try:
            parsed, columns = filters.parse_filter_with_columns(canonical)
        except SpecError as err:
            raise _filter_error(f"{err.message} (in {ascii(canonical)[:80]})", err.col) from err
        if parsed != expr:
            raise _filter_error(f"not in canonical form: {ascii(canonical)[:80]} parses differently", None)
    for compare, cols in zip(filters.comparisons(expr), columns):
        _check_compare(probe, compare, cols)


def _check_compare(probe: Probe, compare: Compare, cols: filters.CompareColumns) -> None:
    _check_unquoted_text(probe, compare, cols)
    for literal, other, col in ((compare.left, compare.right, cols.left), (compare.right, compare.left, cols.right)):
        if isinstance(literal, IntLit) and literal.unit and not _is_latency(probe, other):
            raise _filter_error(f"{literal} is a duration: it compares with latency only "
                                f"(compare {other} with a plain number)", col)
    if _is_deferred(probe, compare.left) or _is_deferred(probe, compare.right):
        return  # a parameter's type is known once bound to BTF (lang.bind checks it again then)
    left = _operand_kind(probe, compare.left, cols.left)
    right = _operand_kind(probe, compare.right, cols.right)
    if left != right:
        if isinstance(compare.left, Field) and isinstance(compare.right, Field):
            raise _filter_error(
                f"cannot compare {left} {compare.left} with {right} {compare.right}", cols.op
            )
        # One side is a literal of the wrong kind: point at it, it is what to change.
        named, kind = (compare.left, left) if isinstance(compare.left, Field) else (compare.right, right)
        literal_col = cols.right if isinstance(compare.left, Field) else cols.left
        wanted = 'a quoted "text"' if kind == _STR else "a number"
        raise _filter_error(f"{named} is a{'n' if kind == _INT else ''} {kind}; compare it with {wanted}", literal_col)
    if left == _STR and isinstance(compare.left, Field) and isinstance(compare.right, Field):
        # The kernel side compares a string with the bytes of a literal only.
        raise _filter_error(
            f'a string compares only with a quoted "text", not with another string ({compare.right})', cols.right
        )
    if left == _STR and compare.op not in ("==", "!="):
        raise _filter_error(f"strings compare only with == or !=, not {compare.op}", cols.op)
    for literal, other, col in ((compare.left, compare.right, cols.left), (compare.right, compare.left, cols.right)):
        if isinstance(literal, StrLit) and _is_comm(probe, other) and len(literal.value.encode()) > COMM_MAX_BYTES:
            raise _filter_error(f"comm holds at most {COMM_MAX_BYTES} characters", col)
        if isinstance(literal, StrLit) and _is_cgroup(probe, other):
            try:  # the path's text; whether this machine has it is asked where the plan is built
                limits.check_cgroup(literal.value)
            except SpecError as err:
                raise _filter_error(err.message, col) from None


def _check_unquoted_text(probe: Probe, compare: Compare, cols: filters.CompareColumns) -> None:
    """`comm == dd`: a word that is no name, compared with a string, is text
    that lost its quotes; say so rather than "unknown name"."""
    left, right = compare.left, compare.right
    if not (isinstance(left, Field) and isinstance(right, Field)):
        return
    for bare, other, col in ((right, left, cols.right), (left, right, cols.left)):
        if _is_unknown(probe, bare.name) and _is_string(probe, other.name):
            text = StrLit(bare.name)
            quoted = Compare(compare.op, left, text) if bare is right else Compare(compare.op, text, right)
            raise _filter_error(f"strings need double quotes: {quoted}", col)


def _is_unknown(probe: Probe, name: str) -> bool:
    try:
        return names.resolve(probe, name).deferred
    except names.UnknownName:
        return True
    except SpecError:  # a known name used where it does not apply (retval in a call probe)
        return False


def _is_deferred(probe: Probe, operand: object) -> bool:
    if not isinstance(operand, Field):
        return False
    try:
        return names.resolve(probe, operand.name).deferred
    except SpecError:
        return False


def _is_string(probe: Probe, name: str) -> bool:
    try:
        return names.resolve(probe, name).is_string
    except SpecError:
        return False


def _is_cgroup(probe: Probe, operand: object) -> bool:
    return isinstance(operand, Field) and is_cgroup(names.resolve(probe, operand.name).expr)


def _is_latency(probe: Probe, operand: object) -> bool:
    if not isinstance(operand, Field):
        return False
    try:
        expr = names.resolve(probe, operand.name).expr
    except SpecError:
        return operand.name == "latency"  # refused as a name where it has none, at its own column
    return isinstance(expr, Builtin) and expr.name == "latency"


def _is_comm(probe: Probe, operand: object) -> bool:
    return isinstance(operand, Field) and names.resolve(probe, operand.name).is_comm
