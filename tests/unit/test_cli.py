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
from ktui.kernel import preflight

KTUI = [sys.executable, "-m", "ktui"]
REPO = Path(__file__).resolve().parents[2]
GOOD = "name: ok\nprobes:\n  - vfs_read:c:a3\n  - spec: vfs_read:r:retval:s64\n    label: ret\n"


def run(*args, input=None):
    return CliRunner().invoke(cli.main, list(args), input=input)


def ktui(*args, timeout=60):
    return subprocess.run([*KTUI, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO)


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


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_probe_set_is_one_located_line_in_bounded_time(tmp_path, name):
    f = tmp_path / "bad.yaml"
    f.write_bytes(BAD_INPUTS[name])
    out = ktui("check", str(f), timeout=30)
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
        "ktui: -e #1:11: U+2067 RIGHT-TO-LEFT ISOLATE is not allowed in a filter")


@pytest.mark.parametrize("comm, words", [
    ("d\u202ed", "--comm: U+202E RIGHT-TO-LEFT OVERRIDE is not allowed"),
    ("\u200b", "--comm: U+200B ZERO WIDTH SPACE is not allowed"),
    ("abcdefghijklmnop", "--comm: longer than 15 bytes"),
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
def test_bad_specs_are_one_line_exit_1(spec):
    out = ktui("compile", "-e", spec.replace("\x00", "\\0"), timeout=30)
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
