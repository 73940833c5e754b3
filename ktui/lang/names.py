"""What a name means in the probe language, and what a filter name is in
one probe.

The vocabulary (a1..a6, retval, comm/pid/tid/cpu, the registers and their
accepted spellings) is shared by fetches and filters. A name in a filter
is resolved against its probe by `resolve`, and by nothing else: the
checks that refuse a bad filter (`checks`) and the code generator that
turns a good one into C (`kernel.codegen.fetch`, `.uses`) used to resolve
names each their own way, and disagreed (a labelled comm fetch, `c=comm`,
passed the checks as a string and then failed in codegen as "not a string").

Resolution order: a fetch of that name (its label, or for an unlabelled
fetch its canonical spelling: `a3`, `rdi`, `comm`), then the predefined
names (retval in return probes only, comm, pid, tid, cpu, a1..a6, the
registers).

In a tracepoint a name is one of its fields (bound to the event's tracefs
format by `lang.bind`) or a builtin; a1..a6, retval and the registers are
refused, except `flags` and r8..r15, whose canonical spelling is a pt_regs
name that a field may carry (sys_enter_openat's `flags`): those are fields
there. Another field named like a register is written `args.NAME`.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ktui.lang.limits import ARG_COUNT
from ktui.lang.model import (
    BUILTINS,
    REGISTERS,
    STRING_TYPES,
    Arg,
    Builtin,
    Fetch,
    FetchExpr,
    Kind,
    Named,
    Probe,
    Reg,
    RetVal,
    SpecError,
    UsdtArg,
    reg_display,
)
from ktui.lang.numbers import DIGITS, parse_int

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
IDENT_START = frozenset(_LETTERS)
IDENT_CHARS = frozenset(_LETTERS) | DIGITS

# Every accepted spelling of a register -> its pt_regs field name.
REGISTER_SPELLINGS: dict[str, str] = {
    **{reg: reg for reg in REGISTERS},
    **{reg_display(reg): reg for reg in REGISTERS},
    "eflags": "flags",
}
# 32-bit names are refused rather than silently read as 64 bits.
_NARROW_REGISTERS: dict[str, str] = {
    **{"e" + reg: "r" + reg for reg in ("ax", "bx", "cx", "dx", "si", "di", "bp", "sp", "ip")},
    **{f"r{n}d": f"r{n}" for n in range(8, 16)},
}
ARG_NAMES = tuple(f"a{n}" for n in range(1, ARG_COUNT + 1))
# Canonical names a probe always has (retval only in return probes).
PREDEFINED = ARG_NAMES + ("retval",) + BUILTINS + tuple(reg_display(r) for r in REGISTERS)
FILTER_NAMES_HELP = "a fetch label, a1..a6, retval, comm, pid, tid, cpu, latency or a register"


def _arg_number(word: str) -> int | None:
    """`a3` / `arg3` -> 3 (any number, range checked by the caller)."""
    for prefix in ("arg", "a"):
        if word.startswith(prefix):
            digits = word[len(prefix):]
            if digits and all(c in DIGITS for c in digits):  # decimal only: a0x3 is no argument
                return parse_int(digits)
    return None


def canonical_name(word: str) -> str | None:
    """The canonical spelling of a predefined name, None for any other word.

    `arg3` -> `a3`, `di` -> `rdi`, `eflags` -> `flags`, `comm` -> `comm`.
    A register's canonical name is what an unlabelled register fetch is
    called (`str(Reg("di"))`), so filters and fetch names agree.
    """
    number = _arg_number(word)
    if number is not None:
        return f"a{number}" if 1 <= number <= ARG_COUNT else None
    if word == "retval" or word in BUILTINS:
        return word
    if word in REGISTER_SPELLINGS:
        return reg_display(REGISTER_SPELLINGS[word])
    return None


def name_problem(word: str) -> str | None:
    """Why a word that looks like a predefined name is not one, or None."""
    number = _arg_number(word)
    if number is not None and not 1 <= number <= ARG_COUNT:
        return f'there is no argument "{word}": arguments are a1..a6'
    if word in _NARROW_REGISTERS:
        wide = _NARROW_REGISTERS[word]
        return f'32-bit register names are not supported; use {wide}:u32 (or {wide}:s32)'
    return None


def is_reserved(word: str) -> bool:
    """True for words that cannot be labels: every predefined spelling."""
    return canonical_name(word) is not None or name_problem(word) is not None


def suggest(word: str, candidates) -> str:
    """` did you mean X?` for a close match, else an empty string."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" did you mean {close[0]}?" if close else ""


def predefined_expr(name: str) -> FetchExpr | None:
    """The value a canonical predefined name stands for (`a3` -> Arg(3),
    `rdi` -> Reg("di")), or None for any other word."""
    if name == "retval":
        return RetVal()
    if name in BUILTINS:
        return Builtin(name)
    if name in ARG_NAMES:
        return Arg(int(name[1:]))
    if name in REGISTER_SPELLINGS:
        return Reg(REGISTER_SPELLINGS[name])
    return None


# ---------------------------------------------------------------- in a probe


class UnknownName(SpecError):
    """A filter name that is neither a fetch of its probe nor predefined."""


@dataclass(frozen=True)
class Resolved:
    """What a filter name is in one probe."""

    name: str
    expr: FetchExpr  # the value (a fetch's own expression when it names a fetch)
    type: str  # its effective fetch type: "string" for comm, "s64" for retval, ...
    fetch_index: int | None = None  # the probe's fetch of that name (its value is in the record)
    deferred: bool = False  # maybe a parameter: the probe is not bound to BTF yet (`lang.bind`)

    @property
    def is_string(self) -> bool:
        return self.type in STRING_TYPES

    @property
    def is_comm(self) -> bool:
        return isinstance(self.expr, Builtin) and self.expr.name == "comm"


