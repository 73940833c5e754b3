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
from ktui.kernel import returns
from ktui.kernel.codegen import PERF, RINGBUF, compiled_part, generate
from ktui.lang.filters import parse_filter
from ktui.lang.model import SpecError
from ktui.lang.probeset import load_probeset
from ktui.lang.spec import parse_spec
from ktui.record.layout import HEADER_FIELDS, HEADER_SIZE, probe_layout, record_layout

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


def _compiled_sets() -> list:
    """Shipped sets with a probe a compiled program takes (a set of
    tracepoints alone is never compiled)."""
    return [p for p in sorted((REPO / "probesets").glob("*.yaml")) if compiled_part(load_probeset(p))[0]]


@pytest.mark.parametrize("path", _compiled_sets(), ids=lambda p: p.name)
def test_shipped_sets_match_golden(path, tmp_path):
    # Names in a set are bound to a little kernel's BTF built here: the
    # golden program must not depend on the host's kernel.
    compiled, _ = compiled_part(load_probeset(path, kernel_names(tmp_path)))  # tracepoints never compile
    _check_golden(f"{path.stem}.c", generate(compiled).text)


# Every program the golden tests cover, generated in a fresh interpreter.
ALL_PROGRAMS = """
import hashlib, sys
from ktui.kernel.codegen import compiled_part, generate
from ktui.lang.probeset import load_probeset
from ktui.lang.shipped import shipped_sets
from ktui.lang.spec import parse_spec
import tempfile, pathlib
from tests.unit.namedkernel import kernel_names
kernel = kernel_names(pathlib.Path(tempfile.mkdtemp()))
texts = [generate([parse_spec(s) for s in sys.argv[1:]], buffer=b).text for b in ("ringbuf", "perf")]
texts += [generate(c).text for p in shipped_sets() if (c := compiled_part(load_probeset(p, kernel))[0])]
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
    assert "u64 args[6]" not in _function(plain, "ktui_e0") + _function(plain, "ktui_p0")
    assert "ktui_push(probe, 0, (u32)pid_tgid, ctx->sp, bpf_ktime_get_ns(), 0)" in plain
    with_args = generate([parse_spec("vfs_read:r:retval,a3")]).text
    assert "u64 args[6] = {ctx->di, ctx->si, ctx->dx, ctx->cx, ctx->r8, ctx->r9};" in with_args
    assert "ktui_pop(probe, 0, (u32)pid_tgid, ctx->sp - 8, &ts, args)" in with_args
    assert "args[2]" in _function(with_args, "ktui_p0")


def _function(text: str, name: str) -> str:
    """The body of one generated function."""
    start = text.index(f"int {name}(struct pt_regs *ctx)")
    return text[start:text.index("\n}\n", start)]


def test_returns_pair_by_the_whole_thread_id_and_the_calls_frame():
    """No table indexed by thread id modulo a size: each return probe's
    entry pushes the call on its thread's stack (entry_stack.c, keyed by
    probe and the whole tid), with its frame; the return pops the level of
    its own frame. Kprobes never nest on a CPU: no guard (no atomics)."""
    text = generate([parse_spec("vfs_read:r"), parse_spec("vfs_open:c"),
                     parse_spec("vfs_write:r:a1")]).text
    assert "KTUI_ENTRY_SLOTS" not in text and "ktui_entry_args" not in text
    assert 'BPF_TABLE("lru_hash", struct ktui_entry_key, struct ktui_entry_stack, ktui_entries, ' \
           "KTUI_ENTRY_THREADS);" in text
    assert f"#define KTUI_ENTRY_DEPTH {returns.ENTRY_DEPTH}" in text
    assert f"#define KTUI_ENTRY_THREADS {returns.ENTRY_THREADS}" in text
    assert "#define KTUI_ENTRY_GUARD 0" in text
    for index in (0, 2):
        entry, ret = _function(text, f"ktui_e{index}"), _function(text, f"ktui_p{index}")
        assert f"u32 probe = {index};" in entry
        # set-wide filters, then the push; an entry not kept is counted
        assert entry.index("ktui_set_filter") < entry.index("ktui_push(probe, 0, (u32)pid_tgid, ctx->sp,")
        assert "ktui_bump(ktui_unstored.lookup(&probe));" in entry
        # set-wide filters first (a return of a task left out is not counted),
        # then the pop; unpaired: counted, not a hit, not in the histogram
        assert ret.index("ktui_set_filter") < ret.index("ktui_pop(probe, 0, (u32)pid_tgid, ctx->sp - 8, &ts,")
        unpaired = ret[ret.index("ktui_pop("):ret.index("ktui_count(")]
        assert "ktui_bump(ktui_unpaired.lookup(&probe));\n        return 0;" in unpaired
        assert ret.index("ktui_unpaired") < ret.index("ktui_account_return")
    counting = generate([parse_spec("vfs_open:c")]).text
    assert "ktui_entries" not in counting and "ktui_unpaired" not in counting


def test_a_set_comm_filter_applies_to_both_halves_of_a_return_probe():
    text = generate([parse_spec("vfs_read:r")], comm="dd").text
    for name in ("ktui_e0", "ktui_p0"):
        body = _function(text, name)
        assert "char comm[16] = {};" in body
        assert body.index("bpf_get_current_comm(&comm") < body.index("ktui_set_filter(pid_tgid, comm)")
    assert _function(text, "ktui_p0").index("ktui_set_filter") < _function(text, "ktui_p0").index("ktui_pop(")


ALL_SPECS = EXAMPLES + [
    "vfs_read:r:retval,name=+0(a2):ustring,a3",
    "vfs_read:c:comm,pid,tid,cpu",
    "do_sys_openat2:c:fname=+0(a2):ustring,fl=a3,md=a4:u32",
]


@pytest.mark.parametrize("buffer", [RINGBUF, PERF])
@pytest.mark.parametrize("spec", [s for s in ALL_SPECS if parse_spec(s).emits_events])
def test_a_record_is_its_header_and_its_own_payload_every_byte_written(spec, buffer):
    """Each probe sends HEADER_SIZE + its own payload (a constant), not the
    largest probe's record; every payload byte of it is written by the hit:
    an integer slot by one 8-byte store, a string slot cleared before the
    read (which leaves the bytes after the NUL as they were)."""
    probe = parse_spec(spec)
    # beside a probe with a larger payload, which sets the scratch event's size
    text = generate([probe, parse_spec("f:c:+0(a1):string,+0(a2):string")], buffer=buffer).text
    layout = probe_layout(probe)
    body = _function(text, "ktui_p0")
    assert f"ktui_output(ctx, probe, e, KTUI_HEADER_SIZE + {layout.payload_size});" in body
    assert f"#define KTUI_HEADER_SIZE {HEADER_SIZE}" in text and "#define KTUI_PAYLOAD 128" in text
    written = set()
    for off in re.findall(r"\*\(u64 \*\)\(e->payload \+ (\d+)\) = v\d+;", body):
        written.update(range(int(off), int(off) + 8))
    for off in re.findall(r"ktui_clear_string\(e->payload \+ (\d+)\);", body):
        written.update(range(int(off), int(off) + 64))
    assert written == set(range(layout.payload_size))
    for off in re.findall(r"bpf_probe_read_\w+_str\(e->payload \+ (\d+),", body):
        assert body.index(f"ktui_clear_string(e->payload + {off});") < \
            body.index(f"_str(e->payload + {off},")
    # every header field (the cgroup id too: each record holds only bytes
    # of its hit), comm cleared before it is read
    for field in (name for name, _, _ in HEADER_FIELDS if name != "comm"):
        assert f"e->{field} = " in body
    assert body.index("__builtin_memset(e->comm, 0, sizeof(e->comm));") < body.index("bpf_get_current_comm(&e->comm")


def test_a_probe_of_header_fields_sends_the_header_alone():
    text = generate([parse_spec("vfs_read:c:comm,pid,tid,cpu")]).text
    assert "ktui_output(ctx, probe, e, KTUI_HEADER_SIZE + 0);" in text
    assert "e->payload" not in _function(text, "ktui_p0")


def test_the_output_size_is_passed_to_the_buffer():
    for buffer, call in ((RINGBUF, "ktui_events.ringbuf_output(e, size, BPF_RB_NO_WAKEUP)"),
                         (PERF, "ktui_events.perf_submit(ctx, e, size)")):
        assert call in generate([parse_spec("vfs_read:c:a3")], buffer=buffer).text


def test_comms_are_read_into_cleared_arrays():
    """bpf_get_current_comm left the bytes after the NUL as they were
    (before 6.4): a comm that goes into a record or a map key is cleared
    first, so one name is one key and no other task's tail leaks."""
    filtered = dataclasses.replace(parse_spec("vfs_read:c"), filter=parse_filter('comm == "dd"'))
    text = generate([filtered, parse_spec("vfs_read:c:a3")]).text
    assert "char comm[16] = {};\n    bpf_get_current_comm(&comm, sizeof(comm));" in _function(text, "ktui_p0")
    assert "__builtin_memset(e->comm, 0, sizeof(e->comm));\n    bpf_get_current_comm(&e->comm" in \
        _function(text, "ktui_p1")
    assert "struct ktui_comm_key key = {.probe = probe};" in text  # the comm key: zeroed, then filled


