"""The compact probe language: `TARGET:KIND[:FETCH[,FETCH...]]`.

    vfs_read:c:a3
    vfs_read:r:retval:s64,a3:u32
    do_sys_openat2:c:fname=+0(a2):ustring
    0xffffffff81234560:c:rdi,rsi

TARGET is a kernel symbol (`foo.isra.0`), `symbol+offset` or a 0x address;
KIND is `c` (kprobe) or `r` (kretprobe); a FETCH is `[label=]EXPR[:type]`
where EXPR is a1..a6, a register, retval, comm/pid/tid/cpu or a kernel-style
dereference `+OFFSET(EXPR)`. The text becomes the frozen `model.Probe`;
`str(probe)` prints the canonical form, which parses back equal.

A hand-written scanner (no regex over the whole text) keeps a 1-based
column for every error. Syntax is checked while scanning; the semantic
rules live in one place (`_check_probe`) shared by `parse_spec` (columns in
the user's text) and `validate_probe` (columns in the canonical text).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import chars, filters
from .model import (
    BUILTINS,
    FETCH_TYPES,
    INT_TYPES,
    STRING_TYPES,
    Arg,
    Builtin,
    Compare,
    Deref,
    Fetch,
    FetchExpr,
    Field,
    Kind,
    Probe,
    Reg,
    RetVal,
    SpecError,
    StrLit,
    Target,
)

MAX_SPEC = 4096  # characters
MAX_FETCHES = 8
MAX_DEREF = 8  # nested +OFFSET(...) levels
SYMBOL_MAX = 511  # the kernel's KSYM_NAME_LEN is 512, NUL included
U64_MAX = 2**64 - 1
DEREF_MAX = 2**63 - 1  # a dereference offset is a signed 64-bit value

_FETCH_HELP = "a1..a6, retval, comm, pid, tid, cpu, a register (rdi, rsi, ...) or +OFFSET(FETCH)"
_SYMBOL_CHARS = filters.IDENT_CHARS | {"."}


# ---------------------------------------------------------------- spans


@dataclass
class _FetchSpan:
    """Columns (1-based) of one fetch's parts, for error messages."""

    start: int
    label: int | None = None
    exprs: list[int] = field(default_factory=list)  # one per nesting depth
    type: int | None = None


@dataclass
class _SpecSpan:
    target: int = 1
    offset: int | None = None
    fetches: list[_FetchSpan] = field(default_factory=list)


# ---------------------------------------------------------------- scanner


class _Scanner:
    """A cursor over the text; `what` names it in "got end of ..." messages."""

    def __init__(self, text: str, what: str) -> None:
        self.text = text
        self.pos = 0
        self.what = what

    def error(self, message: str, pos: int | None = None) -> SpecError:
        return SpecError(message, col=(self.pos if pos is None else pos) + 1)

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def here(self) -> str:
        """What is at the cursor, for messages: `"x"` or `end of spec`."""
        return filters.show_char(self.peek()) if not self.at_end() else f"end of {self.what}"

    def word(self, chars: frozenset[str] = filters.IDENT_CHARS) -> str:
        """An identifier at the cursor (empty if there is none)."""
        start = self.pos
        if self.peek() and self.peek() in filters.IDENT_START:
            self.pos += 1
            while self.peek() and self.peek() in chars:
                self.pos += 1
        return self.text[start : self.pos]

    def number(self, limit: int, what: str) -> int:
        """A decimal or 0x-hex number no larger than `limit`."""
        start = self.pos
        while self.peek() and self.peek() in filters.IDENT_CHARS:
            self.pos += 1
        digits = self.text[start : self.pos]
        if digits[:2] in ("0x", "0X"):
            body = digits[2:]
            ok = bool(body) and all(c in "0123456789abcdefABCDEF" for c in body)
            value = int(body, 16) if ok else None
        else:
            value = int(digits) if digits and all(c in "0123456789" for c in digits) else None
        if value is None:
            raise self.error(f'bad {what} "{digits}": write it in decimal or 0x hex', start)
        if value > limit:
            raise self.error(f"{what} {digits} is too large (at most {limit:#x})", start)
        return value


