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
the frame then stays `binary+0xaddr`.

`parse_layout` reads only the headers (segments, sections and their
names, the program headers a probe's rules need): what `uprobe_target`
starts from to find one symbol without reading every symbol as
`parse_elf` does."""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass
from typing import BinaryIO

ELF_MAGIC = b"\x7fELF"
PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE = 1, 2, 3, 4
PF_X = 1
ET_REL, ET_EXEC, ET_DYN = 1, 2, 3
EM_X86_64 = 62
SHT_SYMTAB, SHT_NOTE, SHT_DYNSYM = 2, 7, 11
SHT_GNU_VERSYM = 0x6FFFFFFF
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
    flags: int = 0  # p_flags: PF_X for code


@dataclass(frozen=True)
class Section:
    """One section header, as much of it as ktui reads."""

    name: str
    type: int
    offset: int
    size: int
    link: int
    entsize: int
    addr: int = 0  # sh_addr: where it loads (0: not loaded); USDT's `.stapsdt.base` is read by it


@dataclass(frozen=True)
class ElfLayout:
    """A file's headers: its type and machine, its PT_LOAD segments, its
    sections, and the program headers that say what kind of file it is."""

    type: int  # e_type: ET_EXEC, ET_DYN...
    machine: int  # e_machine: EM_X86_64...
    segments: tuple[Segment, ...]
    sections: tuple[Section, ...]
    has_interp: bool  # PT_INTERP: it asks for a dynamic loader (an executable)
    dynamic: tuple[int, int] | None  # PT_DYNAMIC's (offset, size) in the file
    notes: tuple[tuple[int, int], ...]  # PT_NOTE segments' (offset, size)

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)

    def sections_of(self, type_: int) -> list[Section]:
        return [s for s in self.sections if s.type == type_]


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
    layout = parse_layout(f)
    found: dict[int, tuple[int, str]] = {}
    # .symtab first: where both name an address, its (local) name wins
    for wanted in (SHT_SYMTAB, SHT_DYNSYM):
        for sh in layout.sections_of(wanted):
            _symbols(f, sh, layout.sections, found)
    ordered = sorted(found.items())
    return ElfSymbols(layout.segments, tuple(a for a, _ in ordered),
                      tuple(s for _, (s, _) in ordered), tuple(n for _, (_, n) in ordered))


def parse_layout(f: BinaryIO) -> ElfLayout:
    """The headers of the ELF file `f` (ElfError if it is no 64-bit
    little-endian ELF file, or is cut short)."""
    f.seek(0)
    head = f.read(_HEADER.size)
    if head[:4] != ELF_MAGIC:  # a short text file is no ELF file, not a cut one
        raise ElfError("not an ELF file")
    if len(head) != _HEADER.size:
        raise ElfError("the file is cut short")
    (ident, e_type, machine, _version, _entry, phoff, shoff, _flags, _ehsize,
     phentsize, phnum, shentsize, shnum, shstrndx) = _HEADER.unpack(head)
    if ident[:4] != ELF_MAGIC:
        raise ElfError("not an ELF file")
    if ident[4] != 2 or ident[5] != 1:
        raise ElfError("not a 64-bit little-endian ELF file")
    segments, notes = [], []
    has_interp, dynamic = False, None
    if phnum and phentsize >= _PHDR.size:
        table = _read(f, phoff, phentsize * phnum)
        for i in range(phnum):
            p_type, p_flags, p_offset, p_vaddr, _pa, p_filesz, _memsz, _align = _PHDR.unpack_from(table, i * phentsize)
            if p_type == PT_LOAD:
                segments.append(Segment(p_offset, p_vaddr, p_filesz, p_flags))
            elif p_type == PT_INTERP:
                has_interp = True
            elif p_type == PT_DYNAMIC:
                dynamic = (p_offset, p_filesz)
            elif p_type == PT_NOTE:
                notes.append((p_offset, p_filesz))
    raw = []
    if shnum and shentsize >= _SHDR.size:
        table = _read(f, shoff, shentsize * shnum)
        raw = [_SHDR.unpack_from(table, i * shentsize) for i in range(shnum)]
    names = b""
    if shstrndx < len(raw) and raw[shstrndx][5] <= MAX_SYMBOL_BYTES:
        names = _read(f, raw[shstrndx][4], raw[shstrndx][5])
    sections = tuple(Section(_cstring(names, sh[0]), sh[1], sh[4], sh[5], sh[6], sh[9], sh[3]) for sh in raw)
    return ElfLayout(e_type, machine, tuple(segments), sections, has_interp, dynamic, tuple(notes))


def _cstring(table: bytes, at: int) -> str:
    """The NUL-terminated name at `at` in a string table ("" past its end)."""
    if at >= len(table):
        return ""
    end = table.find(b"\0", at)
    return table[at:end if end >= 0 else len(table)].decode("utf-8", "replace")


def _symbols(f: BinaryIO, sh: Section, sections: tuple[Section, ...], found: dict[int, tuple[int, str]]) -> None:
    size, entsize = sh.size, sh.entsize
    if entsize < _SYM.size or size > MAX_SYMBOL_BYTES or sh.link >= len(sections):
        return
    strtab_sh = sections[sh.link]
    if strtab_sh.size > MAX_SYMBOL_BYTES:
        return
    data = _read(f, sh.offset, size)
    strtab = _read(f, strtab_sh.offset, strtab_sh.size)
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


def read_at(f: BinaryIO, offset: int, size: int) -> bytes:
    """`size` bytes at `offset` (ElfError if the file is cut short)."""
    return _read(f, offset, size)


def _read(f: BinaryIO, offset: int, size: int) -> bytes:
    f.seek(offset)
    data = f.read(size)
    if len(data) != size:
        raise ElfError("the file is cut short")
    return data
