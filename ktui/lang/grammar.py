"""The syntax of the compact probe language: a scanner that keeps a
1-based column for every error, and the parse of
`[LABEL=]TARGET:KIND[:FETCH,...]` into a `model.Probe` as written (semantic
rules are in `checks`).

A target `CATEGORY/NAME` (tracefs' own path, `syscalls/sys_enter_openat`)
is a tracepoint, and takes kind `t` (and only it does). A tracepoint has
no registers: in its fetches the bare pt_regs words (`flags`, `ip`, `di`...)
are field names (`flags` is a field of sys_enter_openat), and a1..a6,
retval and the prefixed register spellings (`rdi`, `eflags`) are refused.

A target that starts with `/` is a function of a user binary or library
(a uprobe): `PATH:SYMBOL[+OFF]` or `PATH:0xADDR`. The path runs to the
first `:`, so a path holding one cannot be written (refused, not misread),
nor one holding a blank (clauses and ` if ` are split at blanks). It takes
kind c or r.

`PATH:PROVIDER:NAME:usdt` is a USDT probe point of that file (its
`.note.stapsdt`): a third word where the kind would be (not c, r, t or
usdt) makes the target one. Its values are its arguments a1..a6, as the
note places them (`UsdtArg`, bound by `ktui.kernel.symbols.usdt`), the
builtins and `+OFF(aN)` reads; registers, retval and names are refused.

A kernel function or a tracepoint's CATEGORY/NAME may be an fnmatch
pattern (`tcp_*`, `syscalls/sys_enter_*`, `tcp_v[46]_*`): one probe on
every match (`lang.wildcards`). Not with `+OFF` (a different place in
each function), among alternatives (they pick one function, a pattern
takes all), nor in a user binary (`ktui list PATH:GLOB` lists its
functions); each refused in one line at its column.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ktui.lang import chars, names
from ktui.lang.wildcards import glob_problem, only_kernel
from ktui.lang.limits import (
    DEREF_MAX,
    FETCH_LABEL_MAX,
    MAX_STEPS,
    MAX_DEREF,
    PROBE_LABEL_MAX,
    SPEC_MAX,
    SYMBOL_MAX,
    U64_MAX,
    USER_PATH_MAX,
    USER_SYMBOL_MAX,
)
from ktui.lang.model import (
    BUILTINS,
    FETCH_TYPES,
    REGISTERS,
    Arg,
    Builtin,
    Deref,
    Fetch,
    FetchExpr,
    Kind,
    Named,
    Probe,
    Reg,
    RetVal,
    SpecError,
    StartValue,
    Step,
    Target,
    UsdtArg,
)
from ktui.lang.numbers import parse_int

_FETCH_HELP = ("a parameter by name (count, file->f_pos), a1..a6, retval, comm, pid, tid, cpu, "
               "a register (rdi, rsi, ...) or +OFFSET(FETCH)")
_SYMBOL_CHARS = names.IDENT_CHARS | {"."}
_GLOB_START = frozenset("*?[")  # model.WILDCARD_CHARS: a kernel name may start with one
TRACEPOINT_EXAMPLE = "syscalls/sys_enter_openat:t"
ALTERNATIVES_EXAMPLE = "__kmalloc_noprof|__kmalloc:c"
ALTERNATIVES_MAX = 8  # names in `a|b|...`: a few kernel generations' spellings
USER_EXAMPLE = "/usr/lib/x86_64-linux-gnu/libc.so.6:malloc:c"
USDT_EXAMPLE = "/tmp/prog:ktui:tick:usdt:a1"
USDT_VALUES = ("a USDT probe reads its arguments a1..a6 (its note says where each is), comm, pid, tid, "
               "cpu and +OFFSET(aN): no registers, retval or names")
KIND_WORDS = ("c", "r", "t", "usdt")
TRACEPOINT_VALUES = ("a tracepoint's values are its fields by name (e.g. filename, flags): "
                     "a1..a6 and registers are for kernel functions")
# Words that spell a register in a kprobe but are ordinary field names in a
# tracepoint (`flags` of sys_enter_openat, `ip` of the irq events): the
# pt_regs names themselves, never the prefixed spellings (rdi, eflags).
FIELD_WORDS = frozenset(REGISTERS)


# ---------------------------------------------------------------- spans


@dataclass
class FetchSpan:
    """Columns (1-based) of one fetch's parts, for error messages."""

    start: int
    label: int | None = None
    exprs: list[int] = field(default_factory=list)  # one per nesting depth
    type: int | None = None


