"""User functions (uprobes) in the spec language: `PATH:SYMBOL[+OFF]:c|r`
and `PATH:0xADDR:c`, what the grammar and the checks refuse (one line,
with its column), and the round trip through the canonical text and a
probe set. Reading the file itself: test_uprobe_target.py."""

from __future__ import annotations

import dataclasses

import pytest

from ktui.lang.attach_rules import text_obstacle
from ktui.lang.bind import bind_probe, needs_binding
from ktui.lang.errnos import OFF_USER, probe_errno_mode
from ktui.lang.model import Arg, Deref, Fetch, Kind, Probe, ProbeSet, ProbeSetError, RetVal, SpecError, Target
from ktui.lang.probeset import check_probeset, loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_probe_text, parse_spec, parse_spec_clauses, parse_target, validate_probe
from tests.unit.spec_errors import spec_error

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


# ---------------------------------------------------------------- grammar


def test_a_user_function_parses_with_its_path():
    probe = parse_spec(f"{LIBC}:malloc:c:a1")
    assert probe.target == Target(symbol="malloc", path=LIBC)
    assert probe.target.is_user and probe.kind is Kind.CALL
    assert probe.fetches == (Fetch(Arg(1)),)


@pytest.mark.parametrize("text, target", [
    (f"{LIBC}:malloc+0x10:c", Target(symbol="malloc", offset=16, path=LIBC)),
    ("/usr/bin/x:0x1139:c", Target(address=0x1139, path="/usr/bin/x")),
    ("/opt/my-app/bin/app.v2:_ZN3foo3barEv:c", Target(symbol="_ZN3foo3barEv", path="/opt/my-app/bin/app.v2")),
])
def test_user_targets(text, target):
    assert parse_spec(text).target == target
    assert parse_target(text.rsplit(":", 1)[0]) == target


@pytest.mark.parametrize("text", [
    f"{LIBC}:malloc:c:a1",
    f"{LIBC}:malloc+0x10:c",
    "/usr/bin/bash:readline:r:retval:string",
    "/usr/bin/bash:readline:r:line=retval:ustring",
    "/usr/bin/x:0x1139:c:rdi,+8(rsi):u32,comm",
    f"allocs={LIBC}:malloc:c:size=a1",
])
def test_the_canonical_text_round_trips(text):
    probe = parse_spec(text)
    assert str(probe) == text
    validate_probe(probe)
    assert parse_spec(str(probe)) == probe


def test_filters_aggregations_labels_and_sampling_as_for_kernel_probes():
    probe = parse_probe_text(f"allocs={LIBC}:malloc:c:size=a1 hist(a1) stack(user) if size > 4096")
    assert probe.label == "allocs" and str(probe.filter) == "size > 4096"
    assert probe.agg.hist == Fetch(Arg(1)) and probe.agg.stack == "user"
    validate_probe(dataclasses.replace(probe, sample=10, rate_limit=100))
    assert parse_spec_clauses(f"{LIBC}:malloc:r count(comm) sum(retval)").agg.sum == Fetch(RetVal())


@pytest.mark.parametrize("text, col, words", [
    ("/opt/a:b/bin:f:c", 1, "a path with ':' in it cannot be probed"),
    ("/usr/bin/my app:f:c", 12, "a path with a blank in it"),
    ("/usr/bin/bash", 14, "expected :FUNCTION or :0xADDRESS after the path"),
    ("/usr/bin/bash:", 15, "expected a function name or a 0x address after the path"),
    ("/usr/bin/bash:1139:c", 15, "written in hex"),
    ("/usr/bin/bash:0x0:c", 15, "address 0 cannot be probed"),
    ("/usr/bin/bash:c", 16, "a user probe names its function"),
    ("/usr/bin/bash:f:t", 17, "takes c (call) or r (return)"),
    ("/usr/bin/bash:f-4:c", 16, "a symbol offset is added"),
    ("/usr/bin/bash:f+0x4:r", 17, "drop the +offset"),
    ("/usr/bin/bash:f:c:count", 19, "count: a user function has no BTF here: use a1..a6, registers, retval"),
    ("/usr/bin/bash:f:c:+8(file->f_pos)", 22, "a user function has no BTF here"),
    ("/usr/bin/bash:f:c:retval", 19, "retval exists only in return probes"),
    ("/usr/bin/bash:f:c:a1 hist(count)", 22, "hist: count: a user function has no BTF here"),
    ("/usr/bin/bash:f:c:a1 if count > 3", 25, 'filter: unknown name "count": a user function has no BTF'),
    ("/" + "x" * 1100 + ":f:c", 1, "path longer than 1024 characters"),
])
def test_refusals_are_one_line_with_a_column(text, col, words):
    err = spec_error(text)
    assert err.col == col and words in err.message, (err.col, err.message)