def test_the_filter_runs_before_any_fetch_it_does_not_read():
    """Fetches the filter reads come first, then the filter; the rest run
    only for a hit that passed it and is written out (after ktui_admit)."""
    probe = dataclasses.replace(parse_spec("do_sys_openat2:c:fname=+0(a2):ustring,fl=a3"),
                                filter=parse_filter("fl == 0"))
    body = _function(generate([probe]).text, "ktui_p0")
    flt, admit = body.index("if (!((u64)v1 == (u64)0ULL))"), body.index("ktui_admit(")
    assert body.index("u64 v1 = ") < flt  # fl: the filter reads it
    assert admit < body.index("bpf_probe_read_user_str(e->payload + 0,")  # the name: only if written out
    assert flt < body.index("ktui_count(") < admit
    # a string the filter compares is read before it
    by_name = dataclasses.replace(parse_spec("do_sys_openat2:c:fname=+0(a2):ustring,fl=a3"),
                                  filter=parse_filter('fname == "x"'))
    body = _function(generate([by_name]).text, "ktui_p0")
    assert body.index("bpf_probe_read_user_str(e->payload + 0,") < body.index("if (!(") < \
        body.index("u64 v1 = ") 
    # a filter on comm alone: no fetch before it
    on_comm = dataclasses.replace(parse_spec("do_sys_openat2:c:fname=+0(a2):ustring"),
                                  filter=parse_filter('comm == "nobody"'))
    body = _function(generate([on_comm]).text, "ktui_p0")
    assert body.index("if (!(") < body.index("ktui_admit(") < body.index("bpf_probe_read_user_str")


