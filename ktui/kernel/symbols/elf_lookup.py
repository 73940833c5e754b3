"""One symbol of an ELF file found by its name, without reading the rest.

`elfsyms.parse_elf` reads every function of a file into Python objects,
which names a stack's frames; a probe on one function needs one symbol.
So the name is searched for in the string table as bytes (every place it
starts, followed by NUL or by `@` of a version: tables share suffixes, so
`malloc` may sit inside `__libc_malloc`), and the symbol entries that point
at one of those places are found by searching the table's bytes for the
4-byte offset at an entry's start. Only the entries that match are
unpacked: on libc.so.6 a few dozen bytes of work in C, not 3000 tuples.

A name matches its bare form and its versions: `malloc`, `malloc@@GLIBC_2.2.5`
(in a `.symtab`), and `.dynsym`'s `memcpy` twice, told apart by
`.gnu.version` (a hidden version is an old one kept for old binaries; the
default is what the dynamic linker binds new ones to).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

from ktui.kernel.symbols.elfsyms import (
    MAX_SYMBOL_BYTES,
    SHT_GNU_VERSYM,
    SHN_UNDEF,
    STT_FUNC,
    STT_GNU_IFUNC,
    ElfError,
    ElfLayout,
    Section,
    read_at,
)

_SYM = struct.Struct("<IBBHQQ")
_OFFSET = struct.Struct("<I")
VERSYM_HIDDEN = 0x8000  # a non-default version (name@VER, not name@@VER)
MANY_PLACES = 16  # places in the string table past which entries are scanned in one pass instead
TYPE_WORDS = {0: "an untyped symbol", 1: "data", 3: "a section", 4: "a file name", 5: "a common block",
              6: "a thread-local variable"}


@dataclass(frozen=True)
class SymbolHit:
    """One entry of a symbol table that bears the name looked for."""

    name: str  # as the table writes it: malloc, memcpy@@GLIBC_2.14
    value: int  # st_value: the virtual address where it is defined
    size: int
    type: int  # STT_*
    defined: bool  # False: imported from another file (SHN_UNDEF)
    default: bool  # not a hidden (old) version

    @property
    def is_function(self) -> bool:
        return self.type in (STT_FUNC, STT_GNU_IFUNC) and self.defined and self.value != 0

    @property
    def is_ifunc(self) -> bool:
        return self.type == STT_GNU_IFUNC

    @property
    def type_words(self) -> str:
        return TYPE_WORDS.get(self.type, f"symbol type {self.type}")


def find_symbol(f: BinaryIO, layout: ElfLayout, table: Section, name: str) -> list[SymbolHit]:
    """Every entry of `table` (.symtab or .dynsym) named `name` or `name@VERSION`."""
    loaded = _load(f, layout, table)
    if loaded is None or not name:
        return []
    data, strtab, count = loaded
    want = name.encode()
    places = set()
    at = strtab.find(want)
    while at >= 0:
        if strtab[at + len(want) : at + len(want) + 1] in (b"\0", b"@"):
            places.add(at)
        at = strtab.find(want, at + 1)
    versions = None
    hits = []
    for index in sorted(_entries_at(data, table.entsize, count, places)):
        st_name, st_info, _other, shndx, value, size = _SYM.unpack_from(data, index * table.entsize)
        written = _name(strtab, st_name)
        if written != name and not written.startswith(name + "@"):
            continue
        if versions is None:
            versions = _versions(f, layout, table)
        hidden = ("@" in written and "@@" not in written) or (
            index < len(versions) // 2 and _version(versions, index) & VERSYM_HIDDEN != 0)
        hits.append(SymbolHit(written, value, size, st_info & 0xF, shndx != SHN_UNDEF, not hidden))
    return hits


def function_names(f: BinaryIO, layout: ElfLayout, table: Section) -> list[str]:
    """Every defined function's bare name in `table`: for a did-you-mean,
    when the name looked for is not there (the only time all are read)."""
    loaded = _load(f, layout, table)
    if loaded is None:
        return []
    data, strtab, count = loaded
    names = set()
    for index in range(count):
        st_name, st_info, _other, shndx, value, _size = _SYM.unpack_from(data, index * table.entsize)
        if st_info & 0xF in (STT_FUNC, STT_GNU_IFUNC) and shndx != SHN_UNDEF and value:
            names.add(_name(strtab, st_name).split("@", 1)[0])
    names.discard("")
    return sorted(names)


def all_functions(f: BinaryIO, layout: ElfLayout, table: Section) -> list[SymbolHit]:
    """Every function entry of `table`, defined or imported (SHN_UNDEF),
    for a listing (`ktui list PATH:GLOB`); `default` is not read (True)."""
    loaded = _load(f, layout, table)
    if loaded is None:
        return []
    data, strtab, count = loaded
    hits = []
    for index in range(count):
        st_name, st_info, _other, shndx, value, size = _SYM.unpack_from(data, index * table.entsize)
        if st_info & 0xF in (STT_FUNC, STT_GNU_IFUNC) and st_name:
            hits.append(SymbolHit(_name(strtab, st_name), value, size, st_info & 0xF, shndx != SHN_UNDEF, True))
    return hits


def _load(f: BinaryIO, layout: ElfLayout, table: Section) -> tuple[bytes, bytes, int] | None:
    if table.entsize < _SYM.size or table.size > MAX_SYMBOL_BYTES or table.link >= len(layout.sections):
        return None
    strings = layout.sections[table.link]
    if strings.size > MAX_SYMBOL_BYTES:
        return None
    return read_at(f, table.offset, table.size), read_at(f, strings.offset, strings.size), table.size // table.entsize


def _entries_at(data: bytes, entsize: int, count: int, places: set[int]) -> set[int]:
    """Indexes of the entries whose st_name (their first 4 bytes) is in `places`."""
    if not places:
        return set()
    if len(places) <= MANY_PLACES or entsize % 4:
        found = set()
        for place in places:
            pattern = _OFFSET.pack(place)
            at = data.find(pattern)
            while at >= 0:
                if at % entsize == 0 and at // entsize < count:
                    found.add(at // entsize)
                at = data.find(pattern, at + 1)
        return found
    # a short name found in many places: one pass over every st_name instead
    st_names = memoryview(data)[: count * entsize].cast("I")[:: entsize // 4]
    return {index for index, st_name in enumerate(st_names) if st_name in places}


def _name(strtab: bytes, at: int) -> str:
    end = strtab.find(b"\0", at)
    return strtab[at : end if end >= 0 else len(strtab)].decode("utf-8", "replace")


def _versions(f: BinaryIO, layout: ElfLayout, table: Section) -> bytes:
    """`.gnu.version` of a `.dynsym` (one u16 per symbol), or nothing."""
    index = layout.sections.index(table)
    versym = next((s for s in layout.sections_of(SHT_GNU_VERSYM) if s.link == index), None)
    if versym is None or versym.size > MAX_SYMBOL_BYTES:
        return b""
    try:
        return read_at(f, versym.offset, versym.size)
    except ElfError:
        return b""


def _version(versions: bytes, index: int) -> int:
    return int.from_bytes(versions[2 * index : 2 * index + 2], "little")