def test_strings_are_user_memory_either_way():
    for type_ in ("string", "ustring"):
        validate_probe(parse_spec(f"/usr/bin/bash:readline:r:retval:{type_}"))
        validate_probe(parse_spec(f"{LIBC}:open:c:+0(a1):{type_}"))


def test_a_kernel_return_probe_still_refuses_retval_as_a_string():
    assert "retval cannot be :string" in spec_error("vfs_read:r:retval:string").message


# ---------------------------------------------------------------- options


@pytest.mark.parametrize("changes, words", [
    ({"errno": "on"}, "errno: a user function returns no kernel errno"),
    ({"maxactive": 64}, "maxactive: a user return probe has none"),
    ({"attach": "fentry"}, "attach: fentry is for kernel functions; a user function attaches as a uprobe"),
    ({"attach": "kprobe"}, "attach: kprobe is for kernel functions"),
])
def test_kernel_only_options_are_refused(changes, words):
    probe = dataclasses.replace(parse_spec("/usr/bin/bash:readline:r"), **changes)
    with pytest.raises(SpecError, match=words):
        validate_probe(probe)


def test_a_user_probe_never_goes_by_fentry_and_counts_no_errnos():
    probe = parse_spec("/usr/bin/bash:readline:r")
    assert "uprobe" in text_obstacle(probe)
    assert probe_errno_mode(probe).mode == 0 and probe_errno_mode(probe).text == OFF_USER


class _NoKernel:
    """A kernel that must not be asked: a user probe has no BTF."""

    def problem(self):
        raise AssertionError("asked the kernel about a user function")

    def prototype(self, function):
        raise AssertionError("asked the kernel about a user function")


def test_binding_asks_the_kernel_nothing():
    probe = parse_probe_text("/usr/bin/bash:readline:r:retval if retval > 0")
    assert not needs_binding(probe)
    assert bind_probe(probe, _NoKernel()) == probe


# ---------------------------------------------------------------- probe sets


def test_user_probes_load_from_yaml_and_save_back_equal():
    ps = loads_probeset(f"""
name: user
filter: {{pid: 1234}}
maxactive: 64
attach: fentry
probes:
  - spec: {LIBC}:malloc:c:size=a1
    filter: size > 4096
    hist: a1
    stack: user
    sample: 10
  - allocs_ret={LIBC}:malloc:r:retval:x64
  - function: /usr/bin/bash:readline
    kind: return
    fetch: [retval:string]
  - spec: vfs_read:r
""")
    malloc, ret, readline, kernel = ps.probes
    assert malloc.target.path == LIBC and malloc.sample == 10 and malloc.agg.stack == "user"
    assert ret.maxactive == 0 and kernel.maxactive == 64  # the set's maxactive: not a uretprobe's
    assert readline.fetches == (Fetch(RetVal(), "string"),)
    assert loads_probeset(dumps_probeset(ps)) == ps


@pytest.mark.parametrize("key, words", [
    ("maxactive: 8", "maxactive: a user return probe has none"),
    ("errno: on", "errno: a user function returns no kernel errno"),
    ("attach: fentry", "attach: fentry is for kernel functions"),
    ("hist: count", "hist: count: a user function has no BTF here"),
])
def test_a_set_refuses_kernel_only_keys_on_a_user_probe_at_their_line(key, words):
    _ps, errors = _check(f"name: x\nprobes:\n  - spec: /usr/bin/bash:readline:r\n    {key}\n")
    assert len(errors) == 1 and errors[0].line == 4 and words in errors[0].message, errors


def test_a_spec_error_in_a_set_is_located_in_the_file():
    _ps, errors = _check("name: x\nprobes:\n  - /usr/bin/bash:f:c:count\n")
    assert [(e.line, e.col) for e in errors] == [(3, 23)]
    assert "a user function has no BTF here" in errors[0].message


def _check(text: str):
    from ktui.lang.probeset import checks_probeset

    return checks_probeset(text, "set.yaml")


def test_the_compiled_engine_refuses_a_user_function():
    """Its C would kprobe a kernel function of the same name (libc's strlen, the kernel's)."""
    from ktui.kernel.codegen import generate

    with pytest.raises(SpecError, match="never compiled: tracepoints, user-space probes"):
        generate([parse_spec(f"{LIBC}:strlen:c:a1")])