def test_a_return_probes_filter_runs_after_its_pairing():
    """The entry is popped whatever the filter says (else it would stay on
    the stack), then the filter; a hit it turns away is not counted."""
    probe = dataclasses.replace(parse_spec("vfs_read:r:retval"), filter=parse_filter("retval < 0"))
    body = _function(generate([probe]).text, "ktui_p0")
    assert body.index("ktui_pop(") < body.index("if (!(") < body.index("ktui_count(") < \
        body.index("ktui_account_return(")


def test_top_comms_past_the_exact_hits_are_a_random_sample():
    text = generate([parse_spec("vfs_read:c")]).text
    count = text[text.index("static __always_inline void ktui_count"):]
    count = count[:count.index("\n}\n")]
    assert "if (bpf_get_prandom_u32() & (KTUI_COMM_EVERY - 1))" in count
    assert "seen & (KTUI_COMM_EVERY" not in count
    assert "if (seen >= KTUI_COMM_EXACT)" in count


def test_errnos_go_to_each_probes_own_table_by_its_errno_mode(monkeypatch):
    """The generic program's table and bucket rule (returns.py), and the
    mode errno_mode gives the probe (a constant of its function)."""
    text = generate([parse_spec("vfs_read:c"), parse_spec("vfs_read:r")]).text
    assert "BPF_ARRAY(ktui_errnos, u64, KTUI_NPROBES * KTUI_ERRNO_BUCKETS);" in text
    assert "BPF_PERCPU_ARRAY(ktui_errno_rest, u64, KTUI_NPROBES);" in text
    assert f"#define KTUI_ERRNO_BUCKETS {returns.ERRNO_BUCKETS}" in text
    assert f"#define KTUI_ERRNO_HIGH_BASE {returns.ERRNO_HIGH_BASE}" in text
    assert "u32 key = probe * KTUI_ERRNO_BUCKETS + (u32)bucket;" in text
    # no BTF bound and no `errno: on`: nothing is claimed (lang.errnos)
    assert "ktui_account_return(probe, latency, PT_REGS_RC(ctx), 0);" in text
    assert "ktui_account_return" not in _function(text, "ktui_p0")
    guessed = dataclasses.replace(parse_spec("vfs_read:r"), errno="on")
    text = generate([guessed]).text
    assert f"ktui_account_return(probe, latency, PT_REGS_RC(ctx), {returns.ERRNO_GUESS});" in text
    import ktui.kernel.codegen.probe as probe_module

    for mode in (0, 4, 8):
        monkeypatch.setattr(probe_module, "errno_mode", lambda probe, mode=mode: mode)
        text = generate([parse_spec("vfs_read:r")]).text
        assert f"ktui_account_return(probe, latency, PT_REGS_RC(ctx), {mode});" in text


def test_the_entry_stack_is_the_one_both_engines_paste():
    from ktui.kernel.codegen.runtime import entry_stack_c

    text = generate([parse_spec("vfs_read:r")]).text
    assert entry_stack_c().rstrip("\n") in text


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
