"""Probes that name alternatives (`a|b`, `function: [a, b]`): the first
this kernel has is probed and bound, all of them print, save and compare,
and `ktui check` needs one of them."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner

from ktui import cli
from ktui.kernel.symbols import namecheck
from ktui.kernel.symbols.namecheck import FunctionCheck
from ktui.lang.alternatives import choose_alternative, chosen_text, table_name
from ktui.lang.bind import bind_probe
from ktui.lang.locate import probe_targets
from ktui.lang.model import SpecError, Target
from ktui.lang.probeset import loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_spec, validate_probe
from tests.fakesysfs import FakeKernel
from tests.unit.namedkernel import kernel_names

SLAB = """\
name: slab
probes:
  - function: [kmem_cache_alloc_noprof, kmem_cache_alloc]
    kind: c
    fetch: [cache=s->name:string]
    label: cache_by_name
"""


def _error(text: str) -> str:
    with pytest.raises(Exception) as info:
        loads_probeset(text, source="s.yaml")
    return str(info.value)


# ---------------------------------------------------------------- the language


def test_the_spec_names_alternatives_with_a_bar():
    probe = parse_spec("__kmalloc_noprof|__kmalloc:c:a1")
    assert probe.target == Target("__kmalloc_noprof", alternatives=("__kmalloc_noprof", "__kmalloc"))
    assert str(probe) == probe.spec_text == "__kmalloc_noprof|__kmalloc:c:a1"
    assert parse_spec(str(probe)) == probe


@pytest.mark.parametrize("text, col, words", [
    ("a|:c", 3, "expected a kernel function after |"),
    ("a|b|a:c", 5, "a is already an alternative"),
    ("a|b+0x4:c", 4, "no offset"),
    ("a|b/c:t", 4, "no tracepoint"),
    ("|".join(f"f{i}" for i in range(9)) + ":c", 25, "at most 8 alternatives"),
])
def test_bad_alternatives_are_located(text, col, words):
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    assert info.value.col == col and words in info.value.message


def test_equality_ignores_which_alternative_is_in_use_but_validate_checks_it():
    probe = parse_spec("a|b:c")
    other = dataclasses.replace(probe, target=dataclasses.replace(probe.target, symbol="b"))
    assert other == probe and hash(other.target) == hash(probe.target)
    validate_probe(other)
    with pytest.raises(SpecError, match="'x' is not one of its alternatives"):
        validate_probe(dataclasses.replace(probe, target=dataclasses.replace(probe.target, symbol="x")))
    assert parse_spec("a:c") != probe  # one name is no list


# ---------------------------------------------------------------- choosing


def test_the_first_the_kernel_has_is_chosen():
    probe = parse_spec("new_name|old_name|older:r")
    chosen = choose_alternative(probe, {"old_name", "older"}.__contains__)
    assert chosen.target.symbol == "old_name" and chosen == probe
    assert chosen_text(chosen) == "old_name (of 3)"
    assert table_name(chosen) == "new_name|old_name|older:r on old_name (of 3)"
    assert choose_alternative(parse_spec("vfs_read:c"), lambda _n: False) == parse_spec("vfs_read:c")


def test_none_present_is_one_line_with_a_did_you_mean_for_the_first():
    with pytest.raises(SpecError) as info:
        choose_alternative(parse_spec("vfs_raed|vfs_reed:c"), lambda _n: False, lambda n: ["vfs_read"])
    assert info.value.message == ("this kernel has none of the functions vfs_raed, vfs_reed "
                                  "(did you mean vfs_read?)")


@pytest.mark.parametrize("slab_alloc", ["kmem_cache_alloc", "kmem_cache_alloc_noprof"])
def test_names_bind_by_the_chosen_functions_prototype_on_either_kernel(tmp_path, slab_alloc):
    ps = loads_probeset(SLAB, kernel=kernel_names(tmp_path, slab_alloc))
    probe = ps.probes[0]
    assert probe.target.symbol == slab_alloc
    binding = probe.fetches[0].expr.binding
    assert binding is not None and str(binding.expr) == "+0(+8(a1))" and binding.ctype == "const char *"


def test_binding_a_spec_chooses_too_and_says_when_none_is_there(tmp_path):
    kernel = kernel_names(tmp_path)
    bound = bind_probe(parse_spec("kmem_cache_alloc_noprof|kmem_cache_alloc:c:s->name:string"), kernel)
    assert bound.target.symbol == "kmem_cache_alloc"
    with pytest.raises(SpecError, match="this kernel has none of the functions vfs_raed, nope"):
        bind_probe(parse_spec("vfs_raed|nope:c"), kernel)


# ---------------------------------------------------------------- YAML


def test_the_long_form_list_loads_saves_and_loads_back_equal(tmp_path):
    ps = loads_probeset(SLAB)
    assert ps.probes[0].target.alternatives == ("kmem_cache_alloc_noprof", "kmem_cache_alloc")
    text = dumps_probeset(ps)
    assert "- function: [kmem_cache_alloc_noprof, kmem_cache_alloc]\n" in text
    assert loads_probeset(text) == ps
    chosen = loads_probeset(SLAB, kernel=kernel_names(tmp_path))  # chosen: saves the same list
    assert dumps_probeset(chosen) == text and loads_probeset(dumps_probeset(chosen)) == chosen


def test_a_list_of_one_is_that_function():
    assert loads_probeset("name: x\nprobes:\n  - function: [vfs_read]\n").probes[0].target == Target("vfs_read")


@pytest.mark.parametrize("entry, where, words", [
    ("function: []", "3:15", "expected a function or a list of alternatives"),
    ("function: [a, b, a]", "3:22", "a is already an alternative"),
    ("function: [a, b+4]", "3:19", "each named whole"),
    ("function: [a, /bin/sh:main]", "3:19", "each named whole"),
    ("function: [a, 7]", "3:19", "expected a string"),
])
def test_bad_lists_are_located(entry, where, words):
    message = _error(f"name: x\nprobes:\n  - {entry}\n")
    assert message.startswith(f"s.yaml:{where}: ") and words in message, message


# ---------------------------------------------------------------- ktui check


@pytest.fixture
def fake_check(tmp_path, monkeypatch):
    fk = FakeKernel(tmp_path)
    monkeypatch.setattr(namecheck, "FunctionCheck", lambda: FunctionCheck(fk.sources()))
    monkeypatch.setattr(cli, "_kernel_names", lambda: None)  # kallsyms alone says
    return fk


def test_check_needs_one_alternative_not_each(tmp_path, fake_check):
    f = tmp_path / "s.yaml"
    f.write_text("name: a\nprobes:\n  - function: [gone_fn, vfs_read]\n  - spec: 'vfs_raed|vfs_reed:c'\n"
                 "  - function: [do_int3, vfs_read]\n")
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 1
    assert r.output.splitlines() == [
        f"{f}:4:12: probe 2 (vfs_raed|vfs_reed:c): this kernel has none of the functions vfs_raed, "
        "vfs_reed (did you mean vfs_read?)",
        f"{f}:5:15: probe 3 (do_int3|vfs_read:c): do_int3 is on the kernel's kprobe blacklist: "
        "it cannot be probed",
    ]


def test_locate_gives_the_alternatives(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("name: a\nprobes:\n  - function: [a, b]\n  - 'c|d:c'\n")
    first, second = probe_targets(f)
    assert (first.line, first.col, first.symbol, first.alternatives) == (3, 15, None, ("a", "b"))
    assert (second.line, second.col, second.alternatives) == (4, 6, ("c", "d"))
