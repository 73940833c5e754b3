"""The long form's `binary:` + `function:` / `address:`: a user function,
the same probe as its compact spec, each error at its key."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ktui import cli
from ktui.lang.locate import probe_targets
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_spec

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


def _probe(entry: str):
    return loads_probeset(f"name: x\nprobes:\n  - {entry}\n").probes[0]


def _error(entry: str) -> str:
    with pytest.raises(Exception) as info:
        loads_probeset(f"name: x\nprobes:\n  - {entry}\n", source="s.yaml")
    return str(info.value)


@pytest.mark.parametrize("entry, spec", [
    (f"binary: {LIBC}\n    function: malloc", f"{LIBC}:malloc:c"),
    (f"binary: {LIBC}\n    function: malloc\n    kind: r\n    fetch: [retval]", f"{LIBC}:malloc:r:retval"),
    (f"binary: {LIBC}\n    function: malloc+0x4\n    fetch: [a1]", f"{LIBC}:malloc+0x4:c:a1"),
    ("binary: /usr/bin/bash\n    address: 0x1139", "/usr/bin/bash:0x1139:c"),
    ("binary: /usr/bin/bash\n    address: '0x1139'", "/usr/bin/bash:0x1139:c"),
])
def test_binary_and_function_is_the_compact_spec(entry, spec):
    probe = _probe(entry)
    assert probe == parse_spec(spec)
    ps = loads_probeset(f"name: x\nprobes:\n  - {entry}\n")
    assert loads_probeset(dumps_probeset(ps)) == ps


@pytest.mark.parametrize("entry, where, words", [
    ("binary: bin/bash\n    function: malloc", "3:13", "binary: expected an absolute path"),
    ("binary: /bin/ba:sh\n    function: malloc", "3:20", "a path with ':' in it cannot be probed"),
    ("binary: '/bin/b sh'\n    function: malloc", "3:20", "a path with a blank in it"),
    ("binary: /bin/bash\n    tracepoint: sched/sched_switch", "3:5", "a tracepoint is the kernel's"),
    ("binary: /bin/bash\n    spec: vfs_read:c", "3:5", "with spec: write PATH:FUNCTION:c"),
    ("binary: /bin/bash", "3:5", "binary: needs function:, address: or usdt:"),
    ("binary: /bin/bash\n    function: mall@oc", "4:19", 'function: unexpected "@"'),
    ("binary: /bin/bash\n    function: /bin/bash:malloc", "4:15", "name the function alone"),
    ("binary: /bin/bash\n    function: [a, b]", "4:15", "alternatives are for kernel functions"),
    ("binary: /bin/bash\n    function: malloc\n    kind: t", "5:11", "kind: t is for a tracepoint"),
    ("binary: /bin/bash\n    function: '0x1139'", "4:15", "use address: for an address"),
    ("binary: /bin/bash\n    address: malloc", "4:14", "use function: for a function"),
    ("binary: /bin/bash\n    function: malloc\n    fetch: [count]", "5:13", "a user function has no BTF"),
])
def test_binary_errors_are_located(entry, where, words):
    message = _error(entry)
    assert message.startswith(f"s.yaml:{where}: ") and words in message, message


def test_check_points_at_the_path_or_at_the_function(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_kernel_names", lambda: None)
    exe = tmp_path / "prog"
    exe.write_bytes(b"not an ELF file")
    f = tmp_path / "s.yaml"
    f.write_text(f"name: u\nprobes:\n  - binary: {exe}\n    function: main\n"
                 f"  - binary: {tmp_path}/missing\n    function: main\n")
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 1
    assert r.output.splitlines()[:2] == [
        f"{f}:3:13: probe 1 ({exe}:main:c): {exe} is not an ELF file",
        f"{f}:5:13: probe 2 ({tmp_path}/missing:main:c): {tmp_path}/missing: no such file",
    ]
    first = probe_targets(f)[0]
    assert (first.user_line, first.user_col, first.user.path) == (4, 15, str(exe))
