"""Where a probe on a user function goes: the file and the offset in it
that the kernel's uprobe takes, from the ELF file itself.

A uprobe is set on an inode at a file offset, not at an address: the
kernel puts the breakpoint in the page cache, and every process that maps
those bytes takes it. So `PATH:SYMBOL[+OFF]` becomes the symbol's virtual
address (`st_value`, as `nm` prints it), plus OFF, turned into the offset
of those bytes in the file through the PT_LOAD segment that holds them:
`vaddr - p_vaddr + p_offset`. (In Debian's PIE files p_vaddr equals
p_offset for the code, which hides a missing conversion; a -no-pie
executable loads at 0x400000 and does not.) `PATH:0xADDR` is a virtual
address the same way.

The symbol comes from `.symtab`, else from `.dynsym` (what a stripped file
still exports), functions only (FUNC and GNU_IFUNC), defined in the file.
A name that several symbols bear at different addresses (a static function
in two source files) is refused, unless exactly one is the default version
of a versioned symbol (libc's memcpy@@GLIBC_2.14 over memcpy@GLIBC_2.2.5).

The rules of a probe on the file (`check_probe_target`, which the session
and `ktui check` call): a return probe on a Go binary is refused (Go moves
its goroutines' stacks, and a uretprobe's rewritten return address then
crashes the program); a shared library probed without a set-wide pid gets
a note (every process that maps it traps); a Go binary read with a1..a6,
and an IFUNC, get a note each.

What is a library: an ET_DYN file with a DT_SONAME (libc.so.6 has one, a
PIE executable none), or an ET_DYN file without PT_INTERP that is not
flagged DF_1_PIE (a library built without -soname). A PIE executable has
a PT_INTERP (it asks for the dynamic loader) or the DF_1_PIE flag.
"""

from __future__ import annotations

import difflib
import os
import struct
from dataclasses import dataclass
from typing import BinaryIO

from ktui.kernel.symbols.elf_layout import (
    MAX_HEADER_BYTES,
    UprobeTargetError,
    code_segment_at,
    file_offset_of,
    open_probed_file,
    read_probed_layout,
)
from ktui.kernel.symbols.elf_lookup import SymbolHit, all_functions, find_symbol, function_names
from ktui.kernel.symbols.elfsyms import (
    ET_DYN,
    PF_X,
    SHT_DYNSYM,
    SHT_NOTE,
    SHT_SYMTAB,
    ElfError,
    ElfLayout,
    read_at,
)
from ktui.lang.model import Arg, Deref, Field, Kind, Probe
from ktui.lang.filters import comparisons

GO_SECTIONS = (".go.buildinfo", ".gopclntab", ".note.go.buildid")
GO_NOTE_OWNER, NT_GO_BUILD_ID = b"Go\0", 4
DT_NULL, DT_SONAME, DT_FLAGS_1 = 0, 14, 0x6FFFFFFB
DF_1_PIE = 0x08000000
_DYN = struct.Struct("<qQ")
_NOTE = struct.Struct("<III")

GO_RETURN = "a uretprobe on a Go binary crashes it: Go moves its stacks; probe the call (:c) instead"


@dataclass(frozen=True)
class UprobeTarget:
    """What the uprobe PMU takes (`path`, `file_offset`) and what the rules
    need to know of the file."""

    path: str  # os.path.realpath of the file as written
    file_offset: int  # where the breakpoint goes: the perf event's probe_offset
    vaddr: int  # the file's own virtual address of it (nm, objdump)
    symbol: str | None  # the symbol as its table writes it (None for PATH:0xADDR)
    is_go: bool
    is_library: bool
    is_ifunc: bool = False  # a GNU indirect function: the address is its resolver's

    @property
    def file_offsets(self) -> tuple[int, ...]:
        """Every breakpoint's (a USDT probe point may have several sites: usdt.UsdtTarget)."""
        return (self.file_offset,)

    @property
    def ref_ctr_offset(self) -> int:
        """A function has no semaphore (a USDT probe point may: usdt.UsdtTarget)."""
        return 0


def resolve(path: str, symbol: str | None = None, offset: int = 0, address: int | None = None) -> UprobeTarget:
    """The file offset of `symbol` (+`offset`), or of the virtual `address`,
    in the ELF file `path`. Raises UprobeTargetError (one line)."""
    if (symbol is None) == (address is None):
        raise ValueError("resolve takes a symbol or an address")
    real = os.path.realpath(path)
    with open_probed_file(path, real) as f:
        layout = read_probed_layout(f, path)
        is_ifunc = False
        if symbol is not None:
            hit = _function(f, layout, path, symbol)
            if hit.size and offset >= hit.size:
                raise UprobeTargetError(f"{symbol}+0x{offset:x} is past the end of {symbol} in {path} "
                                        f"(it is 0x{hit.size:x} bytes)")
            vaddr, symbol, is_ifunc = hit.value + offset, hit.name, hit.is_ifunc
        else:
            vaddr = address
        segment = code_segment_at(layout, vaddr)
        if segment is None:
            what = f"{symbol}+0x{offset:x}" if symbol is not None and offset else (symbol or f"0x{vaddr:x}")
            raise UprobeTargetError(f"{what} (0x{vaddr:x}) is in no executable PT_LOAD segment of {path}"
                                    f"{_code_ranges(layout)}")
        return UprobeTarget(real, file_offset_of(segment, vaddr), vaddr, symbol,
                            is_go(f, layout), is_library(f, layout), is_ifunc)


