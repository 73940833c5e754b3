"""The CLI under bad input: one line naming file:line:col, a documented exit
status, bounded time, never a traceback, and nothing user-written reaching C."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ktui import cli
from ktui.kernel.machine import preflight

KTUI = [sys.executable, "-m", "ktui"]
REPO = Path(__file__).resolve().parents[2]
GOOD = "name: ok\nprobes:\n  - vfs_read:c:a3\n  - spec: vfs_read:r:retval:s64\n    label: ret\n"


def run(*args, input=None):
    return CliRunner().invoke(cli.main, list(args), input=input)


def ktui(*args, timeout=60):
    return subprocess.run([*KTUI, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO)


def ktui_in_process(*args):
    """`ktui ARGS` through CliRunner, as a CompletedProcess: for a command
    that fails on its input before any kernel work, the same status, stdout
    and stderr as the real process (compared for every case below), without
    0.2 s of interpreter start and imports each. An exception that escaped
    the CLI (a traceback in a real process) fails here. The real process
    keeps its own tests: check (refused code point), compile (injection,
    refused code point), stream (missing file, usage error)."""
    r = CliRunner().invoke(cli.main, list(args))
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exc_info
    return subprocess.CompletedProcess(["ktui", *args], r.exit_code, r.stdout, r.stderr)


def one_line_error(out, code=1):
    assert out.returncode == code, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    return out.stderr


def test_check_good_file_exits_0(tmp_path):
    f = tmp_path / "good.yaml"
    f.write_text(GOOD)
    r = run("check", str(f))
    assert r.exit_code == 0 and r.output == f"{f}: ok (2 probes)\n"


def test_check_bad_file_prints_file_line_col_and_exits_1(tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD)
    bad.write_text("name: bad\nprobes:\n  - vfs_read:c:a3\n  - vfs_read:x\n")
    r = run("check", str(good), str(bad))
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[0].endswith("ok (2 probes)")
    assert lines[1].startswith(f"{bad}:4:")  # the line of the bad probe
    assert len(lines) == 2


def test_compile_injection_is_one_line_and_no_c(tmp_path):
    out = ktui("compile", "-e", "vfs_read:c:a1); bpf_override_return(ctx, 0); (")
    err = one_line_error(out)
    assert err.startswith("ktui: -e #1:")
    assert out.stdout == ""  # nothing was generated at all


@pytest.mark.parametrize("payload", [
    'x */ bpf_override_return(ctx, 0); /*',
    'x"); bpf_override_return(ctx, 0); ("',
    "x\\\nbpf_override_return(ctx, 0);",
])
def test_probe_set_text_never_reaches_c(tmp_path, payload):
    """Labels, names and descriptions are refused or kept out of the C."""
    import json
    f = tmp_path / "inj.yaml"
    f.write_text(f"name: {json.dumps(payload)}\ndescription: {json.dumps(payload)}\n"
                 f"probes:\n  - spec: vfs_read:c:a1\n    label: {json.dumps(payload)}\n")
    r = run("compile", str(f))
    assert r.exit_code in (0, 1)
    assert not isinstance(r.exception, Exception) or isinstance(r.exception, SystemExit)
    assert "bpf_override_return" not in r.output


def test_filter_strings_become_byte_compares_not_c_strings():
    r = run("compile", "-e", 'vfs_read:c:a1 if comm == "a\\");/*"')
    assert r.exit_code == 0
    assert '");/*' not in r.output and "e->comm[3] == 59" in r.output


BAD_INPUTS = {
    "empty set": b"name: x\nprobes: []\n",
    "empty file": b"",
    "overlong label": b"name: x\nprobes:\n  - spec: vfs_read:c\n    label: " + b"a" * 5000 + b"\n",
    "binary": bytes(range(256)) * 8,
    "nul byte": b"name: x\x00\nprobes: []\n",
    "billion laughs": b"a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n"
                      + b"".join(b"%c: &%c [" % (c, c) + b",".join([b"*" + bytes([c - 1])] * 9)
                                 + b"]\n" for c in b"bcdefghi"),
    "deep flow nesting": b"name: x\nprobes: " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
    "deep block nesting": b"name: x\nprobes:\n" + b"".join(b"  " * (i + 1) + b"k%d:\n" % i
                                                          for i in range(300)),
    "10 MB file": b"name: x\n# " + b"x" * (10 << 20) + b"\n",
    "python tag": b"name: !!python/object/apply:os.system [echo pwned]\nprobes: [vfs_read:c]\n",
    "duplicate key": b"name: x\nname: y\nprobes: [vfs_read:c]\n",
    "invalid utf-8": b"name: \xff\xfe\nprobes: [vfs_read:c]\n",
    "bidi override in spec": "name: x\nprobes: ['vfs_read:c:a1\u202e']\n".encode(),
    "bidi override in label": "name: x\nprobes:\n  - spec: vfs_read:c\n    label: rx\u202eyt\n".encode(),
    "zero-width space in name": "name: vfs\u200b\nprobes: [vfs_read:c]\n".encode(),
    "huge number": b"name: x\nprobes:\n  - spec: vfs_read:c\n    sample: " + b"9" * 5000 + b"\n",
    "not a mapping": b"- just\n- a list\n",
}


@pytest.mark.timeout(30)  # the bounded time: what the real process's timeout was
@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_probe_set_is_one_located_line_in_bounded_time(tmp_path, name):
    f = tmp_path / "bad.yaml"
    f.write_bytes(BAD_INPUTS[name])
    out = ktui_in_process("check", str(f))
    assert out.returncode == 1, out.stdout
    assert "Traceback" not in out.stderr and out.stderr == ""
    assert out.stdout.count("\n") == 1
    assert out.stdout.startswith(f"{f}:")  # file:line:col: message


def test_odd_unicode_that_is_valid_is_accepted_and_kept(tmp_path):
    f = tmp_path / "uni.yaml"
    f.write_text("name: 'vfs ✓ ünï'\nprobes:\n  - spec: vfs_read:c:a3\n    label: größe\n",
                 encoding="utf-8")
    r = run("check", str(f))
    assert r.exit_code == 0


def test_check_names_the_refused_code_point_in_one_line(tmp_path):
    f = tmp_path / "bidi.yaml"
    f.write_text("name: x\nprobes:\n  - spec: vfs_read:c\n    label: rx\u202eyt\n", encoding="utf-8")
    out = ktui("check", str(f))
    assert out.returncode == 1 and out.stderr == ""
    assert out.stdout == (f"{f}:4:14: probe 1 (vfs_read:c): label: U+202E RIGHT-TO-LEFT OVERRIDE "
                          "is not allowed (no control, invisible or text-direction characters)\n")


def test_spec_on_the_command_line_names_the_refused_code_point():
    out = ktui("compile", "-e", "vfs_read:c:a1 if comm == \"d\u2067\"")
    assert one_line_error(out).startswith(
        "ktui: -e #1:28: filter: U+2067 RIGHT-TO-LEFT ISOLATE is not allowed in a filter")


@pytest.mark.parametrize("comm, words", [
    ("d\u202ed", "--comm: U+202E RIGHT-TO-LEFT OVERRIDE is not allowed"),
    ("\u200b", "--comm: U+200B ZERO WIDTH SPACE is not allowed"),
    ("abcdefghijklmnop", "--comm: too long (16 bytes, at most 15"),
    ("", "--comm: must not be empty"),
])
def test_bad_comm_option_is_invalid_input(monkeypatch, comm, words):
    monkeypatch.setattr(preflight, "check_environment", lambda **kw: [])
    import ktui.headless as headless
    monkeypatch.setattr(headless, "run_stream", lambda *a, **kw: 0)
    r = run("stream", "-e", "vfs_read:c", "--comm", comm)
    assert r.exit_code == 1 and r.output.startswith(f"ktui: {words}") and r.output.count("\n") == 1
    assert run("stream", "-e", "vfs_read:c", "--comm", "größe").exit_code == 0


@pytest.mark.parametrize("spec", [
    "",
    ":",
    "vfs_read",
    "vfs_read:q",
    "vfs_read:c:a7",
    "vfs_read:c:" + ",".join(["a1"] * 1000),
    "f" * 100_000 + ":c",
    "vfs_read:c:+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(a1)))))))))))))))))",
    "vfs_read:c:a1 if " + "(" * 10_000 + "a1" + ")" * 10_000,
    "vfs_rëad:c",
    "vfs_read:c:a1\u202e",
    "vfs_read:c:a1\x00",
])
@pytest.mark.timeout(30)
def test_bad_specs_are_one_line_exit_1(spec):
    out = ktui_in_process("compile", "-e", spec.replace("\x00", "\\0"))
    one_line_error(out)
    assert out.stdout == ""


def test_stream_from_missing_file():
    out = ktui("stream", "--from", "/nonexistent/rec.ktrec")
    assert one_line_error(out).startswith("ktui: /nonexistent/rec.ktrec:")


def test_nothing_to_probe_is_exit_1():
    one_line_error(ktui("stream"))


def test_bad_buffer_pages_is_a_usage_error(monkeypatch):
    monkeypatch.setattr(preflight, "check_environment", lambda **kw: [])
    r = run("stream", "-e", "vfs_read:c", "--buffer-pages", "3")
    assert r.exit_code == 2 and "power of two" in r.output


def fake_machine(monkeypatch, root):
    real = preflight.check_environment
    monkeypatch.setattr(preflight, "check_environment",
                        functools.partial(real, root=root, euid=1000, caps=0,
                                          release="6.1.0-x", have_bcc=lambda: False))


@pytest.mark.parametrize("cmd", [[], ["stream", "-e", "vfs_read:c"],
                                 ["record", "-e", "vfs_read:c", "-o", "x.ktrec"]])
def test_environment_problems_exit_3_one_line_each(monkeypatch, tmp_path, cmd):
    fake_machine(monkeypatch, tmp_path)  # nothing there: no root, bcc, kprobes, headers
    r = run(*cmd)
    assert r.exit_code == 3
    lines = r.output.splitlines()
    assert len(lines) == 4 and all(x.startswith("ktui: ") for x in lines)
    assert any("`ktui vm`" in x for x in lines)
    assert any("python3-bpfcc" in x for x in lines)
    assert not (tmp_path / "x.ktrec").exists()


def test_headless_commands_print_warnings_but_continue(monkeypatch):
    monkeypatch.setattr(preflight, "check_environment",
                        lambda **kw: [preflight.Problem("btf", "no BTF: fine", fatal=False)])
    import ktui.headless as headless
    monkeypatch.setattr(headless, "run_stream", lambda *a, **kw: 0)
    r = run("stream", "-e", "vfs_read:c")
    assert r.exit_code == 0 and "ktui: warning: no BTF: fine" in r.output


@pytest.mark.skipif(Path("/sys/bus/event_source/devices/kprobe/type").exists(),
                    reason="this test is about machines without kprobes (our host)")
def test_ktui_on_this_host_exits_3_with_the_vm_hint():
    out = ktui()
    assert out.returncode == 3
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert "`ktui vm`" in out.stderr
    assert all(x.startswith("ktui: ") for x in out.stderr.splitlines())


def test_set_uid_is_refused(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    r = run("check", "probesets/vfs.yaml")
    assert r.exit_code == 3 and "set-uid" in r.output


def test_set_gid_is_refused(monkeypatch):
    monkeypatch.setattr(os, "getegid", lambda: 0)
    monkeypatch.setattr(os, "getgid", lambda: 1000)
    assert run("check", "probesets/vfs.yaml").exit_code == 3


# ---------------------------------------------------------------- the language of the files


def test_e_probes_carry_labels_so_two_on_one_function_have_two_names():
    ps = cli.load_inputs((), ("reads=vfs_read:c:a3", "small=vfs_read:c:a3 if a3 < 16"))
    assert [p.label for p in ps.probes] == ["reads", "small"]
    from ktui.pipeline.format import short_name
    assert [short_name(p) for p in ps.probes] == ["reads", "small"]  # the event pane's column
    r = run("compile", "-e", "reads=vfs_read:c:a3", "-e", "vfs_read:c:a3")
    assert r.exit_code == 0, r.output
    r = run("compile", "-e", "vfs_read:c:a3", "-e", "vfs_read:c:a3")
    assert r.exit_code == 1 and "give one a label (label: in a file, -e 'LABEL=SPEC')" in r.output


@pytest.fixture
def fake_btf(monkeypatch, tmp_path):
    """The commands bind names to this BTF (tests/unit/namedkernel.py), not
    to the machine's."""
    from tests.unit.namedkernel import kernel_names

    kernel = kernel_names(tmp_path)
    monkeypatch.setattr(cli, "_kernel_names", lambda: kernel)
    return kernel


