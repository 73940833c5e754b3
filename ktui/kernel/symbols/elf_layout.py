"""Opening a program or library to probe, and the program headers both
kinds of user probe read: `uprobe_target` (a function, PATH:SYMBOL) and
`usdt` (a probe point's note). Each turns a link-time virtual address into
the file offset the kernel's uprobe takes through the executable PT_LOAD
segment that holds it (`code_segment_at`), after `read_probed_layout` has
refused what cannot be probed (not ELF, not x86-64, an object file).

Problems are one line each, `UprobeTargetError` with `part="path"`: about
the file, not the name in it (`ktui check` puts them in that column).
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from ktui.kernel.symbols.elfsyms import (
    EM_X86_64,
    ET_DYN,
    ET_EXEC,
    ET_REL,
    PF_X,
    ElfError,
    ElfLayout,
    Segment,
    parse_layout,
)
from ktui.lang.model import KtuiError

MAX_HEADER_BYTES = 1 << 20  # a dynamic section or a note larger than this is not read


class UprobeTargetError(KtuiError):
    """The file or the function cannot be probed; one line. `part` says
    what it is about, for the column of `ktui check`: "path" (the file)
    or "function" (the symbol or address in it)."""

    def __init__(self, message: str, *, part: str = "function", **where) -> None:
        super().__init__(message, **where)
        self.part = part

    def located(self, **where) -> "UprobeTargetError":
        err = super().located(**where)
        err.part = self.part
        return err


def open_probed_file(path: str, real: str | None = None) -> BinaryIO:
    """`path` (as the user wrote it: the messages name it) opened for
    reading at `real` (its os.path.realpath, computed when not given);
    a regular file only."""
    real = real if real is not None else os.path.realpath(path)
    try:
        info = os.stat(real)
    except FileNotFoundError:
        raise UprobeTargetError(f"{path}: no such file", part="path") from None
    except OSError as err:
        raise UprobeTargetError(f"{path}: cannot read it ({err.strerror})", part="path") from None
    if not stat.S_ISREG(info.st_mode):
        raise UprobeTargetError(f"{path} is not a regular file", part="path")
    try:
        return open(real, "rb")
    except OSError as err:
        raise UprobeTargetError(f"{path}: cannot read it ({err.strerror})", part="path") from None


def read_probed_layout(f: BinaryIO, path: str) -> ElfLayout:
    """The file's headers, if it is something a uprobe can go in: an
    x86-64 executable or shared library."""
    try:
        layout = parse_layout(f)
    except ElfError as err:
        raise UprobeTargetError(f"{path} is {'cut short' if 'cut short' in str(err) else 'not an ELF file'}"
                                if "64-bit" not in str(err) else f"{path} is not a 64-bit x86-64 ELF file",
                                part="path") from None
    if layout.machine != EM_X86_64:
        raise UprobeTargetError(f"{path} is not an x86-64 file (ELF machine {layout.machine})", part="path")
    if layout.type == ET_REL:
        raise UprobeTargetError(f"{path} is an object file (.o): probe the executable or library "
                                "it is linked into", part="path")
    if layout.type not in (ET_EXEC, ET_DYN):
        raise UprobeTargetError(f"{path} is neither an executable nor a shared library "
                                f"(ELF type {layout.type})", part="path")
    return layout


def code_segment_at(layout: ElfLayout, vaddr: int) -> Segment | None:
    """The executable PT_LOAD segment whose file bytes hold `vaddr`
    (its file offset is then `vaddr - segment.vaddr + segment.offset`)."""
    return next((s for s in layout.segments
                 if s.flags & PF_X and s.vaddr <= vaddr < s.vaddr + s.filesz), None)


def file_offset_of(segment: Segment, vaddr: int) -> int:
    """Where `vaddr`'s bytes are in the file, through the segment holding it."""
    return vaddr - segment.vaddr + segment.offset
