"""A user function's file offset read from the ELF file itself
(kernel/symbols/uprobe_target.py, elf_lookup.py): tiny C programs built
here with gcc (PIE and -no-pie, stripped, a shared library, two static
functions of one name), checked against what binutils prints (objdump's
File Offset, nm), not against the module's own arithmetic; and the rules
of a probe on a file (Go, libraries). No kernel, no root."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ktui.kernel.symbols.uprobe_target import GO_RETURN, UprobeTargetError, check_probe_target, resolve
from ktui.lang.spec import parse_probe_text

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("objdump") is None,
                                reason="needs gcc and binutils")

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"

MAIN_C = r"""
#include <stdio.h>
int ktui_counter = 7;
__attribute__((noinline)) int ktui_add(int a, int b) { return a + b + ktui_counter; }
__attribute__((noinline)) int ktui_twice(int a) { return ktui_add(a, a); }
int ktui_helper_a(void);
int ktui_helper_b(void);
int main(int argc, char **argv) { printf("%d\n", ktui_twice(argc) + ktui_helper_a() + ktui_helper_b()); return 0; }
"""
# two source files, each with its own static `helper`: one name, two functions
HELPER_C = "__attribute__((noinline)) static int helper(void) {{ return {n}; }}\nint ktui_helper_{x}(void) {{ return helper(); }}\n"
LIB_C = "__attribute__((noinline)) int ktui_lib_add(int a, int b) { return a + b; }\n"


def _gcc(out: Path, *args: str) -> Path:
    subprocess.run(["gcc", "-O1", "-o", str(out), *args], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("uprobe")
    (where / "main.c").write_text(MAIN_C)
    (where / "a.c").write_text(HELPER_C.format(n=1, x="a"))
    (where / "b.c").write_text(HELPER_C.format(n=2, x="b"))
    (where / "lib.c").write_text(LIB_C)
    return where


def _program(sources: Path, name: str, *flags: str) -> Path:
    return _gcc(sources / name, *flags, str(sources / "main.c"), str(sources / "a.c"), str(sources / "b.c"))


@pytest.fixture(scope="module")
def pie(sources) -> Path:
    return _program(sources, "pie", "-pie", "-fPIE")


@pytest.fixture(scope="module")
def nopie(sources) -> Path:
    return _program(sources, "nopie", "-no-pie", "-fno-PIE")


@pytest.fixture(scope="module")
def library(sources) -> Path:
    return _gcc(sources / "libktui.so.1", "-shared", "-fPIC", "-Wl,-soname,libktui.so.1", str(sources / "lib.c"))


def objdump_file_offset(path: Path, symbol: str) -> int:
    """The file offset binutils gives the function: `<sym> (File Offset: 0x...)`."""
    out = subprocess.run(["objdump", "-d", "-F", f"--disassemble={symbol}", str(path)],
                         capture_output=True, text=True, check=True).stdout
    found = re.search(rf"<{re.escape(symbol)}> \(File Offset: (0x[0-9a-f]+)\):", out)
    assert found, out[:400]
    return int(found.group(1), 16)


def nm_address(path: Path, symbol: str, *flags: str) -> int:
    out = subprocess.run(["nm", *flags, "--defined-only", str(path)], capture_output=True, text=True,
                         check=True).stdout
    return next(int(p[0], 16) for p in (line.split() for line in out.splitlines())
                if len(p) == 3 and p[2] == symbol)


def first_load_vaddr(path: Path) -> int:
    out = subprocess.run(["readelf", "-lW", str(path)], capture_output=True, text=True, check=True).stdout
    return min(int(line.split()[2], 16) for line in out.splitlines() if line.strip().startswith("LOAD"))


# ---------------------------------------------------------------- offsets


@pytest.mark.parametrize("binary", ["pie", "nopie", "library"])
def test_the_file_offset_is_the_one_objdump_gives(binary, request):
    path = request.getfixturevalue(binary)
    symbol = "ktui_lib_add" if binary == "library" else "ktui_add"
    found = resolve(str(path), symbol)
    assert found.file_offset == objdump_file_offset(path, symbol)
    assert found.vaddr == nm_address(path, symbol)
    assert found.path == str(path.resolve()) and found.symbol == symbol


def test_a_no_pie_executable_proves_the_conversion(nopie):
    # p_vaddr 0x400000: the file offset is not the address, as it is in a PIE
    assert first_load_vaddr(nopie) == 0x400000
    found = resolve(str(nopie), "ktui_add")
    assert found.vaddr != found.file_offset
    assert found.vaddr - found.file_offset == 0x400000


def test_an_offset_into_the_function_and_an_address(nopie):
    base = objdump_file_offset(nopie, "ktui_add")
    assert resolve(str(nopie), "ktui_add", offset=4).file_offset == base + 4
    by_address = resolve(str(nopie), address=nm_address(nopie, "ktui_twice"))
    assert by_address.file_offset == objdump_file_offset(nopie, "ktui_twice") and by_address.symbol is None


def test_the_bytes_at_the_offset_are_the_functions_code(nopie):
    """What objdump disassembles first is at the file offset resolve gives."""
    out = subprocess.run(["objdump", "-d", "--disassemble=ktui_add", str(nopie)],
                         capture_output=True, text=True, check=True).stdout
    first = next(line for line in out.splitlines() if re.match(r"\s+[0-9a-f]+:\t", line))
    code = bytes.fromhex(first.split("\t")[1].replace(" ", ""))
    at = resolve(str(nopie), "ktui_add").file_offset
    assert nopie.read_bytes()[at : at + len(code)] == code


# ---------------------------------------------------------------- refusals


def _refused(*args, **kwargs) -> UprobeTargetError:
    with pytest.raises(UprobeTargetError) as info:
        resolve(*args, **kwargs)
    assert "\n" not in str(info.value)
    return info.value


def test_a_stripped_binary_without_the_symbol(pie, sources):
    stripped = sources / "stripped"
    subprocess.run(["strip", "-o", str(stripped), str(pie)], check=True)
    err = _refused(str(stripped), "ktui_add")
    assert str(err) == f"{stripped} has no .symtab (stripped) and its .dynsym does not export ktui_add"
    exported = _program(sources, "exported", "-pie", "-fPIE", "-rdynamic")
    subprocess.run(["strip", str(exported)], check=True)
    assert resolve(str(exported), "ktui_add").vaddr == nm_address(exported, "ktui_add", "-D")


def test_a_name_defined_twice_is_refused(nopie):
    err = _refused(str(nopie), "helper")
    assert "helper is defined 2 times" in str(err) and f"{nopie}:0xADDR" in str(err)


def test_an_unknown_name_gets_a_did_you_mean(nopie):
    assert str(_refused(str(nopie), "ktui_ad")) == f"{nopie} has no function ktui_ad; did you mean ktui_add?"


def test_data_and_imports_are_not_functions(nopie):
    assert "ktui_counter" in str(_refused(str(nopie), "ktui_counter")) and "is data, not a function" in str(
        _refused(str(nopie), "ktui_counter"))
    assert "calls printf from a shared library but does not define it" in str(_refused(str(nopie), "printf"))


def test_an_offset_past_the_function_and_an_address_outside_the_code(nopie):
    assert "is past the end of ktui_add" in str(_refused(str(nopie), "ktui_add", offset=0x10000))
    err = _refused(str(nopie), address=nm_address(nopie, "ktui_counter"))
    assert "is in no executable PT_LOAD segment" in str(err)


def test_what_is_not_an_x86_64_executable_or_library(tmp_path, nopie, sources):
    (tmp_path / "text").write_text("#!/bin/sh\n")
    assert _refused(str(tmp_path / "text"), "f").part == "path"
    assert "not an ELF file" in str(_refused(str(tmp_path / "text"), "f"))
    assert str(_refused(str(tmp_path / "none"), "f")) == f"{tmp_path / 'none'}: no such file"
    assert "not a regular file" in str(_refused(str(tmp_path), "f"))
    raw = bytearray(nopie.read_bytes())
    raw[4] = 1  # ELFCLASS32
    (tmp_path / "elf32").write_bytes(bytes(raw))
    assert "not a 64-bit x86-64 ELF file" in str(_refused(str(tmp_path / "elf32"), "f"))
    raw = bytearray(nopie.read_bytes())
    raw[18:20] = (183).to_bytes(2, "little")  # EM_AARCH64
    (tmp_path / "arm").write_bytes(bytes(raw))
    assert "not an x86-64 file" in str(_refused(str(tmp_path / "arm"), "f"))
    obj = tmp_path / "lib.o"
    subprocess.run(["gcc", "-c", "-o", str(obj), str(sources / "lib.c")], check=True)
    assert "is an object file" in str(_refused(str(obj), "ktui_lib_add"))


# ---------------------------------------------------------------- what the file is


def test_libraries_and_executables(pie, nopie, library, sources):
    assert resolve(str(library), "ktui_lib_add").is_library
    no_soname = _gcc(sources / "plugin.so", "-shared", "-fPIC", str(sources / "lib.c"))
    assert resolve(str(no_soname), "ktui_lib_add").is_library  # no PT_INTERP, not flagged PIE
    assert not resolve(str(pie), "ktui_add").is_library  # ET_DYN too, but an executable
    assert not resolve(str(nopie), "ktui_add").is_library


def _go(tmp_path: Path, nopie: Path) -> Path:
    blob = tmp_path / "blob"
    blob.write_bytes(b"\xf1\xff\xff\xff\x00\x00\x01\x08")  # a Go 1.20 pclntab's magic, as a token
    gobin = tmp_path / "gobin"
    subprocess.run(["objcopy", "--add-section", f".gopclntab={blob}", str(nopie), str(gobin)], check=True)
    return gobin


def test_go_is_told_by_its_sections(tmp_path, nopie):
    assert not resolve(str(nopie), "ktui_add").is_go
    assert resolve(str(_go(tmp_path, nopie)), "ktui_add").is_go


def test_a_return_probe_on_go_is_refused_and_arguments_get_a_note(tmp_path, nopie):
    gobin = _go(tmp_path, nopie)
    with pytest.raises(UprobeTargetError, match="a uretprobe on a Go binary crashes it"):
        check_probe_target(parse_probe_text(f"{gobin}:ktui_add:r"), None)
    assert GO_RETURN.endswith("probe the call (:c) instead")
    _found, notes = check_probe_target(parse_probe_text(f"{gobin}:ktui_add:c:a1"), None)
    assert len(notes) == 1 and "Go passes arguments in its own registers" in notes[0]
    assert check_probe_target(parse_probe_text(f"{gobin}:ktui_add:c:rax"), None)[1] == []


def test_a_library_without_a_pid_gets_a_note(library):
    probe = parse_probe_text(f"{library}:ktui_lib_add:c:a1")
    found, notes = check_probe_target(probe, None)
    assert found.file_offset == objdump_file_offset(library, "ktui_lib_add")
    assert notes == [f"{library} is a shared library: without --pid the probe traps in every process "
                     "that maps it"]
    assert check_probe_target(probe, 1234)[1] == []


# ---------------------------------------------------------------- the C library


@pytest.mark.skipif(not Path(LIBC).exists(), reason="no x86-64 glibc here")
def test_libc_versions_and_ifuncs():
    malloc = resolve(LIBC, "malloc")
    assert malloc.vaddr == nm_address(Path(LIBC), "malloc@@GLIBC_2.2.5", "-D") and malloc.is_library
    # memcpy is in .dynsym twice: the default version is the one new programs bind to
    default = next(int(line.split()[0], 16) for line in subprocess.run(
        ["nm", "-D", "--defined-only", LIBC], capture_output=True, text=True, check=True).stdout.splitlines()
        if line.split()[-1].startswith("memcpy@@"))
    memcpy = resolve(LIBC, "memcpy")
    assert memcpy.vaddr == default
    _found, notes = check_probe_target(parse_probe_text(f"{LIBC}:memcpy:c"), 1)
    if memcpy.is_ifunc:
        assert any("indirect function (IFUNC)" in n for n in notes)
    assert "did you mean malloc?" in str(_refused(LIBC, "mallok"))