@dataclass
class SpecSpan:
    label: int | None = None
    target: int = 1
    offset: int | None = None
    symbol: int | None = None  # a user probe's SYMBOL or 0xADDR, past its PATH:
    fetches: list[FetchSpan] = field(default_factory=list)


# ---------------------------------------------------------------- scanner


class Scanner:
    """A cursor over the text; `what` names it in "got end of ..." messages."""

    def __init__(self, text: str, what: str, *, tracepoint: bool = False, usdt: bool = False) -> None:
        self.text = text
        self.pos = 0
        self.what = what
        self.tracepoint = tracepoint  # names are a tracepoint's fields (`_leaf`)
        self.usdt = usdt  # a1..a6 are a USDT probe point's arguments (`_leaf`)

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
        return chars.show_char(self.peek()) if not self.at_end() else f"end of {self.what}"

    def word(self, chars: frozenset[str] = names.IDENT_CHARS) -> str:
        """An identifier at the cursor (empty if there is none)."""
        start = self.pos
        if self.peek() and self.peek() in names.IDENT_START:
            self.pos += 1
            while self.peek() and self.peek() in chars:
                self.pos += 1
        return self.text[start : self.pos]

    def number(self, limit: int, what: str) -> int:
        """A decimal or 0x-hex number no larger than `limit`."""
        start = self.pos
        while self.peek() and self.peek() in names.IDENT_CHARS:
            self.pos += 1
        digits = self.text[start : self.pos]
        value = parse_int(digits)
        if value is None:
            raise self.error(f'bad {what} "{digits}": write it in decimal or 0x hex', start)
        if value > limit:
            raise self.error(f"{what} {digits} is too large (at most {limit:#x})", start)
        return value


def check_text(text: object, what: str) -> str:
    if not isinstance(text, str):
        raise SpecError(f"a {what} must be text, got {type(text).__name__}")
    if len(text) > SPEC_MAX:
        raise SpecError(f"{what} longer than {SPEC_MAX} characters", col=SPEC_MAX + 1)
    chars.refuse(text, f"in a {what}", allowed="\t")  # before the grammar: named as what it is
    if not text.strip(" \t"):
        example = {"spec": "vfs_read:c:a3", "fetch": "a3 or fname=+0(a2):string", "target": "vfs_read"}[what]
        raise SpecError(f"empty {what}; write e.g. {example}", col=1)
    return text


def expect_end(sc: Scanner, after: str) -> None:
    sc.skip_ws()
    if not sc.at_end():
        raise sc.error(f"unexpected {sc.here()} after the {after}")


# ---------------------------------------------------------------- target


def scan_target(sc: Scanner, span: SpecSpan) -> Target:
    span.target = sc.pos + 1
    c = sc.peek()
    if c == "/":
        return _user_target(sc, span)
    if c and c in "0123456789" and _tracefs_word(sc.text, sc.pos).endswith("/"):
        start = sc.pos
        sc.pos += len(_tracefs_word(sc.text, sc.pos)) - 1
        return _tracepoint(sc, sc.text[start : sc.pos], start)  # `9p/9p_client_req`
    if c and c in "0123456789":
        return Target(address=_hex_address(sc, "an address is written in hex, e.g. 0xffffffff81234560"))
    if not c or (c not in names.IDENT_START and c not in _GLOB_START):
        raise sc.error(f"expected a kernel symbol, a 0x address or a /path/to/binary:function, "
                       f"got {sc.here()}")
    start = sc.pos
    symbol = _kernel_name(sc, _SYMBOL_CHARS)
    if len(symbol) > SYMBOL_MAX:
        raise sc.error(f"symbol longer than {SYMBOL_MAX} characters", start)
    if sc.peek() == "/":
        return _tracepoint(sc, symbol, start)
    if sc.peek() == "|":
        if _is_glob(symbol):
            raise sc.error(_GLOB_ALTERNATIVE, start)
        return _alternatives(sc, symbol)
    if _is_glob(symbol) and sc.peek() in ("+", "-"):
        raise sc.error(f"a pattern has no offset: {symbol} takes whole functions (an offset is a "
                       "different place in each)")
    return Target(symbol=symbol, offset=_symbol_offset(sc, span, symbol))