@pytest.mark.parametrize("text, at, words", [
    ("vfs_read:c:a3 if a3 >", None, "filter: expected a name or a value after >"),
    # a name at a function's entry may be a parameter: refused when bound to BTF
    ("vfs_read:c:a3 if nope > 1", "nope", "filter: vfs_read has no parameter 'nope'"),
    ("vfs_read+4:c:a3 if nope > 1", "nope", 'filter: unknown name "nope"'),
    ("vfs_read:c:a3,cuont", "cuont", "vfs_read has no parameter 'cuont' (did you mean count?)"),
    ("vfs_read:c:a3  if  a3 > 1 && comm == 7", "7", "filter: comm is a string"),
    ("reads=vfs_read:c:n=a3 if n > 1 && x", "x", 'filter: "x" alone is not a condition'),
    ("vfs_read:c:a3 if comm == dd", "dd", 'filter: strings need double quotes: comm == "dd"'),
    ("vfs_read:q if a3 > 1", "q", "kind must be c, r or t"),
])
def test_an_e_error_column_points_into_the_e_text(fake_btf, text, at, words):
    """The column counted from the filter's start (`-e #1:1:` for the first
    character of the filter), not from the start of what was typed."""
    r = run("compile", "-e", text)
    assert r.exit_code == 1 and r.output.count("\n") == 1, r.output
    prefix, col, message = r.output.split(":", 3)[1:]
    assert prefix == " -e #1"
    assert col.isdigit(), f"no column: {r.output}"
    col = int(col)
    assert message.strip().startswith(words), r.output
    assert col == (len(text) + 1 if at is None else text.rindex(at) + 1), r.output


