"""`ktui list PATH:GLOB`: a binary's functions, with the address, file
offset and size a probe on each needs, on a -no-pie program built here
(its code loads at 0x400000: the file offset is not the address)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ktui.kernel.symbols.uprobe_target import resolve
from ktui.listing import EXIT_NO_MATCH, EXIT_OK, EXIT_USAGE, run_list

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

MAIN_C = r"""
#include <stdio.h>
__attribute__((noinline)) int ktui_add(int a, int b) { return a + b; }
__attribute__((noinline)) int ktui_twice(int a) { return ktui_add(a, a); }
int main(int argc, char **argv) { printf("%d\n", ktui_twice(argc)); return 0; }
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("list")
    (where / "main.c").write_text(MAIN_C)
    out = where / "prog"
    subprocess.run(["gcc", "-O1", "-no-pie", "-fno-PIE", "-o", str(out), str(where / "main.c")],
                   check=True, capture_output=True)
    return out


def _list(*patterns: str, **kw) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_list(list(patterns), out=out, err=err, **kw)
    return code, out.getvalue(), err.getvalue()


def test_one_line_per_function_with_where_a_probe_goes(program):
    code, out, err = _list(f"{program}:ktui_*")
    assert code == EXIT_OK
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["ktui_add", "ktui_twice"]
    found = resolve(str(program), "ktui_add")
    name, address, _file, offset, size, _bytes = lines[0].split()
    assert (int(address, 16), int(offset, 16)) == (found.vaddr, found.file_offset)
    assert found.vaddr != found.file_offset  # -no-pie: the conversion is shown, not assumed
    assert int(size) > 0
    assert err == f"ktui: 2 functions of {program}\n"  # no kernel is listed: no kernel line


def test_an_import_is_marked(program):
    code, out, _err = _list(f"{program}:printf")
    assert code == EXIT_OK and "import: probe it in its library" in out


def test_json_is_data(program):
    code, out, err = _list(f"{program}:ktui_add", as_json=True)
    assert code == EXIT_OK and err == ""
    doc = json.loads(out)
    [fn] = doc["binaries"][0]["functions"]
    found = resolve(str(program), "ktui_add")
    assert fn["name"] == "ktui_add" and fn["address"] == found.vaddr and fn["file_offset"] == found.file_offset
    assert fn["ifunc"] is False and fn["import"] is False


def test_no_match_says_so_with_a_did_you_mean(program):
    code, out, err = _list(f"{program}:ktui_ad")
    assert code == EXIT_NO_MATCH and out == ""
    assert f"ktui: no function 'ktui_ad' in {program} (did you mean ktui_add" in err
    code, _out, err = _list(f"{program}:zz*")
    assert code == EXIT_NO_MATCH and f"ktui: no function of {program} matches 'zz*'" in err


def test_a_missing_or_non_elf_file_is_one_line(tmp_path, program):
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    code, out, err = _list(f"{tmp_path}/missing:main", f"{text}:main", f"{program}:main")
    assert code == EXIT_NO_MATCH
    assert out.split()[0] == "main"  # the others are still listed
    assert f"ktui: {tmp_path}/missing: no such file\n" in err and f"ktui: {text} is not an ELF file\n" in err
    assert "Traceback" not in err


def test_a_glob_missing_after_the_colon_is_usage(program):
    code, out, err = _list(f"{program}:")
    assert code == EXIT_USAGE and out == "" and "expected a glob after the ':'" in err


def test_a_pattern_that_starts_with_a_slash_is_a_file_not_a_tracepoint():
    code, _out, err = _list("/x")
    assert code == EXIT_NO_MATCH and err == "ktui: /x: no such file\n"
