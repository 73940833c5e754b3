"""User stack frames made readable (`stack: user` / `both`): a process's
/proc/PID/maps read when its stacks are read, then each address named by
the ELF file mapped there (elfsyms.py).

A frame reads `function+0xoff` where the file has a symbol for it (its
`.symtab`, or `.dynsym` on a stripped binary), `binary+0xaddr` (the file's
own address, what `addr2line -e binary` takes) where it has none, and
stays a raw address marked `[gone]` when the process had exited before its
stacks were read (its maps went with it), `0x...` outside any file mapping
(JIT code, the heap).

Caches, each bounded: a process's maps (re-read when an address falls
outside every mapping it had, at most once a second: it may have loaded a
library since), the symbols of each file (by device and inode, so a file
replaced under its name is read again), and every frame named (so a
process's stacks keep their names after it exits). A pid reused by a new
process is not told apart from the old one: its maps are used for both,
as bcc's and bpftrace's symbolizers do."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterable

from ktui.kernel.symbols.elfsyms import ElfError, ElfSymbols, read_elf

MAX_PIDS = 1024
MAX_FILES = 128
MAX_FRAMES = 1 << 16
MAPS_REREAD_S = 1.0
GONE_RECHECK_S = 10.0
GONE = "[gone]"


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    perms: str
    offset: int
    dev: str
    inode: int
    path: str

    @property
    def is_file(self) -> bool:
        return self.inode != 0 and self.path.startswith("/")


def parse_maps(text: str) -> list[Mapping]:
    """/proc/PID/maps lines -> Mappings (a line that does not parse is
    skipped: the format is the kernel's, but a path may hold anything)."""
    out = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 5:
            continue
        span, perms, offset, dev, inode = parts[:5]
        path = parts[5] if len(parts) > 5 else ""
        try:
            lo, hi = span.split("-", 1)
            out.append(Mapping(int(lo, 16), int(hi, 16), perms, int(offset, 16), dev, int(inode), path))
        except ValueError:
            continue
    return out


def find_mapping(maps: list[Mapping], addr: int) -> Mapping | None:
    for m in maps:
        if m.start <= addr < m.end:
            return m
    return None


class UserSymbols:
    """Names user addresses per process; one per session (its caches)."""

    def __init__(self, proc: str = "/proc", clock: Callable[[], float] = time.monotonic) -> None:
        self.proc = proc
        self.clock = clock
        self._maps: OrderedDict[int, tuple[float, list[Mapping] | None]] = OrderedDict()
        self._files: OrderedDict[tuple[str, int], ElfSymbols | None] = OrderedDict()
        self._frames: OrderedDict[tuple[int, int], str] = OrderedDict()
        # two units' stats may be read at once (each holds only its own lock)
        self._lock = threading.Lock()

    def frames(self, pid: int, addresses: Iterable[int]) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._frame(pid, a) for a in addresses)

    def frame(self, pid: int, addr: int) -> str:
        with self._lock:
            return self._frame(pid, addr)

    def _frame(self, pid: int, addr: int) -> str:
        key = (pid, addr)
        named = self._frames.get(key)
        if named is not None:
            self._frames.move_to_end(key)
            return named
        maps = self._maps_of(pid, addr)
        if maps is None:
            return f"0x{addr:x}{GONE}"
        mapping = find_mapping(maps, addr)
        if mapping is None:
            return f"0x{addr:x}"
        named = self._name(pid, mapping, addr)
        _put(self._frames, key, named, MAX_FRAMES)
        return named

    def _maps_of(self, pid: int, addr: int) -> list[Mapping] | None:
        now = self.clock()
        cached = self._maps.get(pid)
        if cached is not None:
            read_at, maps = cached
            if maps is None and now - read_at < GONE_RECHECK_S:
                return None
            if maps is not None and (find_mapping(maps, addr) is not None or now - read_at < MAPS_REREAD_S):
                self._maps.move_to_end(pid)
                return maps
        try:
            with open(f"{self.proc}/{pid}/maps", encoding="utf-8", errors="replace") as f:
                maps = parse_maps(f.read())
        except OSError:  # the process has exited (ENOENT, ESRCH)
            maps = None
        _put(self._maps, pid, (now, maps), MAX_PIDS)
        return maps

    def _name(self, pid: int, m: Mapping, addr: int) -> str:
        file_offset = addr - m.start + m.offset
        if not m.is_file:  # the vdso is code at a known place; the heap, stack, JIT are not
            return f"{m.path}+0x{addr - m.start:x}" if m.path in ("[vdso]", "[vsyscall]") else f"0x{addr:x}"
        base = os.path.basename(m.path.removesuffix(" (deleted)"))
        elf = self._elf(pid, m)
        if elf is None:
            return f"{base}+0x{file_offset:x}"
        vaddr = elf.vaddr_of(file_offset)
        if vaddr is None:
            return f"{base}+0x{file_offset:x}"
        found = elf.lookup(vaddr)
        if found is None:
            return f"{base}+0x{vaddr:x}"
        name, off = found
        return f"{name}+0x{off:x}"

    def _elf(self, pid: int, m: Mapping) -> ElfSymbols | None:
        key = (m.dev, m.inode)
        if key in self._files:
            self._files.move_to_end(key)
            return self._files[key]
        elf = None
        # the file the process maps, even if replaced or in another mount
        # namespace (map_files, root only), else its path seen from its root
        for path in (f"{self.proc}/{pid}/map_files/{m.start:x}-{m.end:x}",
                     f"{self.proc}/{pid}/root{m.path}", m.path):
            try:
                elf = read_elf(path)
                break
            except (OSError, ElfError):
                continue
        _put(self._files, key, elf, MAX_FILES)
        return elf


def _put(cache: OrderedDict, key, value, limit: int) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > limit:
        cache.popitem(last=False)
