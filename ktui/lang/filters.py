"""The filter language: when a probe's event is emitted.

    a3 > 4096 && comm == "dd"
    !(retval >= 0) || fname != "/dev/null"

`parse_filter(text)` turns such text into the frozen `model.FilterExpr`
tree with a hand-written tokenizer and a recursive-descent parser; codegen
builds C from that tree, never from the text. Precedence, tightest first:
`!` (which takes a parenthesised condition or another `!`), comparisons,
`&&`, `||`. `&&` and `||` group to the left.

Names are left as written, in their canonical spelling (`arg3` -> `a3`);
what a name is *in a given probe* is `ktui.lang.names.resolve`'s answer,
which both `validate_probe` and codegen use.
"""

from __future__ import annotations

from dataclasses import dataclass

from ktui.lang import chars
from ktui.lang.limits import (
    CGROUP_PATH_MAX,
    FETCH_LABEL_MAX,
    FILTER_INT_MAX,
    FILTER_INT_MIN,
    FILTER_MAX,
    FILTER_MAX_COMPARES,
    FILTER_MAX_DEPTH,
    STRING_LITERAL_MAX,
)
from ktui.lang.model import (
    COMPARE_OPS,
    DURATION_UNITS,
    And,
    Compare,
    Field,
    FilterExpr,
    IntLit,
    Not,
    Operand,
    Or,
    SpecError,
    StrLit,
)
from ktui.lang.names import IDENT_CHARS, IDENT_START, canonical_name, name_problem
from ktui.lang.numbers import DIGITS, parse_int

# ---------------------------------------------------------------- tokens


@dataclass(frozen=True)
class _Token:
    kind: str  # name, int, str, op (comparison), &&, ||, !, (, ), end, error
    text: str
    col: int  # 1-based
    value: object = None  # int, str, canonical name, or the error message


def _describe(tok: _Token) -> str:
    return "end of filter" if tok.kind == "end" else f'"{tok.text}"'


def _scan_word(text: str, i: int) -> int:
    while i < len(text) and text[i] in IDENT_CHARS:
        i += 1
    return i


def _scan_chain(text: str, i: int) -> int:
    """A name with its member steps: `count`, `args.flags`, `file->f_pos`
    (the same names a fetch takes; a filter has no arithmetic, so `->` and
    `.` can only be steps)."""
    end = _scan_word(text, i)
    while True:
        step = 2 if text[end : end + 2] == "->" else 1 if text[end : end + 1] == "." else 0
        if not step or end + step >= len(text) or text[end + step] not in IDENT_START:
            return end
        end = _scan_word(text, end + step)


def _number_token(text: str, start: int, i: int) -> _Token:
    """An integer from text[i:], negative when text[start] is `-`; or a
    duration in ns (`100ms`: decimal digits and a unit of DURATION_UNITS)."""
    end = _scan_word(text, i)
    word = text[start:end]
    value = parse_int(word, signed=True)
    if value is None and word.startswith("-") and _duration(word[1:]) is not None:
        return _Token("error", word, start + 1, "a duration is not negative")
    if value is None:
        value = _duration(word)
    if value is None:
        return _Token("error", word, start + 1, f'bad number "{word}"')
    if not FILTER_INT_MIN <= value <= FILTER_INT_MAX:
        return _Token("error", text[start:end], start + 1, "integer out of 64-bit range")
    return _Token("int", text[start:end], start + 1, value)


def _duration(word: str) -> int | None:
    """`100ms` -> 100000000 (ns): decimal digits and a unit; None when
    `word` is no duration."""
    unit = duration_unit(word)
    digits = word[:len(word) - len(unit)]
    if not unit or not digits or not all(c in DIGITS for c in digits):
        return None
    return parse_int(digits) * DURATION_UNITS[unit]  # type: ignore[operator]


def duration_unit(word: str) -> str:
    """The unit a duration literal ends in (`100ms` -> `ms`), "" for none
    (no number ends in n, u, m or s: hex digits stop at f)."""
    unit = word[len(word.rstrip("nums")):]
    return unit if unit in DURATION_UNITS else ""


def _string_token(text: str, start: int) -> _Token:
    kept: list[str] = []
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == '"':
            if len(kept) > CGROUP_PATH_MAX:  # only a cgroup's path may pass STRING_LITERAL_MAX (comparison())
                return _Token("error", '"', start + 1, f"string longer than {CGROUP_PATH_MAX} characters")
            return _Token("str", text[start : i + 1], start + 1, "".join(kept))
        if c == "\\":
            nxt = text[i + 1 : i + 2]
            if nxt not in ('"', "\\"):
                return _Token("error", "\\", i + 1, 'only \\" and \\\\ escapes are allowed in strings')
            kept.append(nxt)
            i += 2
            continue
        if not " " <= c <= "~":
            return _Token("error", c, i + 1, f"strings hold printable ASCII characters only, not {chars.show_char(c)}")
        kept.append(c)
        i += 1
    return _Token("error", '"', start + 1, 'unterminated string: missing closing "')