@pytest.mark.parametrize("spec, filt, quoted", [
    ("vfs_read:c", "comm == dd", 'comm == "dd"'),
    ("vfs_read:c", "bash != comm", '"bash" != comm'),
    ("vfs_read:c:f=+0(a2):string", "f == etc", 'f == "etc"'),
    ("vfs_read:r:name=a2:ustring", "name != x && retval < 0", 'name != "x"'),
])
def test_a_bare_word_against_a_string_says_strings_need_quotes(spec, filt, quoted):
    r = run("compile", "-e", f"{spec} if {filt}")
    assert r.exit_code == 1 and f"filter: strings need double quotes: {quoted}" in r.output, r.output


def test_compile_takes_buffer_auto_and_resolves_it_as_a_session_would(monkeypatch):
    """`auto` is the ring buffer where the kernel was probed to have one,
    perf buffers where it has none, the ring buffer where the probe could
    not tell (`ktui compile` needs no root)."""
    from ktui.kernel.buffers import buffer_choice
    from ktui.kernel.machine import features
    from ktui.kernel.codegen import generate
    from ktui.lang.spec import parse_spec

    for has, buffer in ((True, "ringbuf"), (False, "perf"), (None, "ringbuf")):
        monkeypatch.setattr(features, "_memo", features.given(ringbuf=has))
        r = run("compile", "--buffer", "auto", "-e", "vfs_read:c:a3")
        assert r.exit_code == 0, r.output
        assert r.output == generate([parse_spec("vfs_read:c:a3")], buffer=buffer).text
        assert buffer_choice.resolve_buffer("auto", has) == buffer
        assert buffer_choice.resolve_buffer("perf", has) == "perf"
    for cmd in ("compile", "stream", "record", "run"):
        assert "auto" in run(cmd, "--help").output  # every command that takes --buffer takes auto


