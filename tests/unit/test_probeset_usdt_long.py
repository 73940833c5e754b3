"""The long form of a USDT probe: `binary: PATH` + `usdt: PROVIDER:NAME`
(kind usdt implied), the same probe as its compact spec
`PATH:PROVIDER:NAME:usdt`, each error at its key, and what the save
writes (the compact spec, as for `binary:` + `function:`) loads back equal."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ktui import cli
from ktui.lang.locate import probe_targets
from ktui.lang.model import Kind
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_probe_text


def _set(entry: str):
    return loads_probeset(f"name: x\nprobes:\n  - {entry}\n", source="s.yaml")


def _error(entry: str) -> str:
    with pytest.raises(Exception) as info:
        _set(entry)
    return str(info.value)


@pytest.mark.parametrize("entry, text", [
    ("binary: /tmp/p\n    usdt: ktui:tick", "/tmp/p:ktui:tick:usdt"),
    ("binary: /tmp/p\n    usdt: ktui:tick\n    kind: usdt", "/tmp/p:ktui:tick:usdt"),
    ("binary: /tmp/p\n    usdt: 'ktui:tick'\n    fetch: [a1, a3:string]", "/tmp/p:ktui:tick:usdt:a1,a3:string"),
    ("binary: /tmp/p\n    usdt: ktui:tick\n    fetch: a1\n    filter: a1 > 2\n    count: [comm]",
     "/tmp/p:ktui:tick:usdt:a1 count(comm) if a1 > 2"),
    ("binary: /usr/bin/python3.11\n    usdt: python:function__entry\n    label: calls",
     "calls=/usr/bin/python3.11:python:function__entry:usdt"),
])
def test_binary_and_usdt_is_the_compact_spec(entry, text):
    ps = _set(entry)
    probe = ps.probes[0]
    assert probe.kind is Kind.USDT and probe == parse_probe_text(text)
    saved = dumps_probeset(ps)
    assert "spec: " in saved and loads_probeset(saved) == ps


@pytest.mark.parametrize("entry, where, words", [
    ("usdt: ktui:tick", "3:5", "usdt: needs binary: (the file whose probe point it is)"),
    ("binary: /tmp/p", "3:5", "binary: needs function:, address: or usdt:"),
    ("binary: /tmp/p\n    usdt: ktui:tick\n    function: main", "5:5", "give only one of"),
    ("binary: tmp/p\n    usdt: ktui:tick", "3:13", "binary: expected an absolute path"),
    ("binary: /tmp/p\n    usdt: ktuitick", "4:11", "usdt: expected PROVIDER:NAME"),
    ("binary: /tmp/p\n    usdt: a:b:c", "4:11", "usdt: expected PROVIDER:NAME"),
    ("binary: /tmp/p\n    usdt: /tmp/p:ktui:tick", "4:11", "name the probe point alone"),
    ("binary: /tmp/p\n    usdt: [ktui:tick]", "4:11", "usdt: expected one PROVIDER:NAME"),
    ("binary: /tmp/p\n    usdt: ktui:c", "4:11", "a probe point named c cannot be probed"),
    ("binary: /tmp/p\n    usdt: 'kt*:tick'", "4:11", "not a file's USDT probes: `ktui list --usdt /tmp/p`"),
    ("binary: /tmp/p\n    usdt: kt.ui:tick", "4:13", "a USDT provider is letters, digits and _"),
    ("binary: /tmp/p\n    usdt: ktui:tick\n    kind: r", "5:11", "kind: a USDT probe point takes kind usdt"),
    ("function: vfs_read\n    kind: usdt", "4:11", "kind: usdt is for a USDT probe point"),
    ("binary: /tmp/p\n    function: ktui:tick", "4:15", "function: ktui:tick is a USDT probe point"),
    ("binary: /tmp/p\n    usdt: ktui:tick\n    fetch: [rdi]", "5:13", "a USDT probe reads its arguments"),
    ("binary: /tmp/p\n    usdt: ktui:tick\n    maxactive: 4", "5:5", "maxactive: a USDT probe has no return"),
    ("binary: /tmp/p\n    usdt: ktui:tick\n    attach: kprobe", "5:5", "a USDT probe attaches as a uprobe"),
])
def test_usdt_errors_are_located(entry, where, words):
    message = _error(entry)
    assert message.startswith(f"s.yaml:{where}: ") and words in message, message
    assert "\n" not in message


def test_check_points_at_the_path_and_locate_finds_the_probe_point(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_kernel_names", lambda: None)
    exe = tmp_path / "prog"
    exe.write_bytes(b"not an ELF file")
    f = tmp_path / "s.yaml"
    f.write_text(f"name: u\nprobes:\n  - binary: {exe}\n    usdt: ktui:tick\n")
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 1
    assert r.output.splitlines()[0].startswith(f"{f}:3:13: probe 1 ({exe}:ktui:tick:usdt): ")
    first = probe_targets(f)[0]
    assert (first.user_line, first.user_col, first.user.usdt) == (4, 11, "ktui:tick")