_TWO_CHAR = {"==": "op", "!=": "op", "<=": "op", ">=": "op", "&&": "&&", "||": "||"}
_ONE_CHAR = {"<": "op", ">": "op", "!": "!", "(": "(", ")": ")"}
_HINTS = {"=": "use == to compare", "&": "use && for and", "|": "use || for or"}


def _tokenize(text: str) -> list[_Token]:
    """All tokens, ending with `end`, or with one `error` token where the
    text stops making sense (the parser raises it when it gets there, so
    errors come out in reading order)."""
    tokens: list[_Token] = []
    i = 0
    while True:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        if i == len(text):
            tokens.append(_Token("end", "", i + 1))
            return tokens
        c, pair = text[i], text[i : i + 2]
        if c in IDENT_START:
            end = _scan_chain(text, i)
            tok = _name_token(text[i:end], i + 1)
        elif c in DIGITS:
            tok = _number_token(text, i, i)
        elif c == "-" and i + 1 < len(text) and text[i + 1] in DIGITS:
            tok = _number_token(text, i, i + 1)
        elif c == '"':
            tok = _string_token(text, i)
        elif pair in _TWO_CHAR:
            tok = _Token(_TWO_CHAR[pair], pair, i + 1)
        elif c in _ONE_CHAR:
            tok = _Token(_ONE_CHAR[c], c, i + 1)
        else:
            hint = _HINTS.get(c, "")
            message = f"unexpected character {chars.show_char(c)}" + (f"; {hint}" if hint else "")
            tok = _Token("error", c, i + 1, message)
        tokens.append(tok)
        if tok.kind == "error":
            return tokens
        i += len(tok.text)


def _name_token(word: str, col: int) -> _Token:
    if "." in word or "->" in word:
        return _chain_token(word, col)
    problem = name_problem(word)
    if problem is not None:
        return _Token("error", word, col, problem)
    if len(word) > FETCH_LABEL_MAX and canonical_name(word) is None:
        return _Token("error", word, col, f"name longer than {FETCH_LABEL_MAX} characters (labels are at most {FETCH_LABEL_MAX})")
    return _Token("name", word, col, canonical_name(word) or word)


def _chain_token(text: str, col: int) -> _Token:
    """A parameter's member chain, in its canonical spelling (what the
    fetch of the same text is called: `args.count` -> `count`)."""
    from ktui.lang.grammar import Scanner, scan_fetch  # grammar imports this module's neighbours

    sc = Scanner(text, "name")
    try:
        fetch, _span = scan_fetch(sc)
    except SpecError as err:
        return _Token("error", text, col + (err.col or 1) - 1, err.message)
    if not sc.at_end() or fetch.type is not None or fetch.label is not None:
        return _Token("error", text, col, f'"{text}" is not a name')
    if len(str(fetch.expr)) > 4 * FETCH_LABEL_MAX:
        return _Token("error", text, col, "name too long")
    return _Token("name", text, col, str(fetch.expr))


# ---------------------------------------------------------------- parser


