"""A USDT argument's place, as its note writes it, turned into the
positional expression ktui's programs already read.

sys/sdt.h lets the compiler put each argument wherever it likes (an `nor`
asm constraint) and writes down where, in GNU assembler syntax with the
size before `@` (negative: signed):

    -4@%edi        a signed int in edi            -> Reg("di"):s32
    8@%rax         a u64 (or a pointer) in rax    -> Reg("ax"):u64
    -8@-24(%rbp)   a long at rbp-24, user memory  -> Deref(-24, Reg("bp")):s64
    4@$5           the constant 5                 -> Const(5):u32
    1@%sil         a u8 in sil                    -> Reg("si"):u8

A register of any width is read whole and cut to the argument's size by
its fetch type (the x86 sub-registers are the low bytes of the full one;
ah/bh/ch/dh, the second byte, are not read). What is not read here is
kept with the reason, not refused: a probe that does not read that
argument still runs. Not read: an index register (`8@(%rax,%rbx,8)`), a
`%rip`-relative place (the probe's address is not the program's at run
time here), a segment register (`%fs:` thread-local data), symbols.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ktui.lang.limits import DEREF_MAX
from ktui.lang.model import Const, Deref, FetchExpr, Reg

# Every GNU as spelling of an x86-64 integer register -> its pt_regs name.
_LEGACY = {"ax": "a", "bx": "b", "cx": "c", "dx": "d"}
REGISTER_NAMES: dict[str, str] = {}
for _reg, _letter in _LEGACY.items():
    REGISTER_NAMES.update({f"r{_reg}": _reg, f"e{_reg}": _reg, _reg: _reg, f"{_letter}l": _reg})
for _reg in ("si", "di", "bp", "sp"):
    REGISTER_NAMES.update({f"r{_reg}": _reg, f"e{_reg}": _reg, _reg: _reg, f"{_reg}l": _reg})
for _n in range(8, 16):
    REGISTER_NAMES.update({f"r{_n}": f"r{_n}", f"r{_n}d": f"r{_n}", f"r{_n}w": f"r{_n}", f"r{_n}b": f"r{_n}"})
HIGH_BYTE = ("ah", "bh", "ch", "dh")
SEGMENTS = ("cs", "ds", "es", "fs", "gs", "ss")
SIZES = (1, 2, 4, 8)

_MEMORY = re.compile(r"^(?P<off>[+-]?(?:0x[0-9a-fA-F]+|\d+))?\((?P<inside>[^)]*)\)$")
_CONSTANT = re.compile(r"^[+-]?(?:0x[0-9a-fA-F]+|\d+)$")


@dataclass(frozen=True)
class ArgSpec:
    """One argument of a probe point: as written, its size and sign, and
    the expression that reads it (None with `problem` when ktui cannot)."""

    text: str  # as the note writes it: `-4@%edi`
    size: int  # bytes: 1, 2, 4 or 8
    signed: bool
    expr: FetchExpr | None
    problem: str = ""  # why it is not read ("" when it is)

    @property
    def type(self) -> str:
        """The fetch type the argument reads as: `-4` -> s32, `8` -> u64."""
        return f"{'s' if self.signed else 'u'}{self.size * 8}"

    @property
    def ctype(self) -> str:
        """What a fetch of it shows as its C type: `usdt -4@%edi`."""
        return f"usdt {self.text}"

    @property
    def is_constant(self) -> bool:
        return isinstance(self.expr, Const)


def parse_arg(text: str) -> ArgSpec:
    """`[-]SIZE@PLACE` (or a bare PLACE, as old notes write it: 8 bytes)."""
    size_text, at, place = text.partition("@")
    if not at:
        size_text, place = "8", text
    try:
        size = int(size_text)
    except ValueError:
        return ArgSpec(text, 8, False, None, f"size {size_text!r} is not a number")
    signed, size = size < 0, abs(size)
    if size not in SIZES:
        return ArgSpec(text, 8, signed, None, f"a {size}-byte value (ktui reads 1, 2, 4 or 8 bytes)")
    expr, problem = _place(place)
    return ArgSpec(text, size, signed, expr, problem)


def _place(place: str) -> tuple[FetchExpr | None, str]:
    if place.startswith("$"):
        if not _CONSTANT.match(place[1:]):
            return None, f"the constant {place[1:]!r} is a symbol's address, not a number"
        return Const(int(place[1:], 0)), ""
    if ":" in place:
        return None, "a segment register's place (thread-local data) is not read"
    if place.endswith(("(%rip)", "(%eip)")):
        return None, "a %rip-relative place is not read"
    if place.startswith("%"):
        return _register(place)
    found = _MEMORY.match(place)
    if found is None:
        return None, f"{place!r} is no register, constant or OFFSET(%REG)"
    inside = found["inside"]
    if "," in inside:
        return None, "an indexed place (BASE,INDEX,SCALE) is not read"
    base, problem = _register(inside)
    if base is None:
        return None, problem
    offset = int(found["off"] or "0", 0)
    if abs(offset) > DEREF_MAX:
        return None, f"offset {offset} is too large"
    return Deref(offset, base), ""


def _register(text: str) -> tuple[Reg | None, str]:
    name = text[1:] if text.startswith("%") else text
    if not text.startswith("%"):
        return None, f"{text!r} is no register, constant or OFFSET(%REG)"
    if name in HIGH_BYTE:
        return None, f"%{name} (a register's second byte) is not read"
    if name in SEGMENTS:
        return None, "a segment register is not read"
    if name in ("rip", "eip"):
        return None, "%rip is not read"
    if name not in REGISTER_NAMES:
        return None, f"%{name} is not an integer register ktui reads"
    return Reg(REGISTER_NAMES[name]), ""
