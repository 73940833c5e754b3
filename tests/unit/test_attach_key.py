"""The `attach:` key (issue 13): set-level and probe-level, validated with
file:line:col, saved back; `attach: fentry` on a probe whose text needs a
kprobe (offset, address, register) is an error where it is read."""

from __future__ import annotations

import pytest

from ktui.lang.attach_rules import effective_mode, text_obstacle
from ktui.lang.model import ProbeSetError
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_spec


def test_set_and_probe_keys_read_and_round_trip():
    text = ("name: t\nattach: kprobe\nprobes:\n  - spec: vfs_read:c:a3\n    attach: fentry\n"
            "  - spec: vfs_read+0x4:c\n  - spec: vfs_write:r:retval\n    attach: auto\n"
            "  - spec: vfs_fsync:c\n    attach: kprobe\n")
    ps = loads_probeset(text)
    assert ps.attach == "kprobe"
    assert [p.attach for p in ps.probes] == ["fentry", "", "auto", "kprobe"]
    saved = dumps_probeset(ps)
    assert loads_probeset(saved) == ps
    # the set's and the probe's own (the same word) both kept
    assert saved.count("attach: kprobe") == 2


def test_unset_everywhere_saves_nothing():
    ps = loads_probeset("name: t\nprobes: [vfs_read:c]\n")
    assert ps.attach == "" and ps.probes[0].attach == ""
    assert "attach" not in dumps_probeset(ps)


@pytest.mark.parametrize("text, line, col, message", [
    ("name: t\nprobes:\n  - spec: vfs_read:c\n    attach: fentri\n", 4, 13,
     "attach: expected one of auto, kprobe, fentry, got 'fentri'"),
    ("name: t\nattach: 3\nprobes: [vfs_read:c]\n", 2, 9, "attach: expected a string"),
    ("name: t\nprobes:\n  - spec: vfs_read+0x4:c\n    attach: fentry\n", 4, 5,
     "attach: fentry: not for this probe: fentry attaches at a function's entry, not at an offset"),
    ("name: t\nattach: fentry\nprobes:\n  - spec: 0xffffffff81000000:c\n", 4, 11,
     "attach: fentry (the set's): not for this probe: an address has no BTF function"),
    ("name: t\nprobes:\n  - spec: vfs_read:c:rdi\n    attach: fentry\n", 4, 5,
     "it reads register rdi"),
    ("name: t\nprobes:\n  - spec: vfs_read:c:a1\n    filter: rax > 1\n    attach: fentry\n", 5, 5,
     "its filter reads register rax"),
])
def test_bad_attach_names_file_line_col(text, line, col, message):
    with pytest.raises(ProbeSetError) as err:
        loads_probeset(text, source="s.yaml")
    assert str(err.value).startswith(f"s.yaml:{line}:{col}: ")
    assert message in str(err.value)


def test_forced_kprobe_takes_any_probe():
    ps = loads_probeset("name: t\nattach: kprobe\nprobes:\n  - spec: vfs_read+0x4:c:rdi\n")
    assert ps.probes[0].attach == ""


@pytest.mark.parametrize("spec, obstacle", [
    ("vfs_read:c:a3", ""),
    ("vfs_read:r:retval,a2", ""),
    ("vfs_read:c:+8(a1)", ""),
    ("vfs_read+0x4:c", "offset"),
    ("0xffffffff81000000:c", "address"),
    ("vfs_read:c:+0(rsi):u8", "register"),
])
def test_text_obstacles(spec, obstacle):
    why = text_obstacle(parse_spec(spec))
    assert (obstacle in why) if obstacle else why == ""


def test_effective_mode_probe_then_set_then_default():
    probe = parse_spec("vfs_read:c")
    assert effective_mode(probe, "", "kprobe") == "kprobe"
    assert effective_mode(probe, "auto", "kprobe") == "auto"
    import dataclasses
    assert effective_mode(dataclasses.replace(probe, attach="fentry"), "auto", "kprobe") == "fentry"
