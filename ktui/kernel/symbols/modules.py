"""Kernel modules, loaded or not: which exist, which are loaded, what
functions a module file holds and its BTF.

A loaded module's functions are in /proc/kallsyms (`name\\t[module]`) and
its BTF in /sys/kernel/btf/MODULE. A module that is not loaded is only a
file under /lib/modules/RELEASE: modules.dep says where, its ELF symbol
table lists its functions and its `.BTF` section (split BTF on top of
vmlinux's) their prototypes. Files may be compressed with xz (Debian's
6.12); zstd needs a module Python does not ship, so such files are
reported as unreadable. modules.symbols names the exported symbols of every
module (functions and data alike), enough to say "that is in module M".
"""

from __future__ import annotations

import lzma
import os
import re
import struct
from typing import NamedTuple
from pathlib import Path

SYS_MODULE = Path("/sys/module")
LIB_MODULES = Path("/lib/modules")
MAX_MODULE_FILE = 256 << 20

_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SECTION = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")
STT_FUNC = 2
SHT_SYMTAB = 2
_SYMBOL_ALIAS = re.compile(r"^alias symbol:(\S+) (\S+)$", re.M)


class ModuleFileError(Exception):
    """A module file that cannot be read or is not a 64-bit ELF object."""


def module_name(file_name: str) -> str:
    """`kernel/fs/xfs/xfs.ko.xz` -> `xfs`; dashes become underscores as in /sys/module."""
    base = file_name.rsplit("/", 1)[-1]
    base = base.split(".ko", 1)[0]
    return base.replace("-", "_")


def loaded_modules(sys_module: Path = SYS_MODULE) -> set[str]:
    """Loaded modules (built-in ones have a /sys/module entry but no initstate)."""
    try:
        names = os.listdir(sys_module)
    except OSError:
        return set()
    return {n for n in names if (sys_module / n / "initstate").exists()}


class ModuleTree(NamedTuple):
    """/lib/modules/RELEASE: where each module's file is, what it exports."""

    root: Path

    @classmethod
    def running(cls, lib_modules: Path = LIB_MODULES, release: str | None = None) -> "ModuleTree":
        return cls(lib_modules / (release or os.uname().release))

    def files(self) -> dict[str, Path]:
        """module name -> its file, from modules.dep."""
        try:
            text = (self.root / "modules.dep").read_text(errors="replace")
        except OSError:
            return {}
        out = {}
        for line in text.splitlines():
            path = line.split(":", 1)[0].strip()
            if path:
                out.setdefault(module_name(path), self.root / path)
        return out

    def exported(self) -> dict[str, str]:
        """Exported symbol -> module, from modules.symbols (functions and data)."""
        try:
            text = (self.root / "modules.symbols").read_text(errors="replace")
        except OSError:
            return {}
        return dict(_SYMBOL_ALIAS.findall(text))


class ModuleFile(NamedTuple):
    functions: tuple[str, ...]  # function symbols defined in the module
    btf: bytes | None  # its .BTF section (split BTF), if any


def read_module_file(path: Path) -> ModuleFile:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_MODULE_FILE + 1)
    except OSError as exc:
        raise ModuleFileError(f"{path}: {exc.strerror}") from None
    if path.name.endswith(".xz"):
        try:
            raw = lzma.LZMADecompressor().decompress(raw, max_length=MAX_MODULE_FILE + 1)
        except lzma.LZMAError as exc:
            raise ModuleFileError(f"{path}: not valid xz ({exc})") from None
    elif not path.name.endswith(".ko"):
        raise ModuleFileError(f"{path}: compressed in a way ktui cannot read (only .ko and .ko.xz)")
    if len(raw) > MAX_MODULE_FILE:
        raise ModuleFileError(f"{path}: larger than {MAX_MODULE_FILE >> 20} MiB")
    return parse_elf_module(raw, str(path))


def parse_elf_module(data: bytes, source: str) -> ModuleFile:
    """Function symbols and the .BTF section of a little-endian ELF64 object."""
    if len(data) < _ELF_HEADER.size or data[:4] != b"\x7fELF":
        raise ModuleFileError(f"{source}: not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ModuleFileError(f"{source}: not a little-endian 64-bit ELF file")
    fields = _ELF_HEADER.unpack_from(data, 0)
    shoff, shentsize, shnum, shstrndx = fields[6], fields[11], fields[12], fields[13]
    if shentsize != _SECTION.size or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise ModuleFileError(f"{source}: section headers outside the file")
    sections = [_SECTION.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]

    def body(sec) -> bytes:
        off, size = sec[4], sec[5]
        if off + size > len(data):
            raise ModuleFileError(f"{source}: a section runs past the end of the file")
        return data[off:off + size]

    def cstr(table: bytes, at: int) -> str:
        end = table.find(b"\0", at)
        return table[at:end if end >= 0 else len(table)].decode("ascii", "replace")

    names = body(sections[shstrndx])
    btf = None
    functions: list[str] = []
    for sec in sections:
        name = cstr(names, sec[0])
        if name == ".BTF":
            btf = body(sec)
        elif sec[1] == SHT_SYMTAB and sec[9] == _SYMBOL.size and sec[6] < shnum:
            strtab = body(sections[sec[6]])
            table = body(sec)
            for at in range(0, len(table) - _SYMBOL.size + 1, _SYMBOL.size):
                st_name, info, _other, shndx, _value, _size = _SYMBOL.unpack_from(table, at)
                if info & 0xF == STT_FUNC and shndx != 0 and st_name:
                    functions.append(cstr(strtab, st_name))
    return ModuleFile(tuple(dict.fromkeys(functions)), btf)