THREE_ERRORS = """\
name: three
lable: a misspelt top-level key
probes:
  - spec: vfs_read:c:a3
    filter: a3 >
  - spec: vfs_write:q
"""


def test_check_prints_every_error_in_a_file(tmp_path):
    """It printed only the first: the misspelt key hid the bad filter until fixed."""
    f = tmp_path / "three.yaml"
    f.write_text(THREE_ERRORS)
    r = run("check", str(f))
    assert r.exit_code == 1
    assert r.output.splitlines() == [
        f"{f}:2:1: unknown key 'lable'; expected one of: name, description, filter, maxactive, attach, probes",
        f"{f}:5:17: probe 1 (vfs_read:c:a3): filter: expected a name or a value after >, got end of filter",
        f"{f}:6:21: probe 2 (vfs_write:q): spec: kind must be c, r or t, got \"q\" (c = call, r = return, t = tracepoint)",
    ]


def test_check_goes_on_inside_a_probe_after_a_misspelt_key(fake_btf, tmp_path):
    f = tmp_path / "probe.yaml"
    f.write_text("name: x\nprobes:\n  - spec: vfs_read:c:a3\n    lable: y\n    filter: nope > 1\n")
    lines = run("check", str(f)).output.splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [f"{f}:4:5", f"{f}:5:13"]
    assert "did you mean 'label'" in lines[0] and "vfs_read has no parameter 'nope'" in lines[1]
    # Inside the function a name cannot be a parameter: no BTF needed to refuse it.
    f.write_text("name: x\nprobes:\n  - spec: vfs_read+4:c:a3\n    lable: y\n    filter: nope > 1\n")
    lines = run("check", "--syntax-only", str(f)).output.splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [f"{f}:4:5", f"{f}:5:13"]
    assert 'unknown name "nope"' in lines[1]


