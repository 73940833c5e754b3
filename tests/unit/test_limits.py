"""One limit, one place: the loader, validate_probe (the dialog and `-e`
go through it), the command line and codegen all use `ktui.lang.limits`."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from ktui.lang import limits
from ktui.lang.model import Kind, Probe, ProbeSetError, SpecError, Target
from ktui.lang.probeset import loads_probeset
from ktui.lang.spec import parse_spec, validate_probe
from ktui.pipeline.format import as_errno

ROOT = Path(__file__).resolve().parents[2]


def _loads_with(key: str, value: object) -> Probe:
    return loads_probeset(f"name: x\nprobes:\n  - spec: vfs_read:c\n    {key}: {value}\n").probes[0]


@pytest.mark.parametrize("size", [limits.PROBE_LABEL_MAX, limits.PROBE_LABEL_MAX + 1, 80])
def test_a_label_validate_probe_accepts_is_one_the_loader_accepts(size):
    label = "x" * size
    probe = dataclasses.replace(parse_spec("vfs_read:c"), label=label)
    if size <= limits.PROBE_LABEL_MAX:
        validate_probe(probe)
        assert _loads_with("label", label).label == label
        return
    with pytest.raises(SpecError, match=rf"^label: too long \({size} characters, at most 64\)"):
        validate_probe(probe)
    with pytest.raises(ProbeSetError, match="label: too long"):
        _loads_with("label", label)


@pytest.mark.parametrize("key", ["sample", "rate_limit"])
@pytest.mark.parametrize("value", [0, limits.COUNT_MAX, limits.COUNT_MAX + 1])
def test_sample_and_rate_limit_bounds_agree(key, value):
    probe = dataclasses.replace(parse_spec("vfs_read:c"), **{key: value})
    if limits.COUNT_MIN <= value <= limits.COUNT_MAX:
        validate_probe(probe)
        assert getattr(_loads_with(key, value), key) == value
        return
    expected = limits.out_of_range(key, value, limits.COUNT_MIN, limits.COUNT_MAX)
    with pytest.raises(SpecError, match=expected.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        validate_probe(probe)
    with pytest.raises(ProbeSetError, match="is out of range"):
        _loads_with(key, value)


def test_comm_rules_are_the_same_in_a_file_and_in_check_comm():
    for comm, ok in (("a" * 15, True), ("a" * 16, False), ("é" * 7, True), ("é" * 8, False)):
        text = f"name: x\nfilter: {{comm: {comm}}}\nprobes: [vfs_read:c]\n"
        if ok:
            limits.check_comm(comm)
            assert loads_probeset(text).comm == comm
        else:
            with pytest.raises(SpecError) as info:
                limits.check_comm(comm)
            with pytest.raises(ProbeSetError, match=info.value.message.replace("(", r"\(").replace(")", r"\)")):
                loads_probeset(text)


def test_max_errno_is_the_one_codegen_and_format_use():
    from ktui.kernel.codegen import generate

    text = generate([Probe(Target("vfs_read"), Kind.RETURN)]).text
    assert f"err < -{limits.MAX_ERRNO})" in text
    assert as_errno(-limits.MAX_ERRNO) == limits.MAX_ERRNO
    assert as_errno(-limits.MAX_ERRNO - 1) is None


def test_string_sizes_in_the_program_are_the_limits():
    from ktui.kernel.codegen import generate

    text = generate([parse_spec("do_sys_openat2:c:+0(a2):ustring")]).text
    assert f"bpf_probe_read_user_str(e->payload + 0, {limits.STRING_MAX}," in text
    assert f"char comm[{limits.TASK_COMM_LEN}];" in text


def _module_constants(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_no_module_defines_a_limit_of_its_own():
    """A limit redefined elsewhere is how the 64 vs 80 character label happened."""
    shared = {name for name in vars(limits) if name.isupper()}
    for path in sorted((ROOT / "ktui").rglob("*.py")):
        if path.name == "limits.py":
            continue
        again = _module_constants(path) & shared
        assert not again, f"{path.relative_to(ROOT)} defines {sorted(again)}: import them from ktui.lang.limits"
