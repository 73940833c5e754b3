"""USDT probes (issue 31), host side: the language (`PATH:PROVIDER:NAME:usdt`),
the notes of tiny C programs built here with sys/sdt.h (-O2: arguments in
registers, -O0: on the stack, a constant, a semaphore, -no-pie, a shared
library, a probe inlined twice), checked against what `readelf` prints
and against the bytes at the site (sys/sdt.h puts a `nop` there), not
against the module's own arithmetic. No kernel, no root."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from ktui.kernel.symbols.usdt import UsdtError, bind_usdt, check_usdt_target, resolve_usdt, usdt_probes
from ktui.kernel.symbols.usdt_args import parse_arg
from ktui.lang.model import Builtin, Const, Deref, Reg, SpecError, UsdtArg, positional
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_probe_text

SDT_H = Path("/usr/include/x86_64-linux-gnu/sys/sdt.h")
needs_sdt = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("readelf") is None
                               or not (SDT_H.exists() or Path("/usr/include/sys/sdt.h").exists()),
                               reason="needs gcc, readelf and sys/sdt.h")
NOP = 0x90

PROG_C = r"""
#include <sys/sdt.h>
#include <stdio.h>
int main(int argc, char **argv) {
    long x = argc * 3L;
    const char *s = argv[0];
    for (int i = 0; i < 2; i++) {
        DTRACE_PROBE3(ktui, tick, argc, x, s);
        DTRACE_PROBE2(ktui, konst, 5, i);
        x += i;
    }
    printf("%ld\n", x);
    return 0;
}
"""

SEMAPHORE_C = r"""
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
__attribute__((section(".probes"))) unsigned short ktui_tick_semaphore, ktui_twice_semaphore;
static inline __attribute__((always_inline)) void hit(long v) { DTRACE_PROBE1(ktui, twice, v); }
int main(int argc, char **argv) {
    if (ktui_tick_semaphore) DTRACE_PROBE2(ktui, tick, argc, argv[0]);
    hit(argc);
    hit(argc * 7L);
    return 0;
}
"""

LIB_C = r"""
#include <sys/sdt.h>
int ktui_lib_call(int v, const char *s) { DTRACE_PROBE2(ktuilib, call, v, s); return v + 1; }
"""


def _build(tmp_path: Path, name: str, source: str, *flags: str) -> str:
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / name
    subprocess.run(["gcc", *flags, "-o", str(out), str(src)], check=True, capture_output=True)
    return str(out)


def _readelf_notes(path: str) -> list[dict]:
    """Each stapsdt note as `readelf -n` prints it."""
    text = subprocess.run(["readelf", "-n", path], check=True, capture_output=True, text=True).stdout
    pattern = re.compile(r"Provider: (\S+)\s+Name: (\S+)\s+Location: (0x[0-9a-f]+), Base: (0x[0-9a-f]+), "
                         r"Semaphore: (0x[0-9a-f]+)\s+Arguments: ?([^\n]*)")
    return [{"provider": m[1], "name": m[2], "pc": int(m[3], 16), "base": int(m[4], 16),
             "semaphore": int(m[5], 16), "args": m[6].split()} for m in pattern.finditer(text)]


def _section(path: str, name: str) -> tuple[int, int]:
    """(address, file offset) of a section, as `readelf -S -W` prints it."""
    text = subprocess.run(["readelf", "-S", "-W", path], check=True, capture_output=True, text=True).stdout
    for line in text.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 4 and fields[1] == name:
            return int(fields[3], 16), int(fields[4], 16)
    raise AssertionError(f"no section {name} in {path}")


def _byte_at(path: str, offset: int) -> int:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(1)[0]


def _bound(spec: str):
    probe, target = bind_usdt(parse_probe_text(spec))
    return probe, target, [positional(f.expr) for f in probe.fetches]


# ---------------------------------------------------------------- the language


def test_a_usdt_spec_parses_and_prints_back():
    probe = parse_probe_text("ticks=/tmp/prog:ktui:tick:usdt:a1,a2,a3:string,comm,+8(a2):u32 if a1 > 2")
    assert probe.target.path == "/tmp/prog" and probe.target.usdt == "ktui:tick"
    assert (probe.target.usdt_provider, probe.target.usdt_name) == ("ktui", "tick")
    assert probe.kind.value == "usdt" and probe.label == "ticks"
    assert probe.fetches[0].expr == UsdtArg(1) and probe.fetches[3].expr == Builtin("comm")
    assert probe.fetches[4].expr == Deref(8, UsdtArg(2))
    assert str(probe) == "ticks=/tmp/prog:ktui:tick:usdt:a1,a2,a3:string,comm,+8(a2):u32"
    assert parse_probe_text(f"{probe} if a1 > 2") == probe


@pytest.mark.parametrize("spec, col, words", [
    ("ktui:tick:usdt", 1, "a USDT probe is in a file"),
    ("vfs_read:usdt", 1, "kind usdt is for a USDT probe point of a user binary"),
    ("/tmp/p:usdt", 8, "names its provider and probe"),
    ("/tmp/p:tick:usdt", 13, "names its provider and probe"),
    ("/tmp/p:ktui:tick:c", 18, "takes kind usdt, got c"),
    ("/tmp/p:ktui:tick:r", 18, "takes kind usdt, got r"),
    ("/tmp/p:ktui:tick:x", 18, 'takes kind usdt, got "x"'),
    ("/tmp/p:ktui:tick+4:usdt", 17, "has no offset"),
    ("/tmp/p:ktui:tick", 17, "expected :usdt"),
    ("/tmp/p:ktui:tick:usdt:a1,retval", 26, "no registers, retval or names"),
    ("/tmp/p:ktui:tick:usdt:rdi", 23, "no registers, retval or names"),
    ("/tmp/p:ktui:tick:usdt:+8(di)", 26, "no registers, retval or names"),
    ("/tmp/p:ktui:tick:usdt:count", 23, "no registers, retval or names"),
    ("/tmp/p:ktui:tick:usdt:a7", 23, "arguments are a1..a6"),
    ("/tmp/p:ktui:tick:usdt:a1->x", 25, "not a name with members"),
])
def test_usdt_refusals_name_the_column(spec, col, words):
    with pytest.raises(SpecError) as err:
        parse_probe_text(spec)
    assert err.value.col == col and words in err.value.message, str(err.value)


@pytest.mark.parametrize("spec, words", [
    ("/tmp/p:ktui:tick:usdt if rdi > 1", "no registers, retval or names"),
    ("/tmp/p:ktui:tick:usdt if size > 1", "unknown name"),
])
def test_a_usdt_filter_reads_arguments_only(spec, words):
    with pytest.raises(SpecError, match=words):
        parse_probe_text(spec)


@pytest.mark.parametrize("key, words", [
    ("maxactive: 8", "maxactive: a USDT probe has no return"),
    ("errno: on", "errno: only a return probe"),
    ("attach: fentry", "attach: fentry is for kernel functions; a USDT probe attaches as a uprobe"),
])
def test_usdt_options_of_other_probes_are_refused_in_a_probe_set(key, words):
    from ktui.lang.model import ProbeSetError

    with pytest.raises(ProbeSetError, match=words):
        loads_probeset(f"name: u\nprobes:\n  - spec: /tmp/p:ktui:tick:usdt:a1\n    {key}\n")


def test_usdt_probes_load_from_yaml_and_save_back_equal():
    ps = loads_probeset("""
