"""Wildcard probes in the language: `tcp_*:c`, `syscalls/sys_enter_*:t`
parse to one probe whose target is a pattern; what a pattern cannot be
(an offset, an alternative, a user file's function or USDT probe, names
by BTF or fields, fentry) is refused in one line at its column, in a spec
and in a probe set (file:line:col)."""

from __future__ import annotations

import pytest

from ktui.lang.attach_rules import text_obstacle
from ktui.lang.model import Kind, ProbeSetError, SpecError
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_probe_text, parse_spec, validate_probe
from tests.unit.tracefs import FormatsKernel


@pytest.mark.parametrize("text, kind, name", [
    ("tcp_*:c", Kind.CALL, "tcp_*"),
    ("*:c", Kind.CALL, "*"),
    ("?cp_sendmsg:c", Kind.CALL, "?cp_sendmsg"),
    ("[tu]*_sendmsg:r:retval", Kind.RETURN, "[tu]*_sendmsg"),
    ("tcp_v[46]_*:c:a1,comm", Kind.CALL, "tcp_v[46]_*"),
    ("tcp_v[!4]_*:c", Kind.CALL, "tcp_v[!4]_*"),
    ("ext4_*.isra.*:c", Kind.CALL, "ext4_*.isra.*"),
    ("conns=tcp_*_connect:c", Kind.CALL, "tcp_*_connect"),
    ("syscalls/sys_enter_*:t", Kind.TRACEPOINT, "syscalls/sys_enter_*"),
    ("*/sched_switch:t:comm", Kind.TRACEPOINT, "*/sched_switch"),
    ("sys*/sys_[ex]*_read:t", Kind.TRACEPOINT, "sys*/sys_[ex]*_read"),
    ("9p/*:t", Kind.TRACEPOINT, "9p/*"),
])
def test_patterns_parse_and_print_back(text, kind, name):
    probe = parse_probe_text(text)
    assert probe.kind is kind and probe.target.is_wildcard
    assert (probe.target.tracepoint if kind is Kind.TRACEPOINT else probe.target.symbol) == name
    assert probe.members is None  # the session's, once bound
    assert parse_probe_text(str(probe)) == probe
    validate_probe(probe)


@pytest.mark.parametrize("text", [
    "tcp_*:r:retval hist(retval) count(comm)",
    "tcp_*:c:a1,rdi,+8(a1):u32 if a1 > 4096 && comm == \"nginx\"",
    "tcp_*:c:x=a2 if x > 1",
    "syscalls/sys_enter_*:t count(comm) if pid > 1",
    "tcp_*:c stack(kernel)",
])
def test_positional_values_builtins_and_aggregations_are_fine(text):
    probe = parse_probe_text(text)
    assert probe.target.is_wildcard
    validate_probe(probe)


@pytest.mark.parametrize("spec, col, words", [
    ("tcp_*+0x10:c", 6, "a pattern has no offset"),
    ("tcp_*-4:c", 6, "a pattern has no offset"),
    ("syscalls/sys_enter_*+4:t", 21, "a tracepoint has no offset"),
    ("tcp_*|udp_*:c", 1, "a pattern cannot be an alternative"),
    ("vfs_read|tcp_*:c", 10, "a pattern cannot be an alternative"),
    ("vfs_read|*:c", 10, "a pattern cannot be an alternative"),
    ("/bin/bash:read*:c", 11, "wildcards are for kernel functions and tracepoints, not a file's "
                              "functions: `ktui list /bin/bash:'read*'` lists them"),
    ("/bin/bash:*:c", 11, "`ktui list /bin/bash:'*'`"),
    ("/tmp/p:kt*:tick:usdt", 8, "not a file's USDT probes: `ktui list --usdt /tmp/p`"),
    ("/tmp/p:ktui:t*:usdt", 13, "not a file's USDT probes"),
    ("tcp_*:c:sk->sk_family", 9, "sk->sk_family: a wildcard's functions have different parameters: "
                                 "fetch by position (a1..a6, registers, retval)"),
    ("tcp_*:c:a1,size", 12, "size: a wildcard's functions have different parameters"),
    ("tcp_*:c:+8(sk):u32", 12, "sk: a wildcard's functions have different parameters"),
    ("tcp_*:c:a1 if size > 4096", 15, "filter: unknown name \"size\": a wildcard's functions"),
    ("tcp_*:c hist(size)", 9, "hist: size: a wildcard's functions have different parameters"),
    ("tcp_[46:c", 5, "unclosed or empty [ in a pattern"),
    ("tcp_[]_x:c", 5, "unclosed or empty ["),
    ("tcp_[a.b]:c", 7, "a [...] in a pattern holds letters, digits, _ and ranges"),
    ("tcp_*:t", 7, "kind t is for a tracepoint"),
    ("syscalls/sys_*:c", 16, "a tracepoint (CATEGORY/NAME) takes kind t"),
])
def test_refusals_are_one_line_at_the_column(spec, col, words):
    with pytest.raises(SpecError) as err:
        parse_probe_text(spec)
    assert err.value.col == col and words in err.value.message, (err.value.col, str(err.value))
    assert "\n" not in err.value.message