def test_other_commands_still_stop_at_the_first_error(tmp_path):
    f = tmp_path / "three.yaml"
    f.write_text(THREE_ERRORS)
    r = run("compile", str(f))
    assert r.exit_code == 1 and r.output.count("\n") == 1 and "unknown key 'lable'" in r.output


# ---------------------------------------------------------------- numbers and usage errors


@pytest.fixture
def nothing_runs(monkeypatch):
    """Record what would run; preflight, compile and the UI never do here."""
    import ktui.dashboard as dashboard
    import ktui.headless as headless
    calls = []
    monkeypatch.setattr(preflight, "check_environment", lambda **kw: calls.append("preflight") or [])
    for module, name in ((headless, "run_stream"), (headless, "run_record"), (dashboard, "run_live"),
                         (dashboard, "run_replay")):
        monkeypatch.setattr(module, name, lambda *a, _n=name, **kw: calls.append((_n, a)) or 0)
    return calls


BAD_NUMBERS = [
    (["stream", "--pid", "-5"], "--pid: -5 is out of range (1..4194304)"),
    (["stream", "--pid", "0"], "--pid: 0 is out of range (1..4194304)"),
    (["stream", "--pid", "4194305"], "--pid: 4194305 is out of range (1..4194304)"),
    (["stream", "--pid", "1.5"], "--pid: '1.5' is not a whole number"),
    (["run", "--refresh", "-1"], "--refresh: -1 is out of range (0.1..60)"),
    (["run", "--refresh", "0"], "--refresh: 0 is out of range (0.1..60)"),
    (["run", "--refresh", "nan"], "--refresh: 'nan' is not a number"),
    (["replay", "x.ktrec", "--refresh", "inf"], "--refresh: 'inf' is not a number"),
    (["stream", "--interval", "0"], "--interval: 0 is out of range (0.05..86400)"),
    (["record", "-o", "x.ktrec", "--interval", "-1"], "--interval: -1 is out of range (0.05..86400)"),
    (["stream", "--duration", "-1"], "--duration: -1 is out of range (0.01..10000000)"),
    (["record", "-o", "x.ktrec", "--duration", "0"], "--duration: 0 is out of range (0.01..10000000)"),
    (["stream", "--buffer-pages", "0"], "--buffer-pages: 0 is out of range (1..262144)"),
    (["run", "--buffer-pages", "3"], "--buffer-pages: 3 is not a power of two"),
    (["replay", "x.ktrec", "--speed", "-1"], "--speed: -1 is out of range (0..1000000)"),
]