_GLOB_ALTERNATIVE = ("a pattern cannot be an alternative: alternatives pick the one function this "
                     "kernel has, a pattern takes every match (one pattern per probe)")


def _is_glob(name: str) -> bool:
    return any(c in _GLOB_START for c in name)


def _kernel_name(sc: Scanner, word_chars: frozenset[str]) -> str:
    """A kernel function's or tracefs name at the cursor, which may be an
    fnmatch pattern: `*`, `?` and `[...]` among its letters (a `[` is
    closed on the name, and holds letters, digits, `_`, `-`, `!` or `^`)."""
    start = sc.pos
    while sc.peek() and (sc.peek() in word_chars or sc.peek() in "*?["):
        if sc.peek() == "[":
            problem, end = glob_problem(sc.text, sc.pos)
            if problem:
                raise sc.error(problem, end)
            sc.pos = end
            continue
        sc.pos += 1
    return sc.text[start : sc.pos]


def _hex_address(sc: Scanner, how_written: str) -> int:
    """A 0x address at the cursor, a kernel's or a file's; `how_written`
    refuses one in decimal."""
    at = sc.pos
    address = sc.number(U64_MAX, "address")
    if sc.text[at : at + 2] not in ("0x", "0X"):
        raise sc.error(how_written, at)
    if address == 0:
        raise sc.error("address 0 cannot be probed", at)
    return address


def _alternatives(sc: Scanner, first: str) -> Target:
    """`a|b|c` after its first name: kernel functions of which the first
    the kernel has is probed (`lang.alternatives`). No offset: the same
    offset in two functions is not the same place."""
    found = [first]
    while sc.peek() == "|":
        sc.pos += 1
        at = sc.pos
        if sc.peek() and sc.peek() in _GLOB_START:
            raise sc.error(_GLOB_ALTERNATIVE)
        if not sc.peek() or sc.peek() not in names.IDENT_START:
            raise sc.error(f"expected a kernel function after |, e.g. {ALTERNATIVES_EXAMPLE}, got {sc.here()}")
        name = sc.word(frozenset(_SYMBOL_CHARS))
        if sc.peek() and sc.peek() in _GLOB_START:
            raise sc.error(_GLOB_ALTERNATIVE, at)
        if len(name) > SYMBOL_MAX:
            raise sc.error(f"symbol longer than {SYMBOL_MAX} characters", at)
        if name in found:
            raise sc.error(f"{name} is already an alternative of this probe", at)
        found.append(name)
        if len(found) > ALTERNATIVES_MAX:
            raise sc.error(f"a probe names at most {ALTERNATIVES_MAX} alternatives", at)
    if sc.peek() in ("+", "-", "/"):
        raise sc.error("alternatives are whole kernel functions: no offset, no tracepoint")
    return Target(symbol=first, alternatives=tuple(found))


