"""YAML probe sets: the shipped sets, loading, located errors, saving."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import pytest

from ktui.lang.alternatives import choose_alternative
from ktui.lang.filters import parse_filter
from ktui.lang.model import Kind, Probe, ProbeSet, ProbeSetError, Target
from ktui.lang.probeset import (
    MAX_FILE_BYTES,
    load_probeset,
    loads_probeset,
)
from ktui.lang.probeset_write import dumps_probeset, save_probeset
from ktui.lang.bind import bind_probe
from ktui.lang.kernel_names import KernelNames
from ktui.lang.spec import parse_spec

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "probesets").glob("*.yaml"))
SHIPPED_NAMES = ("default", "vfs", "block", "tcp", "sched", "memory", "syscalls")

# Every function a shipped set attaches to, checked against Debian bookworm's
# 6.1.0-57-amd64 image: a text symbol in its kallsyms, with an ftrace entry
# (__mcount_loc), outside .noinstr.text and not in _kprobe_blacklist. A new
# function in a shipped set must be checked the same way before it is added.
VERIFIED_ON_6_1 = frozenset({
    "vfs_read", "vfs_write", "do_sys_openat2", "vfs_fsync_range",
    "submit_bio", "blk_mq_start_request", "blk_mq_end_request", "blk_mq_end_request_batch",
    "tcp_v4_connect", "tcp_sendmsg", "tcp_recvmsg", "tcp_retransmit_skb", "tcp_set_state",
    "try_to_wake_up", "wake_up_new_task", "do_exit", "schedule",
    "handle_mm_fault", "kmalloc_trace", "__kmalloc", "kmem_cache_alloc", "kfree", "__alloc_pages",
})
# what 6.12 (Debian's) calls the functions above that 6.10 renamed: a
# shipped probe names both (`function: [new, old]`, lang.alternatives)
RENAMED_BY_6_12 = frozenset({"kmem_cache_alloc_noprof"})

SPEC_EXAMPLES = (
    "vfs_read:c:a3",
    "vfs_read:r:retval:s64",
    "do_sys_openat2:c:fname=+0(a2):ustring",
    "tcp_sendmsg:c:size=a3:u64",
    "0xffffffff81234560:c:rdi,rsi",
    "vfs_read:c",
)


def load_error(text: str | bytes, source: str = "set.yaml") -> ProbeSetError:
    with pytest.raises(ProbeSetError) as info:
        loads_probeset(text, source=source)
    return info.value


def assert_located(err: ProbeSetError, line: int, col: int, *fragments: str) -> None:
    text = str(err)
    assert text.startswith(f"set.yaml:{line}:{col}: "), text
    assert (err.line, err.col) == (line, col)
    for fragment in fragments:
        assert fragment in text, text
    assert "\n" not in text


# ---------------------------------------------------------------- shipped sets


def test_all_shipped_sets_are_there():
    assert sorted(path.stem for path in SHIPPED) == sorted(SHIPPED_NAMES)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_set_loads(path: Path):
    ps = load_probeset(path)
    assert ps.name == path.stem
    assert ps.description
    assert 1 <= len(ps.probes) <= 8
    assert ps.source == str(path)
    assert len({probe.name for probe in ps.probes}) == len(ps.probes)
    assert ps.emits_events


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_set_starts_with_the_question_it_answers(path: Path):
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# ") and len(first) > 20


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_set_attaches_only_to_functions_verified_on_6_1(path: Path, tmp_path):
    """... and to tracepoints both kernels of the matrix have, whose
    fields bind from their formats (tests/unit/data/tracepoints)."""
    for probe in load_probeset(path).probes:
        assert probe.target.address is None and probe.target.offset == 0
        if probe.target.tracepoint is not None:
            for kernel in ("6.1", "6.12"):
                tracefs = REPO / "tests" / "unit" / "data" / "tracepoints" / kernel
                bind_probe(probe, KernelNames(tracefs=str(tracefs)))
            continue
        if probe.target.alternatives:  # each a spelling of one kernel or the other; 6.1 has one
            assert set(probe.target.alternatives) <= VERIFIED_ON_6_1 | RENAMED_BY_6_12, probe.spec_text
            assert choose_alternative(probe, VERIFIED_ON_6_1.__contains__).target.symbol in VERIFIED_ON_6_1
            continue
        assert probe.target.symbol in VERIFIED_ON_6_1, probe.spec_text


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_set_round_trips(path: Path):
    ps = load_probeset(path)
    again = loads_probeset(dumps_probeset(ps))
    assert again == ps
    assert [p.label for p in again.probes] == [p.label for p in ps.probes]


def test_default_set_is_small_and_lively():
    ps = load_probeset(REPO / "probesets" / "default.yaml")
    assert len(ps.probes) <= 4
    assert any(p.kind is Kind.RETURN for p in ps.probes)  # a latency histogram
    assert any(f.effective_type == "ustring" for p in ps.probes for f in p.fetches)


# ---------------------------------------------------------------- loading


def test_spec_examples_load_from_a_file(tmp_path: Path):
    lines = ["name: examples", "probes:"]
    for example in SPEC_EXAMPLES:
        lines.append(f"  - spec: {example}")
    path = tmp_path / "examples.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ps = load_probeset(path)
    assert ps.probes == tuple(parse_spec(example) for example in SPEC_EXAMPLES)
    assert ps.source == str(path)


def test_bare_spec_strings_are_probes():
    text = "name: bare\nprobes:\n" + "".join(f"  - {example}\n" for example in SPEC_EXAMPLES)
    ps = loads_probeset(text)
    assert [p.spec_text for p in ps.probes] == [parse_spec(e).spec_text for e in SPEC_EXAMPLES]


def test_full_example_from_the_format():
    text = """\