@pytest.mark.parametrize("args, message", BAD_NUMBERS, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_numbers_are_bounded_where_they_are_parsed(nothing_runs, args, message):
    """--pid -5 generated `!= -5U`; --refresh -1 was a traceback after the
    compile and --refresh 0 froze the dashboard."""
    r = run(*args, "-e", "vfs_read:c") if args[0] != "replay" else run(*args)
    assert (r.exit_code, r.output) == (2, f"ktui: {message}\n")
    assert nothing_runs == []  # refused before preflight, compile or screen


def test_the_bounds_themselves_are_accepted(nothing_runs):
    assert run("stream", "-e", "vfs_read:c", "--pid", "4194304", "--interval", "0.05",
               "--duration", "0.01", "--buffer-pages", "262144").exit_code == 0
    assert run("run", "-e", "vfs_read:c", "--pid", "1", "--refresh", "60", "--buffer-pages", "1").exit_code == 0
    assert run("replay", "x.ktrec", "--speed", "0", "--refresh", "0.1").exit_code == 0
    (_, stream), (_, live), (_, replay) = (c for c in nothing_runs if c != "preflight")
    ps, options, interval, duration = stream[:4]
    assert (ps.pid, options.ringbuf_pages, interval, duration) == (4194304, 262144, 0.05, 0.01)
    assert isinstance(ps.pid, int) and live[0].pid == 1 and live[2] == 60.0
    assert replay[1:3] == (0.0, 0.1)


@pytest.mark.parametrize("args, start", [
    (["stream", "--bogus"], "ktui: No such option '--bogus'"),
    (["check"], "ktui: Missing argument 'FILES...'."),
    (["record", "-e", "vfs_read:c"], "ktui: Missing option '-o' / '--output'."),
    (["stream", "--buffer", "ring"], "ktui: --buffer: 'ring' is not one of 'auto', 'ringbuf', 'perf'."),
    (["compile", "--pid", "5"], "ktui: No such option '--pid'"),
])
def test_every_usage_error_is_one_line_exit_2(nothing_runs, args, start):
    r = run(*args)
    assert r.exit_code == 2 and r.output.count("\n") == 1 and r.output.startswith(start), r.output


def test_a_missing_or_unknown_argument_says_what_the_command_takes(nothing_runs):
    """Issue #29: `ktui check` with no file printed no usage."""
    r = run("check")
    assert (r.exit_code, r.output) == (2, "ktui: Missing argument 'FILES...'. Usage: ktui check [OPTIONS] "
                                          "FILES... (ktui check --help)\n")
    r = run("record", "-e", "vfs_read:c")
    assert r.output.endswith(" Usage: ktui record [OPTIONS] [FILES]... (ktui record --help)\n")
    assert "Usage:" not in run("stream", "--pid", "x").output  # a bad value says what is wrong with it


def test_help_and_version_still_work():
    for args in (["--help"], ["-h"], ["stream", "--help"], ["--version"]):
        r = run(*args)
        assert r.exit_code == 0 and r.output.count("\n") >= 1, (args, r.output)
    assert "Usage:" in run("stream", "--help").output and "version" in run("--version").output


def test_a_usage_error_in_a_real_process_is_one_line_on_stderr():
    out = ktui("stream", "--pid", "-5", "-e", "vfs_read:c")
    assert one_line_error(out, code=2) == "ktui: --pid: -5 is out of range (1..4194304)\n"
    assert out.stdout == ""