def _user_target(sc: Scanner, span: SpecSpan) -> Target:
    """`PATH:SYMBOL[+OFF]` or `PATH:0xADDR`, at the `/` that starts PATH."""
    start = sc.pos
    while sc.peek() and sc.peek() not in ": \t":
        sc.pos += 1
    path = sc.text[start : sc.pos]
    if len(path) > USER_PATH_MAX:
        raise sc.error(f"path longer than {USER_PATH_MAX} characters", start)
    if sc.peek() in (" ", "\t"):
        raise sc.error("a path with a blank in it cannot be written in a spec (blanks end the spec): "
                       "probe it through a symlink without one")
    if sc.peek() != ":":
        raise sc.error(f"expected :FUNCTION or :0xADDRESS after the path, e.g. {USER_EXAMPLE}, "
                       f"got {sc.here()}")
    sc.pos += 1
    end = sc.pos
    while end < len(sc.text) and sc.text[end] not in ": \t":
        end += 1
    if "/" in sc.text[sc.pos : end]:
        raise sc.error("a path with ':' in it cannot be probed: ':' ends the path (PATH:FUNCTION:c)", start)
    span.symbol = sc.pos + 1
    c = sc.peek()
    if c and c in "0123456789":
        return Target(path=path, address=_hex_address(
            sc, "an address in a file is written in hex, as nm and objdump print it (e.g. 0x1139)"))
    if c and c in _GLOB_START:
        raise sc.error(only_kernel(path, _glob_text(sc)))
    if not c or c not in names.IDENT_START:
        raise sc.error(f"expected a function name or a 0x address after the path, e.g. {USER_EXAMPLE}, "
                       f"got {sc.here()}")
    at = sc.pos
    symbol = sc.word(frozenset(_SYMBOL_CHARS))
    if sc.peek() and sc.peek() in _GLOB_START:
        if _names_usdt(sc):
            raise sc.error(only_kernel(path, "", usdt=True), at)
        sc.pos = at
        raise sc.error(only_kernel(path, _glob_text(sc)), at)
    if len(symbol) > USER_SYMBOL_MAX:
        raise sc.error(f"function name longer than {USER_SYMBOL_MAX} characters", at)
    if sc.peek() == ":" and _names_usdt(sc) and _is_glob(sc.text[sc.pos + 1 :].split(":")[0]):
        raise sc.error(only_kernel(path, "", usdt=True), sc.pos + 1)  # PROVIDER:NA*:usdt
    if _at_usdt_name(sc):
        return _usdt_target(sc, path, symbol, at)
    return Target(path=path, symbol=symbol, offset=_symbol_offset(sc, span, symbol))


def _glob_text(sc: Scanner) -> str:
    """The pattern at the cursor in a user target, as written (to the next `:`)."""
    end = sc.text.find(":", sc.pos)
    return sc.text[sc.pos : end if end >= 0 else len(sc.text)]


def _names_usdt(sc: Scanner) -> bool:
    """Whether PROVIDER:NAME:usdt goes on from the cursor (inside PROVIDER)."""
    parts = sc.text[sc.pos :].split(":")
    return len(parts) > 2 and parts[2].split(" ")[0] == "usdt"


def _at_usdt_name(sc: Scanner) -> bool:
    """Whether `:WORD` follows, WORD no kind: PATH:PROVIDER:NAME, a USDT probe."""
    if sc.peek() != ":":
        return False
    end = sc.pos + 1
    while end < len(sc.text) and sc.text[end] in names.IDENT_CHARS:
        end += 1
    word = sc.text[sc.pos + 1 : end]
    return bool(word) and word[0] in names.IDENT_START and word not in KIND_WORDS


def _usdt_target(sc: Scanner, path: str, provider: str, at: int) -> Target:
    """`:NAME` after PATH:PROVIDER, the cursor at its `:`."""
    if "." in provider:
        raise sc.error(f"a USDT provider is letters, digits and _, e.g. {USDT_EXAMPLE}",
                       at + provider.index("."))
    sc.pos += 1
    name = sc.word()
    if sc.peek() == ".":
        raise sc.error(f"a USDT probe's name is letters, digits and _, e.g. {USDT_EXAMPLE}")
    if sc.peek() in ("+", "-"):
        raise sc.error("a USDT probe point has no offset: it is one place (or several) its note gives")
    if len(provider) + len(name) + 1 > USER_SYMBOL_MAX:
        raise sc.error(f"USDT provider and name longer than {USER_SYMBOL_MAX} characters", at)
    return Target(path=path, usdt=f"{provider}:{name}")


def _symbol_offset(sc: Scanner, span: SpecSpan, symbol: str) -> int:
    """`+OFF` after a symbol (0 when none is written)."""
    if sc.peek() == "+":
        sc.pos += 1
        span.offset = sc.pos + 1
        if not sc.peek() or sc.peek() not in "0123456789":
            raise sc.error(f"expected an offset after +, e.g. {symbol}+0x1c, got {sc.here()}")
        return sc.number(U64_MAX, "offset")
    if sc.peek() == "-":
        raise sc.error(f"a symbol offset is added, e.g. {symbol}+0x1c")
    return 0