def _check_text(text: object, what: str) -> str:
    if not isinstance(text, str):
        raise SpecError(f"a {what} must be text, got {type(text).__name__}")
    if len(text) > MAX_SPEC:
        raise SpecError(f"{what} longer than {MAX_SPEC} characters", col=MAX_SPEC + 1)
    chars.refuse(text, f"in a {what}", allowed="\t")  # before the grammar: named as what it is
    if not text.strip(" \t"):
        example = {"spec": "vfs_read:c:a3", "fetch": "a3 or fname=+0(a2):string", "target": "vfs_read"}[what]
        raise SpecError(f"empty {what}; write e.g. {example}", col=1)
    return text


def _expect_end(sc: _Scanner, after: str) -> None:
    sc.skip_ws()
    if not sc.at_end():
        raise sc.error(f"unexpected {sc.here()} after the {after}")


# ---------------------------------------------------------------- target


def _target(sc: _Scanner, span: _SpecSpan) -> Target:
    span.target = sc.pos + 1
    c = sc.peek()
    if c and c in "0123456789":
        start = sc.pos
        address = sc.number(U64_MAX, "address")
        if sc.text[start : start + 2] not in ("0x", "0X"):
            raise sc.error("an address is written in hex, e.g. 0xffffffff81234560", start)
        if address == 0:
            raise sc.error("address 0 cannot be probed", start)
        return Target(address=address)
    if not c or c not in filters.IDENT_START:
        raise sc.error(f"expected a kernel symbol or a 0x address, got {sc.here()}")
    start = sc.pos
    symbol = sc.word(frozenset(_SYMBOL_CHARS))
    if len(symbol) > SYMBOL_MAX:
        raise sc.error(f"symbol longer than {SYMBOL_MAX} characters", start)
    offset = 0
    if sc.peek() == "+":
        sc.pos += 1
        span.offset = sc.pos + 1
        if not sc.peek() or sc.peek() not in "0123456789":
            raise sc.error(f"expected an offset after +, e.g. {symbol}+0x1c, got {sc.here()}")
        offset = sc.number(U64_MAX, "offset")
    elif sc.peek() == "-":
        raise sc.error(f"a symbol offset is added, e.g. {symbol}+0x1c")
    return Target(symbol=symbol, offset=offset)


# ---------------------------------------------------------------- fetches


def _leaf(word: str, pos: int, sc: _Scanner) -> FetchExpr:
    """A name in a fetch: argument, register, retval or builtin."""
    name = filters.canonical_name(word)
    if name is None:
        problem = filters.name_problem(word)
        if problem is not None:
            raise sc.error(problem, pos)
        hint = filters.suggest(word, filters.PREDEFINED + tuple(filters.REGISTER_SPELLINGS))
        raise sc.error(f'unknown fetch "{word}";{hint} a fetch is {_FETCH_HELP}', pos)
    if name == "retval":
        return RetVal()
    if name in BUILTINS:
        return Builtin(name)
    if name in filters.ARG_NAMES:
        return Arg(int(name[1:]))
    return Reg(filters.REGISTER_SPELLINGS[name])


def _expr(sc: _Scanner, cols: list[int], depth: int) -> FetchExpr:
    cols.append(sc.pos + 1)
    c = sc.peek()
    if c and c in "+-":
        if depth >= MAX_DEREF:
            raise sc.error(f"dereferences nest deeper than {MAX_DEREF} levels")
        sc.pos += 1
        if not sc.peek() or sc.peek() not in "0123456789":
            raise sc.error(f"expected an offset after {c}, e.g. {c}8(a1), got {sc.here()}")
        value = sc.number(DEREF_MAX, "offset")
        sc.skip_ws()
        if sc.peek() != "(":
            raise sc.error(f"expected ( after the offset, e.g. {c}{value}(a1), got {sc.here()}")
        open_pos = sc.pos
        sc.pos += 1
        sc.skip_ws()
        inner = _expr(sc, cols, depth + 1)
        sc.skip_ws()
        if sc.peek() != ")":
            raise sc.error(f"expected ) to close the ( at column {open_pos + 1}, got {sc.here()}")
        sc.pos += 1
        return Deref(-value if c == "-" else value, inner)
    start = sc.pos
    word = sc.word()
    if word:
        return _leaf(word, start, sc)
    if c in ("%", "$"):
        # Kernel kprobe_events spellings (%di, $arg1, $retval): say ours.
        sc.pos += 1
        ours = filters.canonical_name(sc.word())
        if ours is not None:
            raise sc.error(f"write {ours} without the {c}", start)
        raise sc.error(f"write fetches without {c}: {_FETCH_HELP}", start)
    raise sc.error(f"expected a fetch ({_FETCH_HELP}), got {sc.here()}")