@dataclass(frozen=True)
class CompareColumns:
    """Where one comparison's parts are in the text, 1-based."""

    left: int
    op: int
    right: int


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.pos = 0
        self.depth = 0
        self.columns: list[CompareColumns] = []

    def peek(self) -> _Token:
        tok = self.tokens[self.pos]
        if tok.kind == "error":
            raise SpecError(str(tok.value), col=tok.col)
        return tok

    def take(self) -> _Token:
        tok = self.peek()
        self.pos += 1
        return tok

    def parse(self) -> FilterExpr:
        if self.peek().kind == "end":
            raise SpecError('empty filter; write a condition, e.g. a3 > 4096 && comm == "dd"', col=1)
        expr = self.or_expr()
        tok = self.peek()
        if tok.kind != "end":
            raise SpecError(f"unexpected {_describe(tok)}; expected && or || or end of filter", col=tok.col)
        return expr

    def or_expr(self) -> FilterExpr:
        expr = self.and_expr()
        while self.peek().kind == "||":
            self.take()
            expr = Or(expr, self.and_expr())
        return expr

    def and_expr(self) -> FilterExpr:
        expr = self.unary()
        while self.peek().kind == "&&":
            self.take()
            expr = And(expr, self.unary())
        return expr

    def enter(self, tok: _Token) -> None:
        # Bounded so hostile text cannot exhaust the Python stack.
        self.depth += 1
        if self.depth > FILTER_MAX_DEPTH:
            raise SpecError(f"filter nests deeper than {FILTER_MAX_DEPTH} levels", col=tok.col)

    def unary(self) -> FilterExpr:
        tok = self.peek()
        if tok.kind == "!":
            self.take()
            self.enter(tok)
            if self.peek().kind not in ("!", "("):
                raise SpecError("! applies to a condition in parentheses, e.g. !(a3 == 0)", col=tok.col)
            operand = self.unary()
            self.depth -= 1
            return Not(operand)
        if tok.kind == "(":
            self.take()
            self.enter(tok)
            expr = self.or_expr()
            close = self.peek()
            if close.kind != ")":
                raise SpecError(
                    f"expected ) to close the ( at column {tok.col}, got {_describe(close)}", col=close.col
                )
            self.take()
            self.depth -= 1
            return expr
        return self.comparison()

    def operand(self, tok: _Token, what: str) -> Operand:
        if tok.kind == "name":
            return Field(str(tok.value))
        if tok.kind == "int":
            return IntLit(int(tok.value), duration_unit(tok.text))  # type: ignore[arg-type]
        if tok.kind == "str":
            return StrLit(str(tok.value))
        raise SpecError(f"expected {what}, got {_describe(tok)}", col=tok.col)

    def comparison(self) -> Compare:
        left_tok = self.take()
        left = self.operand(left_tok, 'a condition (e.g. a3 > 4096 or comm == "dd")')
        op_tok = self.peek()
        if op_tok.kind != "op":
            if isinstance(left, Field):
                raise SpecError(
                    f'"{left_tok.text}" alone is not a condition; compare it, e.g. {left.name} != 0',
                    col=left_tok.col,
                )
            raise SpecError(
                f"expected a comparison ({' '.join(COMPARE_OPS)}) after {left_tok.text}, got {_describe(op_tok)}",
                col=op_tok.col,
            )
        self.take()
        right_tok = self.take()
        right = self.operand(right_tok, f"a name or a value after {op_tok.text}")
        if not isinstance(left, Field) and not isinstance(right, Field):
            raise SpecError("compares two constants; one side must be a name such as a3 or comm", col=left_tok.col)
        for lit, lit_tok, other in ((left, left_tok, right), (right, right_tok, left)):
            # text the kernel compares fits its 64-byte words; a cgroup's path
            # is compared as its directory's id (lang.cgroups), so it may be long
            if isinstance(lit, StrLit) and len(lit.value) > STRING_LITERAL_MAX and other != Field("cgroup"):
                raise SpecError(f"string longer than {STRING_LITERAL_MAX} characters", col=lit_tok.col)
        if len(self.columns) == FILTER_MAX_COMPARES:
            raise SpecError(f"filter has more than {FILTER_MAX_COMPARES} comparisons", col=left_tok.col)
        self.columns.append(CompareColumns(left_tok.col, op_tok.col, right_tok.col))
        return Compare(op_tok.text, left, right)


def _check_text(text: object) -> str:
    if not isinstance(text, str):
        raise SpecError(f"a filter must be text, got {type(text).__name__}")
    if len(text) > FILTER_MAX:
        raise SpecError(f"filter longer than {FILTER_MAX} characters", col=FILTER_MAX + 1)
    chars.refuse(text, "in a filter", allowed="\t\r\n")  # before the grammar: named as what it is
    return text


def parse_filter_with_columns(text: str) -> tuple[FilterExpr, tuple[CompareColumns, ...]]:
    """`parse_filter`, plus where each comparison is, in `comparisons()`
    order, so later checks against a probe can point at the right column."""
    parser = _Parser(_check_text(text))
    expr = parser.parse()
    return expr, tuple(parser.columns)


def parse_filter(text: str) -> FilterExpr:
    """Parse filter text; any problem is a SpecError with a 1-based column."""
    return parse_filter_with_columns(text)[0]


def comparisons(expr: FilterExpr) -> list[Compare]:
    """Every comparison, left to right as printed (and as parsed)."""
    found: list[Compare] = []
    stack: list[object] = [expr]
    while stack:  # iterative: a hand-built tree may be arbitrarily deep
        node = stack.pop()
        if isinstance(node, Compare):
            found.append(node)
        elif isinstance(node, (And, Or)):
            stack.extend((node.right, node.left))
        elif isinstance(node, Not):
            stack.append(node.operand)
    return found


def tree_depth(expr: object) -> int:
    """Nesting depth of a filter tree, computed without recursion."""
    deepest = 0
    stack: list[tuple[object, int]] = [(expr, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(node, (And, Or)):
            stack.extend(((node.left, depth + 1), (node.right, depth + 1)))
        elif isinstance(node, Not):
            stack.append((node.operand, depth + 1))
    return deepest