def check_probe_target(probe: Probe, pid: int | None) -> tuple[UprobeTarget, list[str]]:
    """`probe`'s file resolved (`resolve`) and its rules applied: the
    target, and notes to show (warnings, not errors). `pid`: the set-wide
    pid (--pid or the set's filter), None when every process is probed.
    Raises UprobeTargetError (one line)."""
    target = probe.target
    if target.path is None:
        raise ValueError(f"{target} is not a user function")
    if target.usdt is not None:  # a USDT probe point: its note, not a symbol (`usdt`)
        from ktui.kernel.symbols.usdt import check_usdt_target  # it builds on this module

        return check_usdt_target(probe, pid)  # type: ignore[return-value]
    found = resolve(target.path, target.symbol, target.offset, target.address)
    if found.is_go and probe.kind is Kind.RETURN:
        raise UprobeTargetError(GO_RETURN, part="kind")
    notes = []
    if found.is_library and pid is None:
        notes.append(f"{target.path} is a shared library: without --pid the probe traps in every "
                     "process that maps it")
    if found.is_go and _reads_sysv_arguments(probe):
        notes.append(f"{target.path} is a Go binary: Go passes arguments in its own registers (rax, rbx, "
                     "rcx, rdi, rsi, r8-r11), not a1..a6's: read the registers by name")
    if found.is_ifunc:
        notes.append(f"{target.symbol} is an indirect function (IFUNC): its address is the resolver that "
                     "picks an implementation when the file is loaded, not the code that runs; probe "
                     "the implementation (nm -D shows them) instead")
    return found, notes


@dataclass(frozen=True)
class ListedFunction:
    """One function of a file, as `ktui list PATH:GLOB` shows it: where a
    probe on it goes (`file_offset`, None for an import or an address in
    no code segment) and what it is."""

    name: str  # bare: what PATH:NAME takes
    address: int  # st_value (0 for an import)
    file_offset: int | None
    size: int
    ifunc: bool
    imported: bool  # called from a shared library, not defined here: probe it there


def list_functions(path: str) -> list[ListedFunction]:
    """Every function of the ELF file `path` (its .symtab, else its .dynsym,
    as `resolve` reads them), by name. Raises UprobeTargetError (one line)."""
    with open_probed_file(path) as f:
        layout = read_probed_layout(f, path)
        tables = layout.sections_of(SHT_SYMTAB) or layout.sections_of(SHT_DYNSYM)
        try:
            hits = [h for table in tables[:1] for h in all_functions(f, layout, table)]
        except ElfError:
            raise UprobeTargetError(f"{path} is cut short (its symbol table is)", part="path") from None
    found: dict[tuple[str, int], ListedFunction] = {}
    for hit in hits:
        name = hit.name.split("@", 1)[0]
        if not hit.is_function and hit.defined:
            continue  # defined at 0: nothing to probe
        segment = code_segment_at(layout, hit.value) if hit.is_function else None
        offset = file_offset_of(segment, hit.value) if segment is not None else None
        found.setdefault((name, hit.value), ListedFunction(name, hit.value if hit.defined else 0, offset,
                                                           hit.size, hit.is_ifunc, not hit.defined))
    return sorted(found.values(), key=lambda fn: (fn.name, fn.address))


def has_symtab(path: str) -> bool:
    """Whether the file keeps its .symtab (a stripped one lists only what it exports)."""
    with open_probed_file(path) as f:
        return bool(read_probed_layout(f, path).sections_of(SHT_SYMTAB))


# ---------------------------------------------------------------- a function in the file


def _function(f: BinaryIO, layout: ElfLayout, path: str, symbol: str) -> SymbolHit:
    """The one function named `symbol` in the file (UprobeTargetError if none, or several)."""
    symtab = layout.sections_of(SHT_SYMTAB)
    dynsym = layout.sections_of(SHT_DYNSYM)
    hits: list[SymbolHit] = []
    try:
        # .symtab has every symbol .dynsym has, and the local ones; a
        # .symtab cut down (some packagers') still leaves .dynsym to ask
        for table in symtab + dynsym:
            hits += find_symbol(f, layout, table, symbol)
            if any(h.is_function for h in hits):
                break
    except ElfError:
        raise UprobeTargetError(f"{path} is cut short (its symbol table is)", part="path") from None
    functions = [h for h in hits if h.is_function]
    if not functions:
        raise UprobeTargetError(_missing(f, layout, path, symbol, hits, has_symtab=bool(symtab)))
    places = {h.value for h in functions}
    if len(places) > 1:
        defaults = {h.value for h in functions if h.default}
        if len(defaults) != 1:
            where = ", ".join(f"0x{v:x}" for v in sorted(places)[:4])
            raise UprobeTargetError(f"{symbol} is defined {len(places)} times in {path} (at {where}): "
                                    f"probe one by its address, {path}:0xADDR")
        places = defaults
    value = places.pop()
    # a name for the address: the bare one when the table has it, else the default version's
    return min((h for h in functions if h.value == value), key=lambda h: (not h.default, len(h.name)))


