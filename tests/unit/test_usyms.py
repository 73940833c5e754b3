"""User frames named on the host (kernel/symbols/elfsyms.py, kernel/symbols/usyms.py): the
ELF reader on real binaries (one gcc builds here, this Python, the C
library), /proc/PID/maps parsed, and the per-process cache: maps read
again for a new library, names kept after the process exits, `[gone]`
when it exited first. No kernel, no root."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ktui.kernel.symbols.elfsyms import ElfError, read_elf
from ktui.kernel.symbols.usyms import GONE, UserSymbols, find_mapping, parse_maps

TARGET_C = Path(__file__).parents[1] / "kernel" / "ustack_target.c"


def nm_functions(path: Path) -> dict[str, int]:
    """The binary's text symbols as binutils sees them (the reference)."""
    out = subprocess.run(["nm", "--defined-only", str(path)], capture_output=True, text=True, check=True).stdout
    return {p[2]: int(p[0], 16) for p in (line.split() for line in out.splitlines())
            if len(p) == 3 and p[1] in "Tt"}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """ustack_target.c (the kernel test's target) built with gcc: a PIE."""
    out = tmp_path_factory.mktemp("elf") / "ustack_target"
    subprocess.run(["gcc", "-O0", "-fno-omit-frame-pointer", "-o", str(out), str(TARGET_C)], check=True)
    return out


def test_symtab_of_a_gcc_built_binary_matches_nm(built):
    elf = read_elf(str(built))
    reference = nm_functions(built)
    for name in ("ktui_leaf_read", "ktui_path_a", "ktui_path_b", "main"):
        start = reference[name]
        assert elf.lookup(start) == (name, 0)
        assert elf.lookup(start + 5) == (name, 5)
    # an address past the last byte of ktui_path_b's code is not ktui_path_b
    ends = sorted(reference.values())
    after_b = ends[ends.index(reference["ktui_path_b"]) + 1]
    assert elf.lookup(after_b - 1)[0] == "ktui_path_b"
    assert elf.lookup(after_b)[0] != "ktui_path_b"
    # PIE: the text is loaded at its file offset's address (one PT_LOAD covers it)
    assert elf.vaddr_of(reference["main"]) == reference["main"]


def test_a_stripped_binary_names_only_what_dynsym_exports(built, tmp_path):
    stripped = tmp_path / "stripped"
    subprocess.run(["strip", "-o", str(stripped), str(built)], check=True)
    assert "ktui_path_a" not in read_elf(str(stripped)).names
    exported = tmp_path / "exported"
    subprocess.run(["gcc", "-O0", "-rdynamic", "-o", str(exported), str(TARGET_C)], check=True)
    subprocess.run(["strip", str(exported)], check=True)
    elf = read_elf(str(exported))
    assert "ktui_path_a" in elf.names  # -rdynamic puts it in .dynsym, which strip keeps


def test_not_elf_or_cut_short_is_an_elf_error(built, tmp_path):
    text = tmp_path / "text"
    text.write_text("#!/bin/sh\n")
    with pytest.raises(ElfError):
        read_elf(str(text))
    cut = tmp_path / "cut"
    cut.write_bytes(built.read_bytes()[:40])
    with pytest.raises(ElfError):
        read_elf(str(cut))


MAPS = """\
55d4c1a00000-55d4c1a01000 r--p 00000000 08:01 1234                       /usr/bin/my prog
55d4c1a01000-55d4c1a02000 r-xp 00001000 08:01 1234                       /usr/bin/my prog
55d4c2a00000-55d4c2a21000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000001000 r-xp 00002000 08:01 99                         /usr/lib/old.so (deleted)
7f0000100000-7f0000200000 rw-p 00000000 00:00 0 
7ffd5e1f0000-7ffd5e1f2000 r-xp 00000000 00:00 0                          [vdso]
not a line
"""


def test_maps_lines_parse_with_spaces_deleted_files_and_anonymous_mappings():
    maps = parse_maps(MAPS)
    assert len(maps) == 6
    assert maps[1].path == "/usr/bin/my prog" and maps[1].offset == 0x1000 and maps[1].inode == 1234
    assert maps[1].is_file and not maps[2].is_file and not maps[4].is_file
    assert maps[3].path == "/usr/lib/old.so (deleted)"
    assert find_mapping(maps, 0x55d4c1a01abc) is maps[1]
    assert find_mapping(maps, 0x55d4c1a02000) is None  # the end is exclusive


def test_this_process_frames_are_named_from_its_maps():
    """Functions of the running Python and of the C library, at addresses
    taken from this very process: maps, load offsets and .dynsym together."""
    usyms = UserSymbols()
    libc = ctypes.CDLL("libc.so.6")
    getpid = ctypes.cast(libc.getpid, ctypes.c_void_p).value
    assert usyms.frame(os.getpid(), getpid + 2) == "getpid+0x2"
    getattr_ = ctypes.cast(ctypes.pythonapi.PyObject_GetAttr, ctypes.c_void_p).value
    assert usyms.frame(os.getpid(), getattr_) == "PyObject_GetAttr+0x0"
    assert Path(sys.executable).resolve().exists()


def fake_proc(root: Path, pid: int, maps: str) -> None:
    (root / str(pid)).mkdir(parents=True, exist_ok=True)
    (root / str(pid) / "maps").write_text(maps)


def test_cached_per_pid_named_after_exit_gone_when_never_seen(built, tmp_path):
    reference = nm_functions(built)
    base = 0x555555554000
    maps = "".join(f"{base + off:x}-{base + off + 0x1000:x} {perm} {off:08x} 08:01 42 {built}\n"
                   for off, perm in ((0, "r--p"), (0x1000, "r-xp")))
    now = [100.0]
    usyms = UserSymbols(proc=str(tmp_path), clock=lambda: now[0])
    fake_proc(tmp_path, 321, maps)
    addr = base + reference["ktui_path_a"] + 0x10
    assert usyms.frame(321, addr) == "ktui_path_a+0x10"
    shutil.rmtree(tmp_path / "321")  # the process exits
    assert usyms.frame(321, addr) == "ktui_path_a+0x10"  # named while it lived: kept
    assert usyms.frame(321, base + reference["main"]) == "main+0x0"  # its maps are cached
    assert usyms.frame(999, 0x1234) == f"0x1234{GONE}"  # exited before its stacks were read
    # an address outside every cached mapping: the maps are read again
    # (a library loaded since), but not more than once a second
    fake_proc(tmp_path, 321, maps + f"7f0000000000-7f0000001000 r-xp 00000000 08:01 43 {built}\n")
    assert usyms.frame(321, 0x7f0000000010) == "0x7f0000000010"  # still the old maps: no mapping
    now[0] += 2
    assert usyms.frame(321, 0x7f0000000010).startswith("ustack_target+0x")  # no symbol that low


def test_frames_outside_files_are_raw_or_named_by_mapping(tmp_path):
    fake_proc(tmp_path, 5, MAPS)
    usyms = UserSymbols(proc=str(tmp_path))
    assert usyms.frame(5, 0x55d4c2a00010) == "0x55d4c2a00010"  # the heap (JIT code, say)
    assert usyms.frame(5, 0x7ffd5e1f0010) == "[vdso]+0x10"
    # a file that cannot be read: its name and the offset in it
    assert usyms.frame(5, 0x55d4c1a01abc) == "my prog+0x1abc"