def _tracefs_word(text: str, pos: int) -> str:
    """A tracefs name at `pos` (letters, digits, _: it may start with a
    digit, as the 9p category does; `*` and `?` in a pattern) and the "/"
    after it, if one is. A `[...]` is scanned by `_kernel_name`."""
    end = pos
    while end < len(text) and (text[end] in names.IDENT_CHARS or text[end] in "*?"):
        end += 1
    return text[pos:end] + ("/" if text[end : end + 1] == "/" else "")


def _tracepoint(sc: Scanner, category: str, start: int) -> Target:
    """`CATEGORY/NAME` after its category: tracefs names are letters,
    digits and _, with no offset (a tracepoint is one place)."""
    if "." in category:
        raise sc.error("a tracepoint's category is letters, digits and _, e.g. "
                       f"{TRACEPOINT_EXAMPLE}", start + category.index("."))
    sc.pos += 1
    name_at = sc.pos
    name = _kernel_name(sc, names.IDENT_CHARS)
    if not name:
        raise sc.error(f"expected the event's name after {category}/, e.g. {TRACEPOINT_EXAMPLE}, "
                       f"got {sc.here()}")
    if sc.peek() in (".", "/"):
        raise sc.error(f"a tracepoint is CATEGORY/NAME, names of letters, digits and _, e.g. "
                       f"{TRACEPOINT_EXAMPLE}; got {sc.here()}")
    if sc.peek() in ("+", "-"):
        raise sc.error("a tracepoint has no offset: it fires at one place")
    if sc.pos - start > SYMBOL_MAX:
        raise sc.error(f"tracepoint longer than {SYMBOL_MAX} characters", name_at)
    return Target(tracepoint=f"{category}/{name}")


# ---------------------------------------------------------------- fetches


def _leaf(word: str, pos: int, sc: Scanner) -> FetchExpr:
    """A name in a fetch: a predefined one (argument, register, retval,
    builtin) or a parameter by name with its member chain."""
    name = names.canonical_name(word)
    if sc.usdt:
        return _usdt_leaf(word, name, pos, sc)
    if sc.tracepoint and name is not None and name not in BUILTINS:
        if word not in FIELD_WORDS:
            raise sc.error(f"{word}: {TRACEPOINT_VALUES}", pos)
        name = None  # `flags`: a field (it prints as args.flags)
    elif sc.tracepoint and names.name_problem(word) is not None:
        raise sc.error(f"{word}: {TRACEPOINT_VALUES}", pos)
    if name is None:
        problem = names.name_problem(word)
        if problem is not None:
            raise sc.error(problem, pos)
        return _named(word, pos, sc)
    if _at_step(sc):
        raise sc.error(f"{name} is a value, not a name with members: read memory with "
                       f"+OFFSET({name}), or name the parameter (file->f_pos)", sc.pos)
    if name == "retval":
        return RetVal()
    if name in BUILTINS:
        return Builtin(name)
    if name in names.ARG_NAMES:
        return Arg(int(name[1:]))
    return Reg(names.REGISTER_SPELLINGS[name])


def _usdt_leaf(word: str, name: str | None, pos: int, sc: Scanner) -> FetchExpr:
    """A name in a USDT probe's fetch: an argument a1..a6 or a builtin."""
    problem = names.name_problem(word)
    if problem is not None:
        raise sc.error(problem, pos)
    if name is None or not (name in BUILTINS or name in names.ARG_NAMES):
        raise sc.error(f"{word}: {USDT_VALUES}", pos)
    if _at_step(sc):
        raise sc.error(f"{name} is a value, not a name with members: read memory with +OFFSET({name})",
                       sc.pos)
    return Builtin(name) if name in BUILTINS else UsdtArg(int(name[1:]))


def _at_step(sc: Scanner) -> bool:
    rest = sc.text[sc.pos : sc.pos + 2]
    return rest == "->" or rest[:1] == "."


