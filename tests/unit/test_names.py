"""One resolver for filter names (ktui.lang.names.resolve), used by the
checks and by codegen alike: what the checks accept, codegen compiles."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ktui.kernel.codegen import generate
from ktui.lang.filters import parse_filter
from ktui.lang.model import Arg, Builtin, Deref, Named, Reg, RetVal, SpecError
from ktui.lang.names import UnknownName, resolve
from ktui.lang.bind import bind_probe
from ktui.lang.spec import parse_spec, validate_probe


def _probe(spec: str, filter_text: str | None = None):
    probe = parse_spec(spec)
    if filter_text is not None:
        probe = dataclasses.replace(probe, filter=parse_filter(filter_text))
    return probe


@pytest.mark.parametrize("spec, name, expr, type_, index", [
    ("f:c:a3", "a3", Arg(3), "u64", 0),  # an unlabelled fetch is found first
    ("f:c:a3:u8", "a3", Arg(3), "u8", 0),  # ... with its type
    ("f:c:a2", "a3", Arg(3), "u64", None),  # else the predefined argument
    ("f:c:n=+8(a2):s32", "n", Deref(8, Arg(2)), "s32", 0),
    ("f:c:a1,c=comm", "c", Builtin("comm"), "string", 1),
    ("f:c", "comm", Builtin("comm"), "string", None),
    ("f:c", "pid", Builtin("pid"), "u32", None),
    ("f:r", "retval", RetVal(), "s64", None),
    ("f:r:retval:u32", "retval", RetVal(), "u32", 0),
    ("f:c", "rdi", Reg("di"), "u64", None),
    ("f:c:rdi:string", "rdi", Reg("di"), "string", 0),
])
def test_resolution_order_fetch_then_predefined(spec, name, expr, type_, index):
    ref = resolve(parse_spec(spec), name)
    assert (ref.expr, ref.type, ref.fetch_index) == (expr, type_, index)


def test_unknown_names_and_retval_in_a_call_probe():
    # Inside a function a name cannot be a parameter: unknown at once.
    with pytest.raises(UnknownName, match=r'unknown name "cont"; did you mean count\?'):
        resolve(parse_spec("f+4:c:count=a3"), "cont")
    # At its entry it may be one until the probe is bound to BTF ...
    ref = resolve(parse_spec("f:c:count=a3"), "cont")
    assert ref.deferred and ref.expr == Named("cont") and ref.fetch_index is None
    # ... and once bound (bindings holds the names that are parameters), it is not.
    bound = dataclasses.replace(parse_spec("f:c:count=a3"), bindings={})
    with pytest.raises(UnknownName, match=r'unknown name "cont"; did you mean count\?'):
        resolve(bound, "cont")
    with pytest.raises(SpecError, match="retval exists only in return probes"):
        resolve(parse_spec("f:c"), "retval")


def test_a_labelled_comm_fetch_compares_as_a_string_and_compiles():
    """The checks took `c` as a string, codegen said "c is not a string"."""
    probe = _probe("vfs_read:c:c=comm", 'c == "dd"')
    validate_probe(probe)
    text = generate([probe]).text
    assert "e->comm[0] == 100 && e->comm[1] == 100 && e->comm[2] == 0" in text


def test_an_unlabelled_argument_fetch_is_read_from_the_record():
    text = generate([_probe("vfs_read:c:a3:u8", "a3 > 4")]).text
    assert "(u64)v0 > (u64)4ULL" in text


# Random probes and filters: whatever validate_probe accepts and binding to
# the kernel's BTF accepts (names at a function's entry are parameters there:
# count, buf, file->f_pos), generate compiles.
_FETCHES = st.sampled_from(["a1", "a3:u8", "n=+8(a2):s32", "c=comm", "comm", "pid", "s=+0(a2):string",
                            "retval", "r=retval:u16", "rdi", "x=rsi:x32", "t=tid", "count", "file->f_pos",
                            "p=buf:string"])
_NAMES = st.sampled_from(["a1", "a3", "n", "c", "comm", "pid", "tid", "cpu", "s", "retval", "r", "rdi", "rsi",
                          "x", "t", "bogus", "count", "buf", "file->f_pos", "p", "args.count"])
_VALUES = st.one_of(st.integers(-5, 5).map(str), st.just('"dd"'), _NAMES)


@st.composite
def probes_with_filters(draw):
    kind = draw(st.sampled_from("cr"))
    fetches = draw(st.lists(_FETCHES, max_size=4, unique=True))
    spec = f"vfs_read:{kind}" + (":" + ",".join(fetches) if fetches else "")
    compares = draw(st.lists(st.tuples(_NAMES, st.sampled_from(["==", "!=", "<"]), _VALUES),
                             min_size=1, max_size=3))
    text = " && ".join(f"{a} {op} {b}" for a, op, b in compares)
    try:
        return _probe(spec, text)
    except SpecError:
        return None


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    from tests.unit.namedkernel import kernel_names

    return kernel_names(tmp_path_factory.mktemp("btf"))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(probe=probes_with_filters())
def test_what_the_checks_accept_codegen_compiles(kernel, probe):
    if probe is None:
        return
    try:
        validate_probe(probe)
        probe = bind_probe(probe, kernel)
    except SpecError:
        return
    generate([probe])  # raises SpecError where codegen resolves a name differently


def test_the_property_above_reaches_bound_names(kernel):
    probe = bind_probe(_probe("vfs_read:r:count,file->f_pos", "count > 1 && buf != 0 && file->f_pos > 0"),
                       kernel)
    validate_probe(probe)
    assert set(probe.bindings) == {"buf"}  # count and file->f_pos are the fetches of those names
    generate([probe])


def test_the_property_above_reaches_valid_filters():
    probe = _probe("f:r:c=comm,r=retval:u16", 'c == "dd" && r < 3 && comm != "x" && a1 == 0')
    validate_probe(probe)
    generate([probe])


def test_two_string_names_are_refused_before_codegen():
    """Found by the property above: the checks accepted `comm == comm`, which
    codegen cannot compile (strings compare with a literal's bytes only)."""
    with pytest.raises(SpecError, match='filter: a string compares only with a quoted "text"'):
        validate_probe(_probe("f:c:c=comm", "c == comm"))