# What question this set answers
name: vfs
description: "File reads/writes/opens: sizes, return values, latency"
filter:
  pid: 1234
  comm: nginx
probes:
  - spec: vfs_read:c:a3
    label: read_size
    filter: a3 > 4096 && comm == "dd"
    enabled: true
    sample: 10
    rate_limit: 1000
  - function: vfs_write
    kind: return
    fetch: [retval:s64]
    label: write_ret
"""
    ps = loads_probeset(text)
    assert (ps.name, ps.pid, ps.comm) == ("vfs", 1234, "nginx")
    assert ps.description.startswith("File reads")
    read, write = ps.probes
    assert read.label == "read_size" and read.sample == 10 and read.rate_limit == 1000
    assert str(read.filter) == 'a3 > 4096 && comm == "dd"'
    assert write == Probe(Target(symbol="vfs_write"), Kind.RETURN, parse_spec("x:r:retval:s64").fetches,
                          label="write_ret")


@pytest.mark.parametrize("kind_word, kind", [
    ("c", Kind.CALL), ("call", Kind.CALL), ("kprobe", Kind.CALL),
    ("r", Kind.RETURN), ("return", Kind.RETURN), ("kretprobe", Kind.RETURN),
])
def test_long_form_kind_words(kind_word: str, kind: Kind):
    ps = loads_probeset(f"name: k\nprobes:\n  - function: vfs_read\n    kind: {kind_word}\n")
    assert ps.probes[0].kind is kind


def test_long_form_matches_compact_form():
    compact = parse_spec("do_sys_openat2:c:fname=+0(a2):ustring,a3")
    as_list = loads_probeset(
        "name: l\nprobes:\n  - function: do_sys_openat2\n    kind: c\n"
        "    fetch: ['fname=+0(a2):ustring', a3]\n")
    as_string = loads_probeset(
        "name: l\nprobes:\n  - function: do_sys_openat2\n    fetch: 'fname=+0(a2):ustring, a3'\n")
    assert as_list.probes == as_string.probes == (compact,)


@pytest.mark.parametrize("address", ["0xffffffff81234560", "'0xffffffff81234560'", "18446744071581156704"])
def test_address_as_int_or_string(address: str):
    ps = loads_probeset(f"name: a\nprobes:\n  - address: {address}\n    fetch: [rdi, rsi]\n")
    assert ps.probes == (parse_spec("0xffffffff81234560:c:rdi,rsi"),)


def test_function_with_offset():
    ps = loads_probeset("name: o\nprobes:\n  - function: vfs_read+0x10\n")
    assert ps.probes[0].target == Target(symbol="vfs_read", offset=0x10)


def test_nulls_mean_not_set():
    ps = loads_probeset("name: n\ndescription:\nfilter:\nprobes:\n"
                        "  - spec: vfs_read:c\n    label:\n    filter:\n    rate_limit: null\n")
    assert ps.description == "" and ps.pid is None and ps.comm is None
    probe = ps.probes[0]
    assert probe.label is None and probe.filter is None and probe.rate_limit is None


def test_bytes_input_and_bom():
    ps = loads_probeset("\ufeffname: b\nprobes: [vfs_read:c]\n".encode("utf-8"))
    assert ps.name == "b"


# ---------------------------------------------------------------- located errors

# (yaml text, line, col, fragments of the message). Columns are 1-based and
# point at the offending node, or inside a spec/filter at the exact character.
LOCATED_ERRORS = [
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c:a9\n", 3, 22,
                 ("probe 1 (vfs_read:c:a9): spec:", "a9"), id="spec-plain"),
    pytest.param("name: x\nprobes:\n  - spec: 'vfs_read:q:a3'\n", 3, 21,
                 ("probe 1 (vfs_read:q:a3): spec:", "kind must be c, r or t"), id="spec-single-quoted"),
    pytest.param('name: x\nprobes:\n  - spec: "vfs_read:q:\\x61"\n', 3, 11,
                 ("spec:", "kind must be c, r or t"), id="spec-escaped-points-at-scalar"),
    pytest.param("name: x\nprobes:\n  - spec: >\n      vfs_read:q\n", 3, 11,
                 ("spec:",), id="spec-block-points-at-scalar"),
    pytest.param("name: x\nprobes:\n  - vfs_read:c\n  - vfs_write:x\n", 4, 15,
                 ("probe 2 (vfs_write:x): spec:",), id="bare-spec"),
    pytest.param('name: x\nprobes:\n  - spec: vfs_read:c:a3\n    filter: a3 > 4096 && comm = "dd"\n', 4, 31,
                 ("probe 1 (vfs_read:c:a3): filter:", "use =="), id="filter-syntax"),
    # Inside a function a name cannot be a parameter; at its entry it is bound
    # to the kernel's BTF when loaded with one (test_bind.py locates those errors).
    pytest.param('name: x\nprobes:\n  - spec: vfs_read+4:c:a3\n    filter: a3 > 1 && fnam == "dd"\n', 4, 23,
                 ("filter:", 'unknown name "fnam"'), id="filter-unknown-name"),
    pytest.param('name: x\nprobes:\n  - spec: vfs_read:c:a3\n    filter: "comm == 5"\n', 4, 22,
                 ("filter:", "comm"), id="filter-type-mismatch-quoted"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c:a3\n    filter: ''\n", 4, 13,
                 ("filter: must not be empty",), id="filter-empty"),
    pytest.param("name: x\nprobes:\n  - function: vfs_read\n    fetch: [a1, 'a2:u99']\n", 4, 21,
                 ("probe 1 (vfs_read): fetch:", 'unknown type "u99"'), id="fetch-list-item"),
    pytest.param("name: x\nprobes:\n  - function: vfs_read\n    fetch: a1,  a2:u99\n", 4, 20,
                 ("fetch:", "u99"), id="fetch-comma-string"),
    pytest.param("name: x\nprobes:\n  - function: vfs_read\n    fetch: [retval]\n", 4, 13,
                 ("fetch:", "retval exists only in return probes"), id="retval-in-call-probe"),
    pytest.param("name: x\nprobes:\n  - function: vfs_rea d\n", 3, 23,
                 ("function:",), id="function-syntax"),
    pytest.param("name: x\nprobes:\n  - function: '0xffffffff81234560'\n", 3, 15,
                 ("use address:",), id="function-is-an-address"),
    pytest.param("name: x\nprobes:\n  - address: vfs_read\n", 3, 14,
                 ("use function:",), id="address-is-a-symbol"),
    pytest.param("name: x\nprobes:\n  - function: vfs_read\n    kind: entry\n", 4, 11,
                 ("kind: unknown kind 'entry'",), id="kind-unknown"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n    kind: r\n", 4, 5,
                 ("kind: belongs to the long form",), id="kind-with-spec"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n    function: vfs_read\n", 4, 5,
                 ("only one of spec:, function:, address:, tracepoint: or usdt:",), id="two-forms"),
    pytest.param("name: x\nprobes:\n  - label: lonely\n", 3, 5,
                 ("probe 1 (lonely): a probe needs one of spec:, function:, address:, tracepoint: or usdt:",), id="no-form"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n    lable: y\n", 4, 5,
                 ("unknown key 'lable' (did you mean 'label'?)",), id="did-you-mean-probe"),
    pytest.param("nmae: x\nprobes: [vfs_read:c]\n", 1, 1,
                 ("unknown key 'nmae' (did you mean 'name'?)",), id="did-you-mean-top"),
    pytest.param("name: x\nfilter: {pid: 1, command: x}\nprobes: [vfs_read:c]\n", 2, 18,
                 ("unknown key 'command' (did you mean 'comm'?)",), id="did-you-mean-filter"),
    pytest.param("name: x\nbogus: 1\nprobes: [vfs_read:c]\n", 2, 1,
                 ("unknown key 'bogus'; expected one of: name, description, filter, maxactive, attach, probes",), id="unknown-key"),
    pytest.param("name: x\nprobes: [vfs_read:c]\nname: y\n", 3, 1,
                 ("duplicate key 'name' (first given on line 1)",), id="duplicate-top-key"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n    sample: 2\n    sample: 3\n", 5, 5,
                 ("probe 1 (vfs_read:c): duplicate key 'sample'",), id="duplicate-probe-key"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n    label: a\n  - spec: vfs_write:c\n    label: a\n",
                 6, 12, ("probe 2 (vfs_write:c): label 'a' is already used by probe 1",), id="duplicate-label"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n  - spec: vfs_read:c\n", 4, 11,
                 ("label 'vfs_read:c' is already used by probe 1",), id="duplicate-default-label"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n    label: vfs_write:c\n  - spec: vfs_write:c\n",
                 5, 11, ("already used by probe 1",), id="label-clashes-with-default-label"),
    pytest.param("base: &b {spec: vfs_read:c}\nname: x\nprobes:\n  - *b\n", 4, 5,
                 ("aliases (*b) are not allowed",), id="alias"),
    pytest.param("name: x\nprobes:\n  - &p {spec: vfs_read:c}\n  - {<<: *p, label: y}\n", 4, 10,
                 ("aliases (*p) are not allowed",), id="merge-alias"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n    sample: true\n", 4, 13,
                 ("sample: expected an integer, got a boolean",), id="bool-is-not-int"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n    enabled: 1\n", 4, 14,
                 ("enabled: expected true or false, got an integer",), id="int-is-not-bool"),
    pytest.param("name: 2024\nprobes: [vfs_read:c]\n", 1, 7,
                 ('name: expected a string, got an integer (quote it: "2024")',), id="int-is-not-string"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n    label: [a, b]\n", 4, 12,
                 ("label: expected a string, got a list",), id="list-is-not-string"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n    sample: 0\n", 4, 13,
                 ("sample: 0 is out of range",), id="sample-zero"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n    rate_limit: -5\n", 4, 17,
                 ("rate_limit: -5 is out of range",), id="rate-limit-negative"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n    sample: 1.5\n", 4, 13,
                 ("sample: expected an integer, got a number",), id="float-is-not-int"),
    pytest.param("name: x\nfilter:\n  pid: 99999999\nprobes: [vfs_read:c]\n", 3, 8,
                 ("filter.pid: 99999999 is out of range",), id="pid-range"),
    pytest.param("name: x\nfilter:\n  comm: abcdefghijklmnop\nprobes: [vfs_read:c]\n", 3, 9,
                 ("filter.comm: too long",), id="comm-too-long"),
    pytest.param("name: x\nfilter:\n  comm: ééééééééé\nprobes: [vfs_read:c]\n", 3, 9,
                 ("filter.comm: too long (18 bytes, at most 15: the kernel keeps only 15 bytes",),
                 id="comm-too-many-bytes"),
    pytest.param("name: x\nfilter: 1234\nprobes: [vfs_read:c]\n", 2, 9,
                 ("filter: expected a mapping, got an integer",), id="set-filter-not-mapping"),
    pytest.param("name: !!python/object:os.system x\nprobes: [vfs_read:c]\n", 1, 7,
                 ("unsupported YAML tag !!python/object:os.system",), id="python-tag"),
    pytest.param("name: x\nprobes:\n  - !custom {spec: vfs_read:c}\n", 3, 5,
                 ("unsupported YAML tag !custom",), id="local-tag"),
    pytest.param("name: !!binary aGVsbG8=\nprobes: [vfs_read:c]\n", 1, 7,
                 ("name: expected a string, got binary data",), id="binary-tag"),
    pytest.param("name: x\nprobes:\n  - spec: [vfs_read:c\n", 4, 1,
                 ("YAML syntax error",), id="syntax-error"),
    pytest.param("name: x\n  probes: y\n", 2, 9,
                 ("YAML syntax error: mapping values are not allowed here",), id="bad-indent"),
    pytest.param("name: x\x00y\nprobes: [vfs_read:c]\n", 1, 8,
                 ("character U+0000 is not allowed",), id="nul-character"),
    pytest.param("", 1, 1, ("empty probe set",), id="empty-file"),
    pytest.param("# only a comment\n", 1, 1, ("empty probe set",), id="only-comment"),
    pytest.param("- vfs_read:c\n", 1, 1, ("a probe set is a mapping", "got a list"), id="top-level-list"),
    pytest.param("name: x\n", 1, 1, ("missing key 'probes': a probe set needs at least one probe",),
                 id="missing-probes"),
    pytest.param("probes: [vfs_read:c]\n", 1, 1, ("missing key 'name'",), id="missing-name"),
    pytest.param("name: x\nprobes: []\n", 2, 9, ("a probe set needs at least one probe",), id="empty-probes"),
    pytest.param("name: x\nprobes: vfs_read:c\n", 2, 9, ("probes: expected a list, got a string",),
                 id="probes-not-a-list"),
    pytest.param("name: ''\nprobes: [vfs_read:c]\n", 1, 7, ("name: must not be empty",), id="empty-name"),
    pytest.param("name: x\nprobes: [vfs_read:c]\n---\nname: y\n", 3, 1,
                 ("YAML syntax error", "single document"), id="two-documents"),
    pytest.param("name: x\nprobes:\n  - {spec: vfs_read:c, ? [a]: b}\n", 3, 26,
                 ("keys must be plain words",), id="complex-key"),
    pytest.param("name: x\nprobes:\n  - spec: vfs_read:c\n    sample: 1:30\n", 4, 13,
                 ("cannot read '1:30' as an integer",), id="sexagesimal"),
]


@pytest.mark.parametrize("text, line, col, fragments", LOCATED_ERRORS)
def test_error_is_located(text: str, line: int, col: int, fragments: tuple[str, ...]):
    assert_located(load_error(text), line, col, *fragments)


def test_non_utf8_bytes_are_located():
    err = load_error(b"name: x\nprobes:\n  - spec: caf\xe9:c\n")
    assert_located(err, 3, 14, "not UTF-8 text (byte 0xe9)")


def test_binary_file_is_refused(tmp_path: Path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(bytes(range(256)))  # byte 10 is a newline, 0x80 is not UTF-8
    with pytest.raises(ProbeSetError) as info:
        load_probeset(path)
    assert str(info.value).startswith(f"{path}:2:118: not UTF-8 text (byte 0x80)")


def test_too_large_file_is_refused_before_parsing(tmp_path: Path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"name: x\nprobes: [vfs_read:c]\n" + b"#" * MAX_FILE_BYTES)
    with pytest.raises(ProbeSetError) as info:
        load_probeset(path)
    assert str(info.value).startswith(f"{path}:1:1: file too large")


def test_missing_file_and_directory(tmp_path: Path):
    with pytest.raises(ProbeSetError) as missing:
        load_probeset(tmp_path / "nope.yaml")
    assert str(missing.value) == f"{tmp_path / 'nope.yaml'}: cannot open: No such file or directory"
    with pytest.raises(ProbeSetError) as directory:
        load_probeset(tmp_path)
    assert str(directory.value) == f"{tmp_path}: not a regular file"


def test_error_names_the_file(tmp_path: Path):
    path = tmp_path / "typo.yaml"
    path.write_text("name: x\nprobes:\n  - spec: vfs_read:c\n  - spec: vfs_read:c:a3\n    lable: z\n")
    with pytest.raises(ProbeSetError) as info:
        load_probeset(path)
    assert str(info.value) == (f"{path}:5:5: probe 2 (vfs_read:c:a3): "
                               "unknown key 'lable' (did you mean 'label'?)")


# ---------------------------------------------------------------- saving


def full_probeset() -> ProbeSet:
    """Every optional field set, with labels YAML would misread unquoted."""
    probes = (
        parse_spec("vfs_read:c:size=a3:u64"),
        parse_spec("vfs_read:r:retval:s64"),
        parse_spec("do_sys_openat2:c:fname=+0(a2):ustring"),
        parse_spec("0xffffffff81234560:c:rdi,rsi"),
        parse_spec("vfs_write:c"),
    )
    probes = (
        dataclasses.replace(probes[0], label="yes", filter=parse_filter('size > 4096 && comm == "d\\"d"'),
                            sample=10, rate_limit=1000),
        dataclasses.replace(probes[1], label="123", enabled=False),
        dataclasses.replace(probes[2], label="a: b #c", filter=parse_filter('!(fname == "/tmp")')),
        dataclasses.replace(probes[3], label="null"),
        probes[4],
    )
    return ProbeSet(name="on", description="multi\nline: text", probes=probes, pid=42, comm="nginx")


def test_full_probeset_round_trips():
    ps = full_probeset()
    text = dumps_probeset(ps)
    assert loads_probeset(text) == ps
    assert "enabled: false" in text and "sample: 10" in text
    assert text.count("enabled") == 1  # only written when false


def test_save_writes_0600_and_loads_back(tmp_path: Path):
    path = tmp_path / "saved.yaml"
    ps = full_probeset()
    save_probeset(ps, path)
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert load_probeset(path) == ps
    assert sorted(os.listdir(tmp_path)) == ["saved.yaml"]  # no temp file left


def test_save_replaces_an_existing_file(tmp_path: Path):
    path = tmp_path / "saved.yaml"
    path.write_text("name: old\nprobes:\n  - spec: vfs_write:c\n")  # a probe set: replaced
    os.chmod(path, 0o644)
    with pytest.raises(ProbeSetError, match="replacing it was not confirmed"):
        save_probeset(load_probeset(REPO / "probesets" / "tcp.yaml"), path)
    assert load_probeset(path).name == "old"
    save_probeset(load_probeset(REPO / "probesets" / "tcp.yaml"), path, replace=True)
    assert load_probeset(path).name == "tcp"
    # the replaced file's mode is kept: a set shared 0644 stays readable
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o644
    assert sorted(os.listdir(tmp_path)) == ["saved.yaml"]


def test_save_refuses_a_symlink(tmp_path: Path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(victim)
    with pytest.raises(ProbeSetError) as info:
        save_probeset(full_probeset(), link)
    assert str(info.value) == (f"{link}: refusing to save: it is a symbolic link (to {victim}),"
                               " never followed nor replaced; write to another path")
    assert victim.read_text() == "precious\n"
    assert link.is_symlink()


def test_save_refuses_a_dangling_symlink(tmp_path: Path):
    link = tmp_path / "dangling.yaml"
    link.symlink_to(tmp_path / "does-not-exist")
    with pytest.raises(ProbeSetError):
        save_probeset(full_probeset(), link)
    assert not (tmp_path / "does-not-exist").exists()


def test_save_into_missing_directory_is_a_probeset_error(tmp_path: Path):
    with pytest.raises(ProbeSetError) as info:
        save_probeset(full_probeset(), tmp_path / "no" / "such" / "dir.yaml")
    assert "cannot save" in str(info.value)


def test_save_refuses_a_directory(tmp_path: Path):
    with pytest.raises(ProbeSetError) as info:
        save_probeset(full_probeset(), tmp_path)
    assert "directory" in str(info.value)


# ---------------------------------------------------------------- odd unicode

# Characters that make text show as something else (ktui/chars.py): every
# bidi control, every zero-width character, and one of each other refused
# category (control, private use, surrogate, line and paragraph separator).
ODD_CHARS = {
    0x202A: "LEFT-TO-RIGHT EMBEDDING", 0x202B: "RIGHT-TO-LEFT EMBEDDING",
    0x202C: "POP DIRECTIONAL FORMATTING", 0x202D: "LEFT-TO-RIGHT OVERRIDE",
    0x202E: "RIGHT-TO-LEFT OVERRIDE", 0x2066: "LEFT-TO-RIGHT ISOLATE",
    0x2067: "RIGHT-TO-LEFT ISOLATE", 0x2068: "FIRST STRONG ISOLATE",
    0x2069: "POP DIRECTIONAL ISOLATE", 0x200E: "LEFT-TO-RIGHT MARK",
    0x200F: "RIGHT-TO-LEFT MARK", 0x061C: "ARABIC LETTER MARK",
    0x200B: "ZERO WIDTH SPACE", 0x200C: "ZERO WIDTH NON-JOINER", 0x200D: "ZERO WIDTH JOINER",
    0x2060: "WORD JOINER", 0xFEFF: "ZERO WIDTH NO-BREAK SPACE", 0x00AD: "SOFT HYPHEN",
    0x0007: "BELL (a control character)", 0x001B: "ESCAPE (a control character)",
    0x0085: "NEXT LINE (a control character)", 0xE000: "(a private-use character)",
    0xD800: "(a surrogate)", 0x2028: "LINE SEPARATOR", 0x2029: "PARAGRAPH SEPARATOR",
}
# YAML reads these itself (line breaks, surrogates, C0 controls) or refuses
# them raw: they can only arrive through a double-quoted escape.
ESCAPE_ONLY = {0x0007, 0x001B, 0x0085, 0xD800, 0x2028, 0x2029}


def odd_char_cases(where: str, template: str, line: int, col: int):
    """(yaml text, line, col of the character, code point): the character
    written raw (located exactly) and as a double-quoted escape (located at
    the string)."""
    for code in ODD_CHARS:
        if code not in ESCAPE_ONLY:
            yield pytest.param(template.format(f"ab{chr(code)}c"), line, col + 2, code,
                               id=f"{where}-raw-U+{code:04X}")
        escaped = '"ab\\u%04x"' % code if code <= 0xFFFF else '"ab\\U%08x"' % code
        yield pytest.param(template.format(escaped), line, col, code, id=f"{where}-escaped-U+{code:04X}")


@pytest.mark.parametrize("text, line, col, code", [
    *odd_char_cases("label", "name: x\nprobes:\n  - spec: vfs_read:c\n    label: {}\n", 4, 12),
    *odd_char_cases("name", "name: {}\nprobes: [vfs_read:c]\n", 1, 7),
    *odd_char_cases("comm", "name: x\nfilter:\n  comm: {}\nprobes: [vfs_read:c]\n", 3, 9),
])
def test_odd_unicode_in_labels_and_names_is_refused_by_code_point(text, line, col, code):
    err = load_error(text)
    what = "label" if "label:" in text else "filter.comm" if "comm:" in text else "name"
    assert_located(err, line, col, f"{what}: U+{code:04X} {ODD_CHARS[code]} is not allowed")
    assert chr(code) not in str(err) and "\n" not in str(err)


@pytest.mark.parametrize("code", [0x202E, 0x200B, 0x2066, 0xFEFF])
@pytest.mark.parametrize("key, value, col", [
    ("spec", "vfs_read:c:a1{}", 11 + 13),
    ("filter", "'a1 == 1 {}'", 13 + 9),
])
def test_odd_unicode_in_specs_and_filters_is_refused_by_code_point(key, value, col, code):
    entry = f"  - spec: {value.format(chr(code))}\n" if key == "spec" else \
            f"  - spec: vfs_read:c:a1\n    filter: {value.format(chr(code))}\n"
    err = load_error("name: x\nprobes:\n" + entry)
    line = 3 if key == "spec" else 4
    assert_located(err, line, col, f"{key}: U+{code:04X} {ODD_CHARS[code]} is not allowed in a {key}")
    assert chr(code) not in str(err)


def test_odd_unicode_quoted_back_in_a_message_is_escaped():
    """A message that quotes what the user wrote (here an unknown key) must
    not carry the bidi override itself: it would reorder the error line."""
    err = load_error("name: x\nprobes:\n  - spec: vfs_read:c\n    lab\u202eel: x\n")
    assert_located(err, 4, 5, "unknown key 'lab\\u202eel'")
    assert "\u202e" not in str(err)


def test_printable_unicode_in_labels_is_still_accepted():
    ps = loads_probeset("name: 'vfs ✓ ünï'\nfilter: {comm: größe}\n"
                        "probes:\n  - spec: vfs_read:c\n    label: 读取 größe\n")
    assert ps.name == "vfs ✓ ünï" and ps.comm == "größe" and ps.probes[0].label == "读取 größe"


# ---------------------------------------------------------------- a label in the spec


def test_a_spec_label_in_a_file():
    ps = loads_probeset("name: x\nprobes:\n  - reads=vfs_read:c:a3\n  - spec: writes=vfs_write:c\n")
    assert [p.label for p in ps.probes] == ["reads", "writes"]
    assert loads_probeset(dumps_probeset(ps)) == ps


def test_a_label_in_the_spec_and_a_label_key_is_an_error():
    text = "name: x\nprobes:\n  - spec: reads=vfs_read:c\n    label: r\n"
    with pytest.raises(ProbeSetError) as info:
        loads_probeset(text, source="f.yaml")
    assert str(info.value) == ('f.yaml:4:5: probe 1 (reads=vfs_read:c): label: the spec already labels '
                               'this probe "reads"; give the label once')
    assert loads_probeset(text.replace("label: r", "label: null")).probes[0].label == "reads"


def test_a_spec_label_counts_in_duplicate_names():
    with pytest.raises(ProbeSetError, match="label 'r' is already used by probe 1"):
        loads_probeset("name: x\nprobes:\n  - r=vfs_read:c\n  - spec: vfs_write:c\n    label: r\n")


def test_check_probeset_collects_what_load_probeset_stops_at(tmp_path: Path):
    from ktui.lang.probeset import check_probeset

    good = tmp_path / "good.yaml"
    good.write_text("name: g\nprobes: [vfs_read:c]\n")
    ps, errors = check_probeset(good)
    assert errors == [] and ps == load_probeset(good)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\nfilter: {pid: 0, comm: ''}\nprobes:\n  - vfs_read:c:a9\n  - spec: vfs_read:c\n    sample: x\n")
    ps, errors = check_probeset(bad)
    assert ps is None
    assert [(e.line, e.col) for e in errors] == [(2, 15), (2, 24), (4, 16), (6, 13)]
    with pytest.raises(ProbeSetError) as first:
        load_probeset(bad)
    assert str(first.value) == str(errors[0])
    missing = check_probeset(tmp_path / "missing.yaml")
    assert missing[0] is None and "cannot open" in str(missing[1][0])


def test_a_set_emits_events_when_one_of_its_probes_fetches():
    counting = ProbeSet(name="n", probes=(parse_spec("vfs_read:c"), parse_spec("vfs_read:r")))
    assert not counting.emits_events  # a return probe alone counts and times, writes nothing
    fetching = dataclasses.replace(counting, probes=counting.probes + (parse_spec("vfs_read:c:a3"),))
    assert fetching.emits_events