name: u
probes:
  - spec: ticks=/tmp/p:ktui:tick:usdt:a1,s=a3:string
    filter: a1 > 2 && s == "x"
    hist: a2
  - spec: /usr/bin/python3.11:python:function__entry:usdt:a2:string
""")
    ticks, py = ps.probes
    assert ticks.label == "ticks" and ticks.agg.hist.expr == UsdtArg(2)
    assert py.target.usdt == "python:function__entry"
    assert loads_probeset(dumps_probeset(ps)) == ps


# ---------------------------------------------------------------- argument specs


@pytest.mark.parametrize("text, type_, expr", [
    ("-4@%edi", "s32", Reg("di")),
    ("8@%rax", "u64", Reg("ax")),
    ("-8@-24(%rbp)", "s64", Deref(-24, Reg("bp"))),
    ("4@$5", "u32", Const(5)),
    ("-4@$-1", "s32", Const(-1)),
    ("8@8(%rsp)", "u64", Deref(8, Reg("sp"))),
    ("8@(%rsi)", "u64", Deref(0, Reg("si"))),
    ("-2@%ax", "s16", Reg("ax")),
    ("1@%sil", "u8", Reg("si")),
    ("1@%dil", "u8", Reg("di")),
    ("-4@%r8d", "s32", Reg("r8")),
    ("2@%r15w", "u16", Reg("r15")),
])
def test_argument_specs_read_as_positional_expressions(text, type_, expr):
    arg = parse_arg(text)
    assert (arg.type, arg.expr, arg.problem) == (type_, expr, "")
    assert arg.ctype == f"usdt {text}"


@pytest.mark.parametrize("text, words", [
    ("8@(%rax,%rbx,8)", "indexed"),
    ("8@foo(%rip)", "%rip-relative"),
    ("8@%fs:8", "segment"),
    ("1@%ah", "second byte"),
    ("8@$foo", "symbol's address"),
    ("3@%eax", "3-byte"),
    ("8@%xmm0", "not an integer register"),
])
def test_argument_specs_not_read_say_why(text, words):
    arg = parse_arg(text)
    assert arg.expr is None and words in arg.problem


# ---------------------------------------------------------------- notes of real programs


@needs_sdt
def test_o2_arguments_in_registers(tmp_path):
    prog = _build(tmp_path, "prog", PROG_C, "-O2")
    notes = {(n["provider"], n["name"]): n for n in _readelf_notes(prog)}
    found = {p.full_name: p for p in usdt_probes(prog)}
    assert set(found) == {"ktui:tick", "ktui:konst"}
    tick = notes[("ktui", "tick")]
    assert found["ktui:tick"].args_text.split() == tick["args"]
    target = resolve_usdt(prog, "ktui", "tick")
    # a PIE's code loads at its file offset: readelf's Location is the offset
    assert target.file_offsets == (tick["pc"],) and _byte_at(prog, target.file_offset) == NOP
    assert target.ref_ctr_offset == 0 and not target.is_library
    probe, _, exprs = _bound(f"{prog}:ktui:tick:usdt:a1,a3:string,+8(a3):u32,comm")
    args = [parse_arg(a) for a in tick["args"]]
    assert exprs[0] == args[0].expr and probe.fetches[0].effective_type == args[0].type
    assert probe.fetches[0].ctype == f"usdt {tick['args'][0]}"
    assert isinstance(exprs[1], Reg) and exprs[1] == args[2].expr  # the pointer's register: the text's address
    assert exprs[2] == Deref(8, args[2].expr) and probe.fetches[2].effective_type == "u32"
    assert str(probe) == f"{prog}:ktui:tick:usdt:a1,a3:string,+8(a3):u32,comm"


@needs_sdt
def test_o0_arguments_in_memory(tmp_path):
    prog = _build(tmp_path, "prog", PROG_C, "-O0")
    tick = next(n for n in _readelf_notes(prog) if n["name"] == "tick")
    assert all(re.fullmatch(r"-?\d@-?\d+\(%rbp\)", a) for a in tick["args"]), tick["args"]
    target = resolve_usdt(prog, "ktui", "tick")
    assert target.file_offsets == (tick["pc"],) and _byte_at(prog, target.file_offset) == NOP
    _, _, exprs = _bound(f"{prog}:ktui:tick:usdt:a1,a3:string")
    first = parse_arg(tick["args"][0]).expr
    assert isinstance(first, Deref) and first.inner == Reg("bp") and exprs[0] == first
    # the pointer is on the stack: the text is where it points
    assert exprs[1] == Deref(0, parse_arg(tick["args"][2]).expr)


@needs_sdt
def test_a_constant_argument(tmp_path):
    prog = _build(tmp_path, "prog", PROG_C, "-O2")
    probe, _, exprs = _bound(f"{prog}:ktui:konst:usdt:a1")
    assert exprs == [Const(5)] and probe.fetches[0].effective_type == "s32"
    for spec in (f"{prog}:ktui:konst:usdt:+8(a1)", f"{prog}:ktui:konst:usdt:a1:string"):
        with pytest.raises(SpecError, match="is a constant, not an address"):
            bind_usdt(parse_probe_text(spec))


@needs_sdt
def test_a_semaphore_and_a_probe_inlined_twice(tmp_path):
    prog = _build(tmp_path, "sema", SEMAPHORE_C, "-O2")
    notes = _readelf_notes(prog)
    tick = next(n for n in notes if n["name"] == "tick")
    probes_addr, probes_offset = _section(prog, ".probes")
    target = resolve_usdt(prog, "ktui", "tick")
    assert tick["semaphore"] and target.ref_ctr_offset == tick["semaphore"] - probes_addr + probes_offset
    twice = resolve_usdt(prog, "ktui", "twice")
    sites = [n["pc"] for n in notes if n["name"] == "twice"]
    assert len(sites) == 2 and twice.file_offsets == tuple(sites)
    assert all(_byte_at(prog, off) == NOP for off in twice.file_offsets)
    bind_usdt(parse_probe_text(f"{prog}:ktui:twice:usdt:comm"))  # no argument read: every site
    twice_args = {n["args"][0] for n in notes if n["name"] == "twice"}
    if len(twice_args) > 1:  # the compiler put v in two places
        with pytest.raises(SpecError, match="in different places at its 2 sites"):
            bind_usdt(parse_probe_text(f"{prog}:ktui:twice:usdt:a1"))


@needs_sdt
def test_a_no_pie_executable_converts_through_its_segment(tmp_path):
    prog = _build(tmp_path, "nopie", PROG_C, "-O2", "-no-pie")
    tick = next(n for n in _readelf_notes(prog) if n["name"] == "tick")
    target = resolve_usdt(prog, "ktui", "tick")
    assert tick["pc"] >= 0x400000 and target.file_offset != tick["pc"]
    assert _byte_at(prog, target.file_offset) == NOP


@needs_sdt
def test_a_shared_library(tmp_path):
    lib = _build(tmp_path, "libk.so", LIB_C, "-O2", "-shared", "-fPIC", "-Wl,-soname,libk.so")
    call = next(n for n in _readelf_notes(lib) if n["name"] == "call")
    target, notes = check_usdt_target(parse_probe_text(f"{lib}:ktuilib:call:usdt:a1,a2:string"), None)
    assert target.is_library and "shared library" in notes[0]
    assert target.file_offsets == (call["pc"],) and _byte_at(lib, target.file_offset) == NOP
    assert check_usdt_target(parse_probe_text(f"{lib}:ktuilib:call:usdt"), 42)[1] == []


@needs_sdt
def test_refusals_against_the_file(tmp_path):
    prog = _build(tmp_path, "prog", PROG_C, "-O2")
    bare = _build(tmp_path, "bare", "int main(void) { return 0; }\n", "-O2")
    with pytest.raises(UsdtError, match="has no USDT probes"):
        resolve_usdt(bare, "ktui", "tick")
    with pytest.raises(UsdtError, match=r"no USDT probe ktui:tik; did you mean ktui:tick\?"):
        resolve_usdt(prog, "ktui", "tik")
    with pytest.raises(SpecError, match=r"a5: ktui:tick has 3 arguments \(-4@%edi") as err:
        bind_usdt(parse_probe_text(f"{prog}:ktui:tick:usdt:a1,a5"))
    assert err.value.col == len(f"{prog}:ktui:tick:usdt:a1,") + 1
    with pytest.raises(SpecError, match="is a 4-byte value, not an address"):
        bind_usdt(parse_probe_text(f"{prog}:ktui:tick:usdt:+8(a1)"))
    with pytest.raises(UsdtError, match="a4: ktui:tick has 3 arguments"):  # as ktui check sees it
        check_usdt_target(parse_probe_text(f"{prog}:ktui:tick:usdt if a4 > 1"), None)


@needs_sdt
def test_a_filter_argument_is_bound_with_its_type(tmp_path):
    prog = _build(tmp_path, "prog", PROG_C, "-O2")
    probe, _ = bind_usdt(parse_probe_text(f"{prog}:ktui:tick:usdt:comm if a1 > 1 && a2 != 0"))
    assert probe.bindings["a1"].binding.type == "s32" and positional(probe.bindings["a1"]) == Reg("di")
    assert probe.bindings["a2"].binding.type == "s64"
    with pytest.raises(SpecError, match="filter: a1 is an integer"):
        bind_usdt(parse_probe_text(f'{prog}:ktui:tick:usdt if a1 == "x"'))


@needs_sdt
def test_ktui_check_and_list(tmp_path):
    from ktui.cli import main

    prog = _build(tmp_path, "prog", PROG_C, "-O2")
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(f"name: g\nprobes:\n  - spec: {prog}:ktui:tick:usdt:a1,a3:string\n")
    bad.write_text(f"name: b\nprobes:\n  - spec: {prog}:ktui:tock:usdt:a1\n")
    runner = CliRunner()
    result = runner.invoke(main, ["check", "--syntax-only", str(good)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["check", str(bad)])
    assert result.exit_code != 0 and f"{bad}:3:" in result.output and "did you mean ktui:tick" in result.output
    listed = runner.invoke(main, ["list", "--usdt", prog])
    assert listed.exit_code == 0, listed.output
    assert re.search(r"ktui:tick\s+a1=s32 \(-4@%edi\)", listed.output), listed.output
    assert "a1=s32 const (-4@$5)" in listed.output


@needs_sdt
def test_a_note_written_before_the_file_moved_is_adjusted_by_stapsdt_base(tmp_path):
    """prelink moves a file's addresses and `.stapsdt.base` with them, not
    the notes: a note's pc and base both 0x100 lower than the file's now
    still name the same nop."""
    import struct

    prog = _build(tmp_path, "prog", PROG_C, "-O2")
    tick = next(n for n in _readelf_notes(prog) if n["name"] == "tick")
    data = Path(prog).read_bytes()
    old = struct.pack("<QQQ", tick["pc"], tick["base"], tick["semaphore"])
    assert data.count(old) == 1
    moved = tmp_path / "moved"
    moved.write_bytes(data.replace(old, struct.pack("<QQQ", tick["pc"] - 0x100, tick["base"] - 0x100,
                                                    tick["semaphore"])))
    assert _readelf_notes(str(moved))[0]["pc"] == tick["pc"] - 0x100
    assert resolve_usdt(str(moved), "ktui", "tick").file_offsets == (tick["pc"],)