def _fetch(sc: _Scanner) -> tuple[Fetch, _FetchSpan]:
    span = _FetchSpan(start=sc.pos + 1)
    label = None
    save = sc.pos
    word = sc.word()
    sc.skip_ws()
    if word and sc.peek() == "=" and sc.text[sc.pos + 1 : sc.pos + 2] != "=":
        label, span.label = word, save + 1
        sc.pos += 1
        sc.skip_ws()
    else:
        sc.pos = save  # not a label: scan the word again as the expression
    expr = _expr(sc, span.exprs, 0)
    sc.skip_ws()
    type_ = None
    if sc.peek() == ":":
        sc.pos += 1
        sc.skip_ws()
        span.type = sc.pos + 1
        type_ = sc.word()
        if type_ not in FETCH_TYPES:
            got = f'"{type_}"' if type_ else sc.here()
            hint = filters.suggest(type_, FETCH_TYPES) if type_ else ""
            raise sc.error(f"unknown type {got};{hint} types are {', '.join(FETCH_TYPES)}", span.type - 1)
    return Fetch(expr=expr, type=type_, label=label), span


# ---------------------------------------------------------------- spec


def _parse_raw(text: str) -> tuple[Probe, _SpecSpan]:
    """Syntax only: the probe as written and where its parts are."""
    sc = _Scanner(text, "spec")
    span = _SpecSpan()
    sc.skip_ws()
    target = _target(sc, span)
    sc.skip_ws()
    if sc.peek() != ":":
        raise sc.error(f"expected :c or :r after the target, got {sc.here()}")
    sc.pos += 1
    sc.skip_ws()
    kind_pos = sc.pos
    kind_word = sc.word()
    if kind_word not in ("c", "r"):
        got = f'"{kind_word}"' if kind_word else sc.here()
        raise sc.error(f"kind must be c or r, got {got} (c = call, r = return)", kind_pos)
    kind = Kind(kind_word)
    sc.skip_ws()
    fetches = []
    if sc.peek() == ":":
        sc.pos += 1
        while True:
            sc.skip_ws()
            fetch, fetch_span = _fetch(sc)
            fetches.append(fetch)
            span.fetches.append(fetch_span)
            sc.skip_ws()
            if sc.peek() != ",":
                break
            sc.pos += 1
    if not sc.at_end():
        expected = ", between fetches" if fetches else ": before the fetches"
        raise sc.error(f"unexpected {sc.here()}; expected {expected} or end of spec")
    return Probe(target=target, kind=kind, fetches=tuple(fetches)), span


def parse_spec(text: str) -> Probe:
    """`TARGET:KIND[:FETCH,...]` -> a validated Probe (no filter, no label)."""
    probe, span = _parse_raw(_check_text(text, "spec"))
    _check_probe(probe, span)
    return probe


def parse_fetch(text: str) -> Fetch:
    """One `[label=]EXPR[:type]`, checked as far as it can be without its
    probe (retval and name clashes are checked by `validate_probe`)."""
    sc = _Scanner(_check_text(text, "fetch"), "fetch")
    sc.skip_ws()
    fetch, span = _fetch(sc)
    _expect_end(sc, "fetch")
    _check_fetch(fetch, span, kind=None)
    return fetch


def parse_target(text: str) -> Target:
    """`symbol`, `symbol+offset` or `0xADDRESS`."""
    sc = _Scanner(_check_text(text, "target"), "target")
    sc.skip_ws()
    target = _target(sc, _SpecSpan())
    _expect_end(sc, "target")
    return target