def _named(word: str, pos: int, sc: Scanner) -> FetchExpr:
    """`count`, `args.flags`, `file->f_path.dentry->d_name.name`."""
    param = word
    if word == "args" and sc.peek() == ".":
        sc.pos += 1
        param_pos = sc.pos
        param = sc.word()
        if not param:
            raise sc.error(f"expected a parameter name after args., got {sc.here()}")
        pos = param_pos
    if len(param) > FETCH_LABEL_MAX:
        raise sc.error(f"name longer than {FETCH_LABEL_MAX} characters", pos)
    steps: list[Step] = []
    while _at_step(sc):
        op = "->" if sc.peek() == "-" else "."
        sc.pos += len(op)
        member_pos = sc.pos
        member = sc.word()
        if not member:
            raise sc.error(f"expected a member name after {op}, got {sc.here()}")
        if len(member) > FETCH_LABEL_MAX:
            raise sc.error(f"member name longer than {FETCH_LABEL_MAX} characters", member_pos)
        steps.append(Step(op, member))
        if len(steps) > MAX_STEPS:
            raise sc.error(f"a member chain has at most {MAX_STEPS} steps", member_pos)
    return Named(param, tuple(steps))


def _expr(sc: Scanner, cols: list[int], depth: int) -> FetchExpr:
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
    if word == "start" and sc.peek() == ".":
        return _start_value(sc, cols, depth, start)
    if word:
        return _leaf(word, start, sc)
    if c in ("%", "$"):
        # Kernel kprobe_events spellings (%di, $arg1, $retval): say ours.
        sc.pos += 1
        ours = names.canonical_name(sc.word())
        if ours is not None:
            raise sc.error(f"write {ours} without the {c}", start)
        raise sc.error(f"write fetches without {c}: {_FETCH_HELP}", start)
    raise sc.error(f"expected a fetch ({_FETCH_HELP}), got {sc.here()}")


def _start_value(sc: Scanner, cols: list[int], depth: int, at: int) -> StartValue:
    """`start.EXPR`: a value a span's START read, at its end (lang.spans).
    EXPR is read as a kernel function's fetch reads it, whatever the end
    is (its own kind is the start's: lang.spans reads it again as that);
    a parameter named start with a member is `args.start.x`."""
    if depth:
        raise sc.error("start.X is a value the span's start read, not an address at its end: "
                       "read memory at the start (start.+8(a1))", at)
    sc.pos += 1
    if sc.at_end() or sc.peek() in " \t,:":
        raise sc.error(f"expected a value of the span's start after start. (start.a3, start.count), "
                       f"got {sc.here()}")
    modes = sc.tracepoint, sc.usdt
    sc.tracepoint = sc.usdt = False
    try:
        inner = _expr(sc, cols, depth)
    finally:
        sc.tracepoint, sc.usdt = modes
    if isinstance(inner, StartValue):
        raise sc.error("start.start.X: a span has one start", at)
    return StartValue(inner)


def scan_fetch(sc: Scanner) -> tuple[Fetch, FetchSpan]:
    span = FetchSpan(start=sc.pos + 1)
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
            hint = names.suggest(type_, FETCH_TYPES) if type_ else ""
            raise sc.error(f"unknown type {got};{hint} types are {', '.join(FETCH_TYPES)}", span.type - 1)
    return Fetch(expr=expr, type=type_, label=label), span


# ---------------------------------------------------------------- spec


