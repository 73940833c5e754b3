"""Code generation: golden files pin the C, and properties keep user text out of it.

Regenerate the golden files after an intended change with
    KTUI_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_codegen.py
(that run fails on purpose, naming each file it wrote), read the diff, and
run the tests again without it before committing.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.namedkernel import kernel_names
from ktui.kernel.codegen import PERF, RINGBUF, generate
from ktui.lang.filters import parse_filter
from ktui.lang.model import SpecError
from ktui.lang.probeset import load_probeset
from ktui.lang.spec import parse_spec
from ktui.record.layout import HEADER_SIZE, record_layout

GOLDEN = Path(__file__).parent / "golden"
REPO = Path(__file__).resolve().parents[2]

EXAMPLES = [
    "vfs_read:c:a3",
    "vfs_read:r:retval:s64",
    "do_sys_openat2:c:fname=+0(a2):ustring",
    "tcp_sendmsg:c:size=a3:u64",
    "0xffffffff81234560:c:rdi,rsi",
    "vfs_read:c",
]


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KTUI_UPDATE_GOLDEN"):
        # Regenerating is not testing: the run fails, so it can never pass
        # a build by comparing a file with what was just written into it.
        old = path.read_text() if path.exists() else None
        path.write_text(text)
        pytest.fail(f"KTUI_UPDATE_GOLDEN is set: {path} " +
                    ("unchanged" if old == text else "regenerated: read its diff") +
                    "; run again without it to test")
    assert path.exists(), f"no golden file {path}: run with KTUI_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"generated C differs from {path}"


@pytest.mark.parametrize("buffer", [RINGBUF, PERF])
def test_examples_match_golden(buffer):
    probes = [parse_spec(s) for s in EXAMPLES]
    probes.append(dataclasses.replace(parse_spec("vfs_read:c:a3"), label="big",
                                      filter=parse_filter('a3 > 4096 && comm == "dd"')))
    _check_golden(f"examples-{buffer}.c", generate(probes, buffer=buffer).text)


@pytest.mark.parametrize("path", sorted((REPO / "probesets").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_sets_match_golden(path, tmp_path):
    # Names in a set are bound to a little kernel's BTF built here: the
    # golden program must not depend on the host's kernel.
    _check_golden(f"{path.stem}.c", generate(load_probeset(path, kernel_names(tmp_path))).text)


# Every program the golden tests cover, generated in a fresh interpreter.
ALL_PROGRAMS = """
import hashlib, sys
from ktui.kernel.codegen import generate
from ktui.lang.probeset import load_probeset
from ktui.lang.shipped import shipped_sets
from ktui.lang.spec import parse_spec
import tempfile, pathlib
from tests.unit.namedkernel import kernel_names
kernel = kernel_names(pathlib.Path(tempfile.mkdtemp()))
texts = [generate([parse_spec(s) for s in sys.argv[1:]], buffer=b).text for b in ("ringbuf", "perf")]
texts += [generate(load_probeset(p, kernel)).text for p in shipped_sets()]
print(hashlib.sha256("\\0".join(texts).encode()).hexdigest())
"""


def _programs_in_a_process(hash_seed: str) -> str:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    out = subprocess.run([sys.executable, "-c", ALL_PROGRAMS, *EXAMPLES], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_generation_is_the_same_in_another_process():
    """Two interpreters with different string hashing (so sets and dicts of
    names iterate in different orders) must write byte-identical programs."""
    assert _programs_in_a_process("1") == _programs_in_a_process("2")


def test_update_mode_regenerates_and_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "GOLDEN", tmp_path)
    monkeypatch.setenv("KTUI_UPDATE_GOLDEN", "1")
    with pytest.raises(pytest.fail.Exception, match="regenerated"):
        _check_golden("x.c", "int x;\n")
    assert (tmp_path / "x.c").read_text() == "int x;\n"
    with pytest.raises(pytest.fail.Exception, match="unchanged"):
        _check_golden("x.c", "int x;\n")


def test_user_text_never_reaches_the_c():
    # Labels and string literals are user text: neither may appear verbatim.
    probe = dataclasses.replace(
        parse_spec("vfs_read:c:evil_label=a3"),
        label="marker_label_xyz",
        filter=parse_filter('comm == "Zq9*/x"'),
    )
    full = generate([probe], pid=4242, comm="nginx").text
    # The spec shows in one comment per probe (made of the parser's alphabet,
    # which cannot close a comment); the code itself carries no user text.
    assert "*/" not in re.sub(r"/\*.*?\*/", "", full, flags=re.S)
    text = re.sub(r"/\*.*?\*/", "", full, flags=re.S)
    assert "marker_label_xyz" not in text
    assert "evil_label" not in text
    assert "Zq9" not in text and "*/x" not in text
    assert "nginx" not in text
    # the literal is compared byte by byte, as numbers
    assert "== 90" in text and "== 113" in text


def test_string_literal_longer_than_the_field_never_matches():
    probe = dataclasses.replace(parse_spec("vfs_read:c:a3"),
                                filter=parse_filter('comm != "a"'))
    text = generate([probe], comm="x" * 16).text
    assert "if (!(0))" in text  # a 16-byte comm cannot equal a 16-char name


def test_counting_probe_is_minimal():
    text = generate([parse_spec("vfs_read:c")]).text
    body = text[text.index("int ktui_p0"):]
    assert "ktui_scratch" not in body
    assert "bpf_get_current_comm" not in body
    assert "bpf_ktime_get_ns" not in body


def test_return_probe_saves_arguments_only_when_used():
    plain = generate([parse_spec("vfs_read:r:retval")]).text
    assert "saved->args[" not in plain and "BPF_ARRAY(ktui_entry_args" not in plain
    with_args = generate([parse_spec("vfs_read:r:retval,a3")]).text
    assert "saved->args[2] = ctx->dx;" in with_args


def test_return_probes_each_get_their_own_block_of_entry_slots():
    text = generate([parse_spec("vfs_read:r"), parse_spec("vfs_open:c"),
                     parse_spec("vfs_write:r:a1")]).text
    assert "BPF_ARRAY(ktui_entries, struct ktui_entry, 2 * KTUI_ENTRY_SLOTS);" in text
    assert "BPF_ARRAY(ktui_entry_args, struct ktui_entry_args, 1 * KTUI_ENTRY_SLOTS);" in text
    assert "u32 slot = 0 * KTUI_ENTRY_SLOTS + thread_slot;" in text  # vfs_read
    assert "u32 slot = 1 * KTUI_ENTRY_SLOTS + thread_slot;" in text  # vfs_write
    assert "u32 args_slot = 0 * KTUI_ENTRY_SLOTS + thread_slot;" in text
    # a return only counts when the slot holds this thread's entry
    assert "entry->tid != (u32)pid_tgid" in text
    counting = generate([parse_spec("vfs_open:c")]).text
    assert "ktui_entries" not in counting


def test_record_layout_is_fixed_size_and_aligned():
    probes = [parse_spec(s) for s in EXAMPLES]
    layout = record_layout(probes)
    assert layout.record_size % 8 == 0
    assert layout.record_size == HEADER_SIZE + max(8, 64)  # the ustring slot is the largest
    text = generate(probes).text
    assert f"#define KTUI_PAYLOAD {layout.payload_size}" in text


def test_empty_set_is_an_error():
    with pytest.raises(SpecError):
        generate([])


def test_every_function_name_is_generated_not_user_supplied():
    text = generate([parse_spec(s) for s in EXAMPLES]).text
    names = set(re.findall(r"^int (\w+)\(struct pt_regs", text, re.M))
    assert names == {f"ktui_p{i}" for i in range(len(EXAMPLES))} | {"ktui_e1"}
