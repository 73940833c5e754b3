"""The YAML long form of a tracepoint probe, `tracepoint: CATEGORY/NAME`
(kind t implied, `fetch:` its fields): the same probe as the compact
spec, its refusals at file:line:col, and saving it back."""

from __future__ import annotations

import pytest

from ktui.lang.locate import target_positions
from ktui.lang.model import Kind, ProbeSetError
from ktui.lang.probeset import checks_probeset, loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from tests.unit.tracefs import KERNELS, FormatsKernel

LONG = """\
name: opens
probes:
  - tracepoint: syscalls/sys_enter_openat
    fetch: [filename:ustring, flags]
    label: opens
    filter: flags > 0
"""
COMPACT = """\
name: opens
probes:
  - spec: syscalls/sys_enter_openat:t:filename:ustring,flags
    label: opens
    filter: flags > 0
"""


@pytest.mark.parametrize("kernel", [None, *KERNELS])
def test_the_long_form_is_the_compact_spec(kernel):
    def load(text):
        return loads_probeset(text, kernel=FormatsKernel(kernel) if kernel else None)

    long, compact = load(LONG), load(COMPACT)
    assert long.probes == compact.probes
    probe = long.probes[0]
    assert probe.kind is Kind.TRACEPOINT and probe.label == "opens"
    assert probe.spec_text == "syscalls/sys_enter_openat:t:filename:ustring,args.flags"
    if kernel:  # bound: flags is the record's int, filename a user string
        assert [f.effective_type for f in probe.fetches] == ["ustring", "s32"]


@pytest.mark.parametrize("extra", ["    kind: t\n", "    kind: tracepoint\n", "    kind:\n"])
def test_kind_t_may_be_said(extra):
    assert loads_probeset(LONG + extra).probes == loads_probeset(COMPACT).probes


def test_fetch_as_one_string_and_aggregations():
    ps = loads_probeset("name: a\nprobes:\n  - tracepoint: syscalls/sys_enter_read\n"
                        "    fetch: 'fd, count'\n    count: [comm]\n    sum: count\n",
                        kernel=FormatsKernel("6.1"))
    compact = loads_probeset("name: a\nprobes:\n  - spec: syscalls/sys_enter_read:t:fd,count\n"
                             "    count: [comm]\n    sum: count\n", kernel=FormatsKernel("6.1"))
    assert ps.probes == compact.probes and ps.probes[0].agg is not None


@pytest.mark.parametrize("kernel", [None, "6.12"])
def test_saving_writes_it_back_and_it_loads_equal(kernel):
    """Saving writes every probe in the compact form (probeset_write keeps no
    forms): the long form comes back as its spec, the same probe."""
    bind = FormatsKernel(kernel) if kernel else None
    ps = loads_probeset(LONG, kernel=bind)
    text = dumps_probeset(ps)
    assert "- spec: syscalls/sys_enter_openat:t:filename:ustring,args.flags\n" in text
    again = loads_probeset(text, kernel=bind)
    assert again.probes == ps.probes and str(again.probes[0].filter) == "flags > 0"