def parse_raw(text: str) -> tuple[Probe, SpecSpan]:
    """Syntax only: the probe as written and where its parts are."""
    sc = Scanner(text, "spec")
    span = SpecSpan()
    sc.skip_ws()
    label = scan_probe_label(sc, span)
    target = scan_target(sc, span)
    sc.skip_ws()
    if sc.peek() == "=":
        raise sc.error("a probe label is a word (letters, digits, _), e.g. reads=vfs_read:c")
    if sc.peek() != ":":
        wanted = ":t" if target.tracepoint is not None else ":usdt" if target.usdt else ":c or :r"
        if target.is_user and sc.at_end() and target.symbol == "usdt" and not target.offset:
            raise sc.error(f"a USDT probe names its provider and probe: PATH:PROVIDER:NAME:usdt, "
                           f"e.g. {USDT_EXAMPLE}", span.symbol - 1 if span.symbol else None)
        if target.is_user and sc.at_end() and target.symbol in ("c", "r") and not target.offset:
            raise sc.error(f"expected {wanted} after the target, got end of spec; a user probe names "
                           f"its function: PATH:FUNCTION:{target.symbol}")
        raise sc.error(f"expected {wanted} after the target, got {sc.here()}")
    sc.pos += 1
    sc.skip_ws()
    kind = _kind(sc, target, span.target - 1)
    sc.tracepoint = kind is Kind.TRACEPOINT
    sc.usdt = kind is Kind.USDT
    sc.skip_ws()
    fetches = []
    if sc.peek() == ":":
        sc.pos += 1
        while True:
            sc.skip_ws()
            fetch, fetch_span = scan_fetch(sc)
            fetches.append(fetch)
            span.fetches.append(fetch_span)
            sc.skip_ws()
            if sc.peek() != ",":
                break
            sc.pos += 1
    if not sc.at_end():
        expected = ", between fetches" if fetches else ": before the fetches"
        raise sc.error(f"unexpected {sc.here()}; expected {expected} or end of spec")
    return Probe(target=target, kind=kind, fetches=tuple(fetches), label=label), span


def _kind(sc: Scanner, target: Target, target_at: int) -> Kind:
    """`c`, `r`, `t` or `usdt`; `t` with a tracepoint target and only
    there, `usdt` with a USDT target (PATH:PROVIDER:NAME) and only there."""
    kind_pos = sc.pos
    kind_word = sc.word()
    if kind_word not in KIND_WORDS:
        got = f'"{kind_word}"' if kind_word else sc.here()
        if kind_word and sc.text[sc.pos : sc.pos + 5] == ":usdt" and not target.is_user:
            raise sc.error(f"a USDT probe is in a file: /PATH:PROVIDER:NAME:usdt, e.g. {USDT_EXAMPLE}",
                           target_at)
        if target.usdt is not None:
            raise sc.error(f"a USDT probe point (PATH:PROVIDER:NAME) takes kind usdt, got {got}", kind_pos)
        raise sc.error(f"kind must be c, r or t, got {got} (c = call, r = return, t = tracepoint)",
                       kind_pos)
    kind = Kind(kind_word)
    if target.usdt is not None and kind is not Kind.USDT:
        raise sc.error(f"a USDT probe point (PATH:PROVIDER:NAME) takes kind usdt, got {kind_word}; "
                       "it has no return", kind_pos)
    if kind is Kind.USDT and target.usdt is None:
        if target.is_user:
            raise sc.error(f"a USDT probe names its provider and probe: PATH:PROVIDER:NAME:usdt, "
                           f"e.g. {USDT_EXAMPLE}", kind_pos)
        raise sc.error(f"kind usdt is for a USDT probe point of a user binary: /PATH:PROVIDER:NAME:usdt, "
                       f"e.g. {USDT_EXAMPLE}", target_at)
    if target.is_user and kind is Kind.TRACEPOINT:
        raise sc.error("kind t is for a tracepoint CATEGORY/NAME; a user function (PATH:FUNCTION) "
                       "takes c (call) or r (return)", kind_pos)
    if target.tracepoint is not None and kind is not Kind.TRACEPOINT:
        raise sc.error(f"a tracepoint (CATEGORY/NAME) takes kind t, got {kind_word}", kind_pos)
    if target.tracepoint is None and kind is Kind.TRACEPOINT:
        raise sc.error(f"kind t is for a tracepoint CATEGORY/NAME, e.g. {TRACEPOINT_EXAMPLE}", kind_pos)
    return kind


def scan_probe_label(sc: Scanner, span: SpecSpan) -> str | None:
    """`reads=` before the target, as perf probe's `EVENT=FUNC`: the probe's
    label (a word), or None when the spec starts with its target."""
    start = sc.pos
    word = sc.word()
    sc.skip_ws()
    if not word or sc.peek() != "=":
        sc.pos = start  # not a label: scan the word again as the target
        return None
    if len(word) > PROBE_LABEL_MAX:
        raise sc.error(f"label longer than {PROBE_LABEL_MAX} characters", start)
    span.label = start + 1
    sc.pos += 1
    sc.skip_ws()
    return word
