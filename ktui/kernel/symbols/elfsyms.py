"""Function symbols of an ELF file, read in plain Python (no pyelftools,
no bcc): what user stacks need to name a frame.

As bcc's symbolizer (bcc_elf.c) and bpftrace (through bcc) do: the
function symbols (FUNC and GNU_IFUNC) of `.symtab` when the file has one
and of `.dynsym` (what a stripped Debian binary or library still exports),
sorted by address; a frame is named by the symbol whose range holds it.
The address a frame gives is turned into the file's own virtual address
through the mapping (/proc/PID/maps: file offset) and the PT_LOAD segment
holding that offset, so PIE executables and shared libraries read the
same as fixed-address executables.

Only 64-bit little-endian files are read (x86-64, what ktui runs on);
anything else, or a file cut short, gives no symbols rather than an error:
the frame then stays `binary+0xaddr`."""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass
from typing import BinaryIO

ELF_MAGIC = b"\x7fELF"
PT_LOAD = 1
SHT_SYMTAB, SHT_DYNSYM = 2, 11
STT_FUNC, STT_GNU_IFUNC = 2, 10
SHN_UNDEF = 0
STB_GLOBAL = 1
MAX_SYMBOL_BYTES = 64 << 20  # a symbol table larger than this is not read (memory bound)

_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")


class ElfError(ValueError):
    """Not an ELF file this reader takes (or one cut short)."""


@dataclass(frozen=True)
class Segment:
    offset: int
    vaddr: int
    filesz: int


@dataclass(frozen=True)
class ElfSymbols:
    """One file's loadable segments and function symbols (sorted)."""

    segments: tuple[Segment, ...]
    starts: tuple[int, ...]
    sizes: tuple[int, ...]
    names: tuple[str, ...]

    def vaddr_of(self, file_offset: int) -> int | None:
        """The virtual address the file's bytes at `file_offset` load at."""
        for seg in self.segments:
            if seg.offset <= file_offset < seg.offset + seg.filesz:
                return file_offset - seg.offset + seg.vaddr
        return None

    def lookup(self, vaddr: int) -> tuple[str, int] | None:
        """(function, offset into it) for a virtual address, or None. A
        symbol without a size (hand-written assembly) covers up to the next."""
        i = bisect.bisect_right(self.starts, vaddr) - 1
        while i >= 0:
            start, size = self.starts[i], self.sizes[i]
            if size == 0 or vaddr < start + size:
                return self.names[i], vaddr - start
            # an alias or a sized symbol before: look one further back only
            # when it starts at the same address
            if i > 0 and self.starts[i - 1] == start:
                i -= 1
                continue
            return None
        return None


def read_elf(path: str) -> ElfSymbols:
    """Parse `path` (ElfError if it is no 64-bit little-endian ELF file;
    OSError if it cannot be read)."""
    with open(path, "rb") as f:
        return parse_elf(f)


def parse_elf(f: BinaryIO) -> ElfSymbols:
    head = _read(f, 0, _HEADER.size)
    (ident, _type, _machine, _version, _entry, phoff, shoff, _flags, _ehsize,
     phentsize, phnum, shentsize, shnum, _shstrndx) = _HEADER.unpack(head)
    if ident[:4] != ELF_MAGIC:
        raise ElfError("not an ELF file")
    if ident[4] != 2 or ident[5] != 1:
        raise ElfError("not a 64-bit little-endian ELF file")
    segments = []
    if phnum and phentsize >= _PHDR.size:
        table = _read(f, phoff, phentsize * phnum)
        for i in range(phnum):
            p_type, _fl, p_offset, p_vaddr, _pa, p_filesz, _memsz, _align = _PHDR.unpack_from(table, i * phentsize)
            if p_type == PT_LOAD:
                segments.append(Segment(p_offset, p_vaddr, p_filesz))
    sections = []
    if shnum and shentsize >= _SHDR.size:
        table = _read(f, shoff, shentsize * shnum)
        sections = [_SHDR.unpack_from(table, i * shentsize) for i in range(shnum)]
    found: dict[int, tuple[int, str]] = {}
    # .symtab first: where both name an address, its (local) name wins
    for wanted in (SHT_SYMTAB, SHT_DYNSYM):
        for sh in sections:
            if sh[1] == wanted:
                _symbols(f, sh, sections, found)
    ordered = sorted(found.items())
    return ElfSymbols(tuple(segments), tuple(a for a, _ in ordered),
                      tuple(s for _, (s, _) in ordered), tuple(n for _, (_, n) in ordered))


def _symbols(f: BinaryIO, sh, sections, found: dict[int, tuple[int, str]]) -> None:
    _name, _type, _flags, _addr, offset, size, link, _info, _align, entsize = sh
    if entsize < _SYM.size or size > MAX_SYMBOL_BYTES or link >= len(sections):
        return
    strtab_sh = sections[link]
    if strtab_sh[5] > MAX_SYMBOL_BYTES:
        return
    data = _read(f, offset, size)
    strtab = _read(f, strtab_sh[4], strtab_sh[5])
    ranks: dict[int, tuple[bool, bool]] = {}
    for i in range(size // entsize):
        st_name, st_info, _other, st_shndx, st_value, st_size = _SYM.unpack_from(data, i * entsize)
        if st_info & 0xF not in (STT_FUNC, STT_GNU_IFUNC) or st_shndx == SHN_UNDEF or st_value == 0:
            continue
        end = strtab.find(b"\0", st_name)
        name = strtab[st_name:end if end >= 0 else len(strtab)].decode("utf-8", "replace")
        if not name:
            continue
        # several names for one address (getpid, __getpid): the global one
        # without leading underscores, as a reader would call it
        rank = (name.startswith("_"), st_info >> 4 != STB_GLOBAL)
        if st_value not in found or (st_value in ranks and rank < ranks[st_value]):
            found[st_value] = (st_size, name)
            ranks[st_value] = rank


def _read(f: BinaryIO, offset: int, size: int) -> bytes:
    f.seek(offset)
    data = f.read(size)
    if len(data) != size:
        raise ElfError("the file is cut short")
    return data