# ---------------------------------------------------------------- semantics


def _check_label(label: str, col: int | None) -> None:
    if len(label) > filters.LABEL_MAX:
        raise SpecError(f"label longer than {filters.LABEL_MAX} characters", col=col)
    if filters.is_reserved(label):
        raise SpecError(f'"{label}" is a reserved name; pick another label', col=col)


def _check_fetch(fetch: Fetch, span: _FetchSpan, kind: Kind | None) -> None:
    """Rules that hold for one fetch; `kind` None skips the retval check."""
    if fetch.label is not None:
        _check_label(fetch.label, span.label)
    chain: list[FetchExpr] = [fetch.expr]
    while isinstance(chain[-1], Deref):
        chain.append(chain[-1].inner)
    for depth, expr in enumerate(chain):
        col = span.exprs[depth] if depth < len(span.exprs) else span.start
        if isinstance(expr, RetVal) and kind is Kind.CALL:
            raise SpecError("retval exists only in return probes (kind r)", col=col)
        if depth > 0 and isinstance(expr, Builtin):
            raise SpecError(f"{expr.name} cannot be dereferenced; dereference a1..a6, a register or retval", col=col)
    type_col = span.type if span.type is not None else span.start
    expr, type_ = fetch.expr, fetch.type
    if isinstance(expr, Builtin):
        if expr.name == "comm" and type_ not in (None, "string"):
            raise SpecError(f"comm is text; drop the :{type_} type", col=type_col)
        if expr.name != "comm" and type_ is not None and type_ not in INT_TYPES:
            raise SpecError(f"{expr.name} is an integer; :{type_} does not apply (use e.g. :u32)", col=type_col)
    if isinstance(expr, RetVal) and type_ in STRING_TYPES:
        raise SpecError(
            f"retval cannot be :{type_}; a string type applies to a1..a6, a register or +OFFSET(...)",
            col=type_col,
        )


def _check_probe(probe: Probe, span: _SpecSpan, filter_text: str | None = None) -> None:
    if probe.kind is Kind.RETURN and probe.target.offset:
        raise SpecError(
            "a return probe attaches at function entry; drop the +offset", col=span.offset or span.target
        )
    if len(probe.fetches) > MAX_FETCHES:
        raise SpecError(f"at most {MAX_FETCHES} fetches per probe", col=_fetch_col(span, MAX_FETCHES))
    seen: set[str] = set()
    for index, fetch in enumerate(probe.fetches):
        fetch_span = span.fetches[index] if index < len(span.fetches) else _FetchSpan(start=1)
        _check_fetch(fetch, fetch_span, probe.kind)
        if fetch.name in seen:
            raise SpecError(
                f'fetch name "{fetch.name}" is used twice; give one a label, e.g. x=...', col=fetch_span.start
            )
        seen.add(fetch.name)
    for attr, allow_none in (("sample", False), ("rate_limit", True)):
        value = getattr(probe, attr)
        if value is None and allow_none:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise SpecError(f"{attr} must be a whole number of at least 1, got {value!r}")
    if probe.filter is not None:
        _check_filter(probe, filter_text)


def _fetch_col(span: _SpecSpan, index: int) -> int | None:
    return span.fetches[index].start if index < len(span.fetches) else None


# ---------------------------------------------------------------- filter vs probe

_INT, _STR = "integer", "string"


def _filter_error(message: str, col: int | None) -> SpecError:
    return SpecError(f"filter: {message}", col=col)


def _field_kind(probe: Probe, name: str, col: int) -> str:
    """What a filter name is in this probe: _INT or _STR. Resolution order
    (codegen follows the same): a fetch of that name (its label, or `a3`,
    `rdi`, `comm`... for an unlabelled fetch), then the predefined names."""
    for fetch in probe.fetches:
        if fetch.name == name:
            return _STR if fetch.effective_type in STRING_TYPES else _INT
    if name == "retval":
        if probe.kind is Kind.CALL:
            raise _filter_error("retval exists only in return probes (kind r)", col)
        return _INT
    if name == "comm":
        return _STR
    if name in filters.PREDEFINED:
        return _INT
    known = tuple(f.name for f in probe.fetches) + filters.PREDEFINED
    hint = filters.suggest(name, known)
    raise _filter_error(
        f'unknown name "{name}";{hint} use a fetch label, a1..a6, retval, comm, pid, tid, cpu or a register', col
    )