def _missing(f: BinaryIO, layout: ElfLayout, path: str, symbol: str, hits: list[SymbolHit], *,
             has_symtab: bool) -> str:
    """Why no function `symbol` can be probed in the file, in one line."""
    if any(not h.defined for h in hits):
        return (f"{path} calls {symbol} from a shared library but does not define it: probe it in the "
                f"library (ldd {path} lists them), e.g. /usr/lib/x86_64-linux-gnu/libc.so.6:{symbol}")
    other = next((h for h in hits if h.defined), None)
    if other is not None:
        return f"{symbol} in {path} is {other.type_words}, not a function"
    tables = layout.sections_of(SHT_SYMTAB) or layout.sections_of(SHT_DYNSYM)
    try:
        known = [n for table in tables[:1] for n in function_names(f, layout, table)]
    except ElfError:
        known = []
    close = difflib.get_close_matches(symbol, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    if not has_symtab:
        return f"{path} has no .symtab (stripped) and its .dynsym does not export {symbol}{hint}"
    return f"{path} has no function {symbol}{hint}"


def _code_ranges(layout: ElfLayout) -> str:
    code = [s for s in layout.segments if s.flags & PF_X]
    if not code:
        return " (it has no code segment)"
    return " (its code is at " + ", ".join(f"0x{s.vaddr:x}-0x{s.vaddr + s.filesz:x}" for s in code[:3]) + ")"


# ---------------------------------------------------------------- what the file is


def is_go(f: BinaryIO, layout: ElfLayout) -> bool:
    """A Go binary: one of Go's own sections, or its build-id note (the
    notes of the program headers too: a binary may have lost its sections)."""
    if any(layout.section(name) is not None for name in GO_SECTIONS):
        return True
    places = [(s.offset, s.size) for s in layout.sections_of(SHT_NOTE)] + list(layout.notes)
    return any(_has_go_note(f, offset, size) for offset, size in places)


def _has_go_note(f: BinaryIO, offset: int, size: int) -> bool:
    if size > MAX_HEADER_BYTES:
        return False
    try:
        data = read_at(f, offset, size)
    except ElfError:
        return False
    at = 0
    while at + _NOTE.size <= len(data):
        namesz, descsz, type_ = _NOTE.unpack_from(data, at)
        name = data[at + _NOTE.size : at + _NOTE.size + namesz]
        if name == GO_NOTE_OWNER and type_ == NT_GO_BUILD_ID:
            return True
        at += _NOTE.size + _align4(namesz) + _align4(descsz)
    return False


def _align4(n: int) -> int:
    return (n + 3) & ~3


def is_library(f: BinaryIO, layout: ElfLayout) -> bool:
    """A shared library (the module's docstring says the rule and why)."""
    if layout.type != ET_DYN:
        return False
    soname, flags_1 = _dynamic_facts(f, layout)
    if soname:
        return True
    return not layout.has_interp and not flags_1 & DF_1_PIE


def _dynamic_facts(f: BinaryIO, layout: ElfLayout) -> tuple[bool, int]:
    """(whether it has a DT_SONAME, its DT_FLAGS_1) from PT_DYNAMIC."""
    if layout.dynamic is None or layout.dynamic[1] > MAX_HEADER_BYTES:
        return False, 0
    try:
        data = read_at(f, *layout.dynamic)
    except ElfError:
        return False, 0
    soname, flags_1 = False, 0
    for at in range(0, len(data) - _DYN.size + 1, _DYN.size):
        tag, value = _DYN.unpack_from(data, at)
        if tag == DT_NULL:
            break
        if tag == DT_SONAME:
            soname = True
        elif tag == DT_FLAGS_1:
            flags_1 = value
    return soname, flags_1


def _reads_sysv_arguments(probe: Probe) -> bool:
    """Whether the probe reads a1..a6 (a fetch, an aggregation or its filter)."""
    fetches = probe.fetches + (probe.agg.fetches() if probe.agg is not None else ())
    for fetch in fetches:
        expr = fetch.expr
        while isinstance(expr, Deref):
            expr = expr.inner
        if isinstance(expr, Arg):
            return True
    if probe.filter is None:
        return False
    words = {str(Arg(i)) for i in range(1, 7)}
    return any(isinstance(side, Field) and side.name in words
               for compare in comparisons(probe.filter) for side in (compare.left, compare.right))