def test_a_wildcard_never_goes_by_fentry():
    assert "a wildcard attaches by kprobe" in text_obstacle(parse_spec("tcp_*:c:a1"))
    assert text_obstacle(parse_spec("tcp_sendmsg:c:a1")) == ""


# ---------------------------------------------------------------- probe sets


def test_the_long_form_loads_patterns_and_saves_them_back():
    ps = loads_probeset("""\
name: w
probes:
  - function: 'tcp_*'
    kind: r
    fetch: [retval]
  - tracepoint: 'syscalls/sys_enter_*'
    count: comm
  - '*:c'
  - spec: 'tcp_v[46]_*:c:a1'
    attach: auto
""")
    specs = [p.spec_text for p in ps.probes]
    assert specs == ["tcp_*:r:retval", "syscalls/sys_enter_*:t", "*:c", "tcp_v[46]_*:c:a1"]
    assert all(p.target.is_wildcard for p in ps.probes)
    assert loads_probeset(dumps_probeset(ps)) == ps


def test_a_tracepoint_pattern_loads_with_a_kernel_that_reads_formats():
    """Its fields are not bound (it reads none): no format of `syscalls/sys_enter_*` is asked for."""
    ps = loads_probeset("name: w\nprobes:\n  - tracepoint: 'syscalls/sys_enter_*'\n",
                        kernel=FormatsKernel("6.1"))
    assert ps.probes[0].target.tracepoint == "syscalls/sys_enter_*"


REFUSED = [
    ("  - function: tcp_*+4\n", 3, 20, "function: a pattern has no offset"),
    ("  - function: [vfs_read, udp_*]\n", 3, 26, "function: a pattern cannot be an alternative"),
    ("  - function: [tcp_*, udp_*]\n", 3, 16, "function: a pattern cannot be an alternative"),
    ("  - binary: /bin/bash\n    function: read*\n", 4, 15,
     "function: wildcards are for kernel functions and tracepoints, not a file's functions"),
    ("  - function: tcp_*\n    fetch: [a1, sk->sk_family]\n", 4, 17,
     "fetch: sk->sk_family: a wildcard's functions have different parameters"),
    ("  - function: tcp_*\n    filter: size > 1\n", 4, 13, "filter: unknown name \"size\": a wildcard's"),
    ("  - function: tcp_*\n    hist: size\n", 4, 11, "hist: size: a wildcard's functions"),
    ("  - function: tcp_*\n    attach: fentry\n", 4, 5,
     "attach: fentry: not for this probe: a wildcard attaches by kprobe"),
    ("  - spec: tcp_*:c\n    attach: fentry\n", 4, 5, "a wildcard attaches by kprobe"),
]


@pytest.mark.parametrize("probes, line, col, fragment", REFUSED)
def test_refusals_are_located_in_a_file(probes, line, col, fragment):
    with pytest.raises(ProbeSetError) as info:
        loads_probeset("name: x\nprobes:\n" + probes, source="set.yaml")
    text = str(info.value)
    assert text.startswith(f"set.yaml:{line}:{col}: probe 1") and fragment in text, text
    assert "\n" not in text


def test_a_set_wide_fentry_refuses_a_wildcard_at_the_set_key():
    with pytest.raises(ProbeSetError, match=r"set.yaml:4:15: .*attach: fentry \(the set's\).*kprobe"):
        loads_probeset("name: x\nattach: fentry\nprobes:\n  - function: tcp_*\n", source="set.yaml")


def test_an_unquoted_star_in_yaml_says_to_quote_it():
    with pytest.raises(ProbeSetError, match=r"set.yaml:3:6: YAML syntax error: .*quote a value that "
                                            r"starts with \* or \["):
        loads_probeset("name: x\nprobes:\n  - *:c\n", source="set.yaml")