def _operand_kind(probe: Probe, operand: object, col: int) -> str:
    if isinstance(operand, Field):
        return _field_kind(probe, operand.name, col)
    return _STR if isinstance(operand, StrLit) else _INT


def _check_filter(probe: Probe, filter_text: str | None) -> None:
    expr = probe.filter
    if filters.tree_depth(expr) > 4 * filters.MAX_DEPTH + filters.MAX_COMPARES:
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
    if left == _STR and compare.op not in ("==", "!="):
        raise _filter_error(f"strings compare only with == or !=, not {compare.op}", cols.op)
    for literal, other, col in ((compare.left, compare.right, cols.left), (compare.right, compare.left, cols.right)):
        if isinstance(literal, StrLit) and _is_comm(probe, other) and len(literal.value) > filters.COMM_MAX:
            raise _filter_error(f"comm holds at most {filters.COMM_MAX} characters", col)


def _is_comm(probe: Probe, operand: object) -> bool:
    if not isinstance(operand, Field):
        return False
    for fetch in probe.fetches:
        if fetch.name == operand.name:
            return isinstance(fetch.expr, Builtin) and fetch.expr.name == "comm"
    return operand.name == "comm"


# ---------------------------------------------------------------- validate


def validate_probe(probe: Probe, *, filter_text: str | None = None) -> None:
    """Raise SpecError unless `probe` is well formed and consistent.

    Checks what the spec grammar cannot: retval only in return probes, no
    offset on a return probe, unique fetch names, at most 8 fetches, types
    that fit what they are applied to, filter names that resolve in this
    probe with matching integer/string operands, sample >= 1, rate_limit
    None or >= 1. A hand-built probe must also be in canonical form (its
    text parses back equal). Columns point into `probe.spec_text`, or for
    filter errors (message prefixed `filter:`) into `filter_text` when given
    and it parses to this filter, else into `str(probe.filter)`.
    """
    if not isinstance(probe, Probe):
        raise SpecError(f"expected a Probe, got {type(probe).__name__}")
    if not isinstance(probe.fetches, tuple):
        raise SpecError(f"fetches must be a tuple, got {type(probe.fetches).__name__}")
    for fetch in probe.fetches:
        # Bound hand-built nesting before printing it (printing recurses).
        expr, depth = getattr(fetch, "expr", None), 0
        while isinstance(expr, Deref):
            expr, depth = expr.inner, depth + 1
            if depth > MAX_DEREF:
                raise SpecError(f"dereferences nest deeper than {MAX_DEREF} levels")
    if probe.label is not None:
        # Shown in the probe table and written to files: refused as in a probe set.
        if not isinstance(probe.label, str):
            raise SpecError(f"label must be text, got {type(probe.label).__name__}")
        odd = chars.first_refused(probe.label)
        if odd is not None:
            raise SpecError(f"label: {chars.refused_message(probe.label[odd])}")
    try:
        text = probe.spec_text
    except (AttributeError, TypeError, ValueError) as err:
        raise SpecError(f"malformed probe: {err}") from err
    reparsed, span = _parse_raw(_check_text(text, "spec"))
    if reparsed.target != probe.target:
        raise SpecError(f"target is not in canonical form: {probe.target!r}", col=1)
    if reparsed.kind != probe.kind:
        raise SpecError(f"kind is not in canonical form: {probe.kind!r}")
    for index, (mine, theirs) in enumerate(zip(probe.fetches, reparsed.fetches)):
        if mine != theirs:
            raise SpecError(f"fetch is not in canonical form: {mine!r}", col=_fetch_col(span, index))
    if len(probe.fetches) != len(reparsed.fetches):
        raise SpecError("fetches are not in canonical form", col=None)
    _check_probe(probe, span, filter_text)
