"""USDT probe points of an ELF file (`sys/sdt.h`'s DTRACE_PROBE/STAP_PROBE),
read from its `.note.stapsdt` notes in plain Python, and what the kernel's
uprobe needs to attach to one.

Each probe point the compiler emitted is one note (type 3, owner
`stapsdt`): three addresses, then `provider\\0name\\0args\\0`. The
addresses are link-time virtual addresses: `pc` (a `nop` where the probe
fires), `base` (the address `.stapsdt.base` had when the note was written)
and `semaphore` (0: none). A tool that moves the file's addresses after
linking (prelink) moves `.stapsdt.base` too, not the notes, so the real pc
is `pc + (.stapsdt.base's address now - base)`; then, as a uprobe on a
function (`uprobe_target`), the PT_LOAD segment that holds it turns it into
the file offset the kernel wants. A semaphore is a `unsigned short` in
`.probes` (data) that the program tests before computing the arguments;
the kernel increments it while a uprobe with its file offset
(`ref_ctr_offset`) is attached, so it is converted through any PT_LOAD,
as libbpf does, without the base adjustment.

A probe inlined in several places has one note per place (`sites`): ktui
attaches at each, and reads them as one probe when the arguments it reads
are in the same place at every site (`bind_usdt` refuses otherwise).
"""

from __future__ import annotations

import difflib
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
from ktui.kernel.symbols.elfsyms import ElfError, ElfLayout, read_at
from ktui.kernel.symbols.uprobe_target import is_library
from ktui.kernel.symbols.usdt_args import ArgSpec, parse_arg
from ktui.lang.bind_usdt import bind_usdt_args
from ktui.lang.model import Kind, Probe, SpecError

NOTE_SECTION, BASE_SECTION = ".note.stapsdt", ".stapsdt.base"
NT_STAPSDT, STAPSDT_OWNER = 3, b"stapsdt\0"
_NOTE = struct.Struct("<III")
_ADDRESSES = struct.Struct("<QQQ")


class UsdtError(UprobeTargetError):
    """A USDT probe that cannot be read or attached; one line. `part`:
    "path" (the file) or "function" (PROVIDER:NAME in it)."""


@dataclass(frozen=True)
class UsdtProbe:
    """One probe point as its note says (link-time addresses)."""

    provider: str
    name: str
    pc: int
    base: int
    semaphore: int  # 0: none
    args: tuple[ArgSpec, ...]

    @property
    def full_name(self) -> str:
        return f"{self.provider}:{self.name}"

    @property
    def args_text(self) -> str:
        return " ".join(a.text for a in self.args)


@dataclass(frozen=True)
class UsdtTarget:
    """What the uprobe PMU takes to fire at a USDT probe point, at every
    site of it: the file (`path`), a breakpoint at each of `file_offsets`
    (the perf event's probe_offset), and `ref_ctr_offset` (the semaphore's
    file offset, 0: none; the PMU's config bits 32-63), and how its
    arguments read (`args`, the first site's; `bind_usdt` checks the rest)."""

    path: str  # os.path.realpath of the file as written
    provider: str
    name: str
    file_offsets: tuple[int, ...]
    ref_ctr_offset: int
    args: tuple[ArgSpec, ...]
    sites: tuple[UsdtProbe, ...]
    is_library: bool

    @property
    def file_offset(self) -> int:
        """The first site's (most probe points have one)."""
        return self.file_offsets[0]


# ---------------------------------------------------------------- reading the notes


def usdt_probes(path: str) -> tuple[UsdtProbe, ...]:
    """Every probe point's note in the file, in file order (empty when it
    has none). Raises UsdtError (one line) for a file that cannot be read."""
    with open_probed_file(path) as f:
        return _notes(f, read_probed_layout(f, path), path)[0]


def _notes(f: BinaryIO, layout: ElfLayout, path: str) -> tuple[tuple[UsdtProbe, ...], int | None]:
    """The notes, and `.stapsdt.base`'s address now (None: no such section)."""
    section = layout.section(NOTE_SECTION)
    base = layout.section(BASE_SECTION)
    if section is None:
        return (), None
    if section.size > MAX_HEADER_BYTES:
        raise UsdtError(f"{path}: its {NOTE_SECTION} is larger than {MAX_HEADER_BYTES} bytes", part="path")
    try:
        data = read_at(f, section.offset, section.size)
    except ElfError:
        raise UsdtError(f"{path} is cut short (its {NOTE_SECTION} is)", part="path") from None
    out, at = [], 0
    while at + _NOTE.size <= len(data):
        namesz, descsz, type_ = _NOTE.unpack_from(data, at)
        owner = data[at + _NOTE.size : at + _NOTE.size + namesz]
        desc_at = at + _NOTE.size + _align4(namesz)
        desc = data[desc_at : desc_at + descsz]
        at = desc_at + _align4(descsz)
        if type_ != NT_STAPSDT or owner != STAPSDT_OWNER or len(desc) < _ADDRESSES.size:
            continue
        pc, note_base, semaphore = _ADDRESSES.unpack_from(desc)
        texts = desc[_ADDRESSES.size :].split(b"\0")
        if len(texts) < 3:
            continue  # a note cut short: not a probe point
        provider, name, args = (t.decode("utf-8", "replace") for t in texts[:3])
        specs = tuple(parse_arg(a) for a in args.split()) if args else ()
        out.append(UsdtProbe(provider, name, pc, note_base, semaphore, specs))
    return tuple(out), (base.addr if base is not None else None)