# `func` (a wildcard's function) is fetched and counted, not compared: the
# kernel holds the function's place among the members, not its name
FUNC_IN_FILTER = ("func: a filter on a wildcard's function is not read in the kernel: narrow the "
                  "pattern, or count(func)")
FUNC_NOT_WILDCARD = "func: the function a wildcard's hit came from; this probe has one target (no pattern)"


def resolve(probe: Probe, name: str) -> Resolved:
    """What `name` (canonical, as the filter parser leaves it) is in `probe`.

    Raises UnknownName for a name that is nothing here, and SpecError for
    retval in a call probe; neither has a column (the caller knows it)."""
    for index, fetch in enumerate(probe.fetches):
        if fetch.name == name:
            # A name fetched without a type has its type once bound (a
            # tracepoint's char array is text): checked again then.
            unbound = isinstance(fetch.expr, Named) and fetch.expr.binding is None and fetch.type is None
            return Resolved(name, fetch.expr, fetch.effective_type, index, deferred=unbound)
    if name.startswith("start."):  # a value of a span's start (lang.spans), typed as the start reads it
        from ktui.lang.spans import resolve_start_value  # spans imports filters, which imports this module

        return resolve_start_value(probe, name)
    expr = predefined_expr(name)
    if isinstance(expr, Builtin) and expr.name == "func":
        raise SpecError(FUNC_IN_FILTER)
    if isinstance(expr, Builtin) and expr.name == "latency" and not probe.timed:
        from ktui.lang.latency import NOT_TIMED  # it imports filters, which imports this module

        raise SpecError(NOT_TIMED)
    if probe.kind is Kind.USDT and expr is not None and not isinstance(expr, Builtin):
        return _usdt_argument(probe, name, expr)
    if probe.kind is Kind.TRACEPOINT and expr is not None and not isinstance(expr, Builtin):
        if name not in REGISTERS:
            from ktui.lang.grammar import TRACEPOINT_VALUES  # grammar imports this module

            field = " (a field named like a register: args.NAME)" if expr.__class__ is Reg else ""
            raise SpecError(f"{name}: {TRACEPOINT_VALUES}{field}")
        expr = None  # `flags`: a field of the event
    if probe.kind is Kind.TRACEPOINT and expr is None and _has_steps(name):
        raise SpecError(f"{name}: a tracepoint's field has no members to name (tracefs gives its "
                        "C type as text, not a BTF type)")
    if isinstance(expr, RetVal) and probe.kind is Kind.CALL:
        raise SpecError("retval exists only in return probes (kind r)")
    if expr is None:
        bound = (probe.bindings or {}).get(name)
        if bound is not None and bound.binding is not None and bound.binding.expr is not None:
            return Resolved(name, bound.binding.expr, bound.binding.type)
        if probe.kind is Kind.USDT:
            from ktui.lang.grammar import USDT_VALUES  # grammar imports this module

            raise UnknownName(f'unknown name "{name}": {USDT_VALUES} (or a fetch\'s label)')
        if probe.target.is_user:
            from ktui.lang.user_probes import USER_NO_BTF  # it imports model, as this module does

            raise UnknownName(f'unknown name "{name}": {USER_NO_BTF} (or a fetch\'s label)')
        from ktui.lang.wildcards import names_problem  # it imports model, as this module does

        if names_problem(probe):
            raise UnknownName(f'unknown name "{name}": {names_problem(probe)} (or a fetch\'s label)')
        if probe.bindings is None and may_be_parameter(probe):
            # Checked against the kernel's BTF when the probe is bound.
            return Resolved(name, Named(name), "u64", deferred=True)
        known = tuple(f.name for f in probe.fetches) + PREDEFINED
        raise UnknownName(f'unknown name "{name}";{suggest(name, known)} use {FILTER_NAMES_HELP}')
    return Resolved(name, expr, Fetch(expr).effective_type)  # typed as its bare fetch would be


def _usdt_argument(probe: Probe, name: str, expr: FetchExpr) -> Resolved:
    """a1..a6 in a USDT probe's filter: the probe point's argument, typed by
    its note once bound (`bind_usdt`: `probe.bindings`), deferred till then."""
    if not isinstance(expr, Arg):
        from ktui.lang.grammar import USDT_VALUES  # grammar imports this module

        raise SpecError(f"{name}: {USDT_VALUES}")
    bound = (probe.bindings or {}).get(name)
    if bound is not None and bound.binding is not None and bound.binding.expr is not None:
        return Resolved(name, bound.binding.expr, bound.binding.type)
    return Resolved(name, UsdtArg(expr.index), "u64", deferred=True)


def _has_steps(name: str) -> bool:
    """Whether a filter name is a member chain (`x->y`, `args.x.y`), not one name."""
    rest = name[len("args."):] if name.startswith("args.") else name
    return "->" in rest or "." in rest


def may_be_parameter(probe: Probe) -> bool:
    """Whether names can mean parameters here: at a function's entry (or
    its return), not at an offset into it or an address; or a tracepoint's
    fields (a pattern's too: bound alike in each event, lang.bind_wildcard).
    Never in a user function, which has no BTF here, nor in a function
    pattern, whose functions' parameters differ."""
    target = probe.target
    if target.tracepoint is not None:
        return True
    if target.is_user or target.is_wildcard:
        return False
    return target.symbol is not None and not target.offset and target.address is None