# (yaml, line, col, fragment): every refusal of the long form, where it is
REFUSED = [
    pytest.param("  - tracepoint: syscalls/sys_enter_openat\n    kind: r\n", 4, 11,
                 "kind: a tracepoint takes kind t (or no kind:), got 'r'", id="kind-r"),
    pytest.param("  - tracepoint: syscalls/sys_enter_openat\n    kind: call\n", 4, 11,
                 "kind: a tracepoint takes kind t (or no kind:), got 'call'", id="kind-c"),
    pytest.param("  - function: vfs_read\n    kind: t\n", 4, 11,
                 "kind: t is for a tracepoint: write tracepoint: CATEGORY/NAME instead of function:",
                 id="function-kind-t"),
    pytest.param("  - tracepoint: vfs_read\n", 3, 17,
                 "tracepoint: expected CATEGORY/NAME such as syscalls/sys_enter_openat (use function: "
                 "or address: for a kernel function)", id="not-a-tracepoint"),
    pytest.param("  - tracepoint: sys/calls/x\n", 3, 26, "tracepoint:", id="tracepoint-syntax"),
    pytest.param("  - function: syscalls/sys_enter_openat\n", 3, 15,
                 "function: syscalls/sys_enter_openat is a tracepoint (CATEGORY/NAME): use tracepoint:",
                 id="function-is-a-tracepoint"),
    pytest.param("  - tracepoint: syscalls/sys_enter_openat\n    function: vfs_read\n", 4, 5,
                 "give only one of spec:, function:, address:, tracepoint: or usdt: (this probe has tracepoint: "
                 "and function:)", id="with-function"),
    pytest.param("  - spec: vfs_read:c\n    tracepoint: syscalls/sys_enter_openat\n", 4, 5,
                 "(this probe has spec: and tracepoint:)", id="with-spec"),
    pytest.param("  - address: 0xffffffff81000000\n    tracepoint: syscalls/sys_enter_openat\n", 4, 5,
                 "(this probe has address: and tracepoint:)", id="with-address"),
    pytest.param("  - tracepoint: syscalls/sys_enter_openat\n    fetch: [filename, a1]\n", 4, 23,
                 "fetch: a1: a tracepoint's values are its fields by name", id="fetch-a1"),
    pytest.param("  - tracepoint: syscalls/sys_enter_openat\n    fetch: 'filename, mode:u99'\n", 4, 28,
                 'fetch: unknown type "u99"', id="fetch-type"),
    pytest.param("  - tracepoint: syscalls/sys_enter_openat\n    maxactive: 4\n", 4, 5,
                 "maxactive: only a return probe", id="maxactive"),
]


@pytest.mark.parametrize("probes, line, col, fragment", REFUSED)
def test_refusals_are_located(probes, line, col, fragment):
    with pytest.raises(ProbeSetError) as info:
        loads_probeset("name: x\nprobes:\n" + probes, source="set.yaml")
    text = str(info.value)
    assert text.startswith(f"set.yaml:{line}:{col}: probe 1 (") and fragment in text, text
    assert "\n" not in text


@pytest.mark.parametrize("probes, line, col, fragment", [
    ("  - tracepoint: syscalls/sys_enter_openat\n    fetch: [filename:ustring, flgs]\n", 4, 31,
     "fetch: syscalls/sys_enter_openat has no field 'flgs' (did you mean flags"),
    ("  - tracepoint: syscalls/sys_enter_opnat\n", 3, 17,
     "no tracepoint syscalls/sys_enter_opnat (did you mean syscalls/sys_enter_openat"),
    ("  - tracepoint: syscalls/sys_enter_openat\n    fetch: [filename]\n    filter: flgs > 0\n", 5, 13,
     "filter:"),
])
def test_what_the_kernel_refuses_is_located_too(probes, line, col, fragment):
    with pytest.raises(ProbeSetError) as info:
        loads_probeset("name: x\nprobes:\n" + probes, source="set.yaml", kernel=FormatsKernel("6.1"))
    text = str(info.value)
    assert text.startswith(f"set.yaml:{line}:{col}: probe 1 (syscalls/") and fragment in text, text


def test_check_reads_on_past_a_long_form_error():
    _ps, errors = checks_probeset("name: x\nprobes:\n  - tracepoint: syscalls/sys_enter_openat\n"
                                  "    kind: r\n  - tracepoint: vfs_read\n", source="s.yaml")
    assert [(e.line, e.col) for e in errors] == [(4, 11), (5, 17)]


def test_the_target_is_located_in_the_file(tmp_path):
    """`ktui check`'s later warnings (a user string at sys_enter) point at it."""
    path = tmp_path / "set.yaml"
    path.write_text(LONG)
    assert target_positions(path) == [(3, 17)]