def _align4(n: int) -> int:
    return (n + 3) & ~3


# ---------------------------------------------------------------- one probe point


def resolve_usdt(path: str, provider: str, name: str) -> UsdtTarget:
    """`provider:name`'s sites in the ELF file `path`, as file offsets.
    Raises UsdtError (one line)."""
    import os

    real = os.path.realpath(path)
    with open_probed_file(path, real) as f:
        layout = read_probed_layout(f, path)
        probes, base_now = _notes(f, layout, path)
        if not probes:
            raise UsdtError(f"{path} has no USDT probes (no {NOTE_SECTION} notes: it was built "
                            "without sys/sdt.h probes, or they were stripped)", part="path")
        sites = tuple(p for p in probes if p.provider == provider and p.name == name)
        if not sites:
            raise UsdtError(_missing(path, provider, name, probes))
        offsets = tuple(_site_offset(layout, path, site, base_now) for site in sites)
        semaphores = {site.semaphore for site in sites}
        if len(semaphores) > 1:
            raise UsdtError(f"{provider}:{name} in {path} has {len(semaphores)} semaphores at its "
                            f"{len(sites)} sites: its notes disagree")
        semaphore = semaphores.pop()
        ref_ctr = _semaphore_offset(layout, path, sites[0]) if semaphore else 0
        return UsdtTarget(real, provider, name, offsets, ref_ctr, sites[0].args, sites,
                          is_library(f, layout))


def _site_offset(layout: ElfLayout, path: str, site: UsdtProbe, base_now: int | None) -> int:
    pc = site.pc
    if base_now is not None and site.base:
        pc += base_now - site.base  # the file's addresses moved after linking (prelink)
    segment = code_segment_at(layout, pc)
    if segment is None:
        raise UsdtError(f"{site.full_name}'s probe point (0x{pc:x}) is in no executable PT_LOAD "
                        f"segment of {path}")
    return file_offset_of(segment, pc)


def _semaphore_offset(layout: ElfLayout, path: str, site: UsdtProbe) -> int:
    for segment in layout.segments:
        if segment.vaddr <= site.semaphore < segment.vaddr + segment.filesz:
            return site.semaphore - segment.vaddr + segment.offset
    raise UsdtError(f"{site.full_name}'s semaphore (0x{site.semaphore:x}) is in no PT_LOAD segment "
                    f"of {path}'s file")


def _missing(path: str, provider: str, name: str, probes: tuple[UsdtProbe, ...]) -> str:
    known = list(dict.fromkeys(p.full_name for p in probes))
    close = difflib.get_close_matches(f"{provider}:{name}", known, n=1, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    listed = ", ".join(known[:6]) + (", ..." if len(known) > 6 else "")
    return f"{path} has no USDT probe {provider}:{name}{hint} (it has {listed})"


# ---------------------------------------------------------------- a probe on it


def bind_usdt(probe: Probe) -> tuple[Probe, UsdtTarget]:
    """`probe` (`PATH:PROVIDER:NAME:usdt`) with each a1..a6 it reads
    (fetches, aggregations, filter) bound to where its note places it, and
    the target to attach. Raises UsdtError (file and probe point) or
    SpecError (an argument: its column in `probe.spec_text`), one line."""
    target = probe.target
    if target.usdt is None or target.path is None or probe.kind is not Kind.USDT:
        raise ValueError(f"{target} is not a USDT probe point")
    found = resolve_usdt(target.path, target.usdt_provider, target.usdt_name)
    bound = bind_usdt_args(probe, [site.args for site in found.sites])
    return bound, found


def check_usdt_target(probe: Probe, pid: int | None) -> tuple[UsdtTarget, list[str]]:
    """As `uprobe_target.check_probe_target`, for a USDT probe: the target
    and notes to show; its arguments bound (and so checked) on the way:
    an argument's refusal is a UsdtError too, for the callers of
    `check_probe_target` (`ktui check`, the add dialog), which catch that."""
    try:
        found = bind_usdt(probe)[1]
    except SpecError as err:
        raise UsdtError(err.message) from None
    notes = []
    if found.is_library and pid is None:
        notes.append(f"{probe.target.path} is a shared library: without --pid the probe traps in every "
                     "process that maps it")
    return found, notes


__all__ = ["UsdtError", "UsdtProbe", "UsdtTarget", "bind_usdt", "check_usdt_target", "resolve_usdt",
           "usdt_probes"]
