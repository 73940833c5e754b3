"""Hostile and random input for the probe set loader.

Whatever the input, `loads_probeset` returns a ProbeSet or raises a
one-line, located ProbeSetError, quickly and without executing anything.
"""

from __future__ import annotations

import random
import re
import string
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ktui.lang.model import ProbeSet, ProbeSetError
from ktui.lang.probeset import (
    MAX_FILE_BYTES,
    checks_probeset,
    load_probeset,
    loads_probeset,
)
from ktui.lang.probeset_write import dumps_probeset

REPO = Path(__file__).resolve().parents[2]
SHIPPED_TEXTS = [path.read_text(encoding="utf-8") for path in sorted((REPO / "probesets").glob("*.yaml"))]
LOCATED = re.compile(r"^<fuzz>:(\d+):(\d+): \S.*$")
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(text: str | bytes) -> ProbeSet | ProbeSetError:
    """Load, allowing only the two documented outcomes; check the error shape."""
    try:
        return loads_probeset(text, source="<fuzz>")
    except ProbeSetError as err:
        message = str(err)
        match = LOCATED.match(message)
        assert match, repr(message)
        assert "\n" not in message and "\r" not in message
        # YAML's line breaks, as its marks count them: \r\n, \n, \r and, in
        # text, NEL, LS and PS too (hypothesis found '"\x85\u2028' at line 3)
        breaks = rb"\r\n|[\n\r]|\xc2\x85|\xe2\x80[\xa8\xa9]" if isinstance(text, bytes) else "\r\n|[\n\r\x85\u2028\u2029]"
        lines = len(re.split(breaks, text))
        assert 1 <= int(match.group(1)) <= lines + 1, message
        assert int(match.group(2)) >= 1
        return err


def assert_round_trips(result: ProbeSet | ProbeSetError) -> None:
    if isinstance(result, ProbeSet):
        assert loads_probeset(dumps_probeset(result)) == result


# ---------------------------------------------------------------- random input


@FUZZ
@given(st.text(max_size=400))
def test_random_text(text: str):
    assert_round_trips(outcome(text))


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes(data: bytes):
    assert_round_trips(outcome(data))


YAML_ALPHABET = string.ascii_letters[:8] + string.digits[:4] + " :-[]{},&*!|>'\"#\n\t%@`?.+()=_"


@FUZZ
@given(st.text(alphabet=YAML_ALPHABET, max_size=300))
def test_yaml_punctuation_soup(text: str):
    assert_round_trips(outcome(text))


@FUZZ
@given(st.data())
def test_mutated_shipped_sets(data: st.DataObject):
    text = data.draw(st.sampled_from(SHIPPED_TEXTS))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        action = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        chunk = data.draw(st.text(alphabet=YAML_ALPHABET, min_size=1, max_size=6))
        if action == "insert":
            text = text[:at] + chunk + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + len(chunk):]
        else:
            text = text[:at] + chunk + text[at + len(chunk):]
    assert_round_trips(outcome(text))


# Structures made of the schema's own words, so the walker sees plausible
# documents with wrong types, wrong keys and odd values in every place.
KEYS = st.sampled_from([
    "name", "description", "filter", "probes", "spec", "function", "address", "kind",
    "fetch", "label", "enabled", "sample", "rate_limit", "pid", "comm", "lable", "<<",
])
SPECISH = st.sampled_from([
    "vfs_read:c:a3", "vfs_read:r:retval:s64", "do_sys_openat2:c:fname=+0(a2):ustring",
    "tcp_sendmsg:c:size=a3:u64", "0xffffffff81234560:c:rdi,rsi", "vfs_read:c", "vfs_read:q",
    "__kmalloc_noprof|__kmalloc:c:a1", "a|b|a:c", "a|b+4:r",
    "a3 > 4096", 'comm == "dd"', "retval", "call", "r", "0x10", "vfs_read+0x4", "",
])
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    SPECISH, st.text(max_size=20),
)
STRUCTURES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=5)),
    max_leaves=25,
)


@FUZZ
@given(STRUCTURES)
def test_random_structures(document: object):
    assert_round_trips(outcome(yaml.safe_dump(document, allow_unicode=True)))


PRINTABLE = st.characters(blacklist_categories=("Cc", "Cs"))
# a target: the compact form, or the long form's alternatives (`function: [a, b]`)
TARGETS = st.one_of(
    st.fixed_dictionaries({"spec": SPECISH}),
    st.fixed_dictionaries({"function": st.lists(st.sampled_from(["vfs_read", "vfs_write", "a", "b+4", "x:y"]),
                                                max_size=4)},
                          optional={"kind": st.sampled_from(["c", "r", "t"]),
                                    "fetch": st.sampled_from([["a1"], ["retval"], ["n=a2:u32", "a3"]])}),
)
PROBE_ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "label": st.text(PRINTABLE, min_size=1, max_size=12),
        "filter": st.sampled_from(["a3 > 4096", 'comm == "dd"', "retval < 0", "pid != 1", "bogus > 1"]),
        "enabled": st.booleans(),
        "sample": st.integers(-2, 2**33),
        "rate_limit": st.one_of(st.none(), st.integers(-2, 2**33)),
    },
)
PROBE_SETS = st.fixed_dictionaries(
    {"name": st.text(PRINTABLE, min_size=1, max_size=20),
     "probes": st.lists(st.tuples(TARGETS, PROBE_ENTRY).map(lambda pair: {**pair[0], **pair[1]}),
                        min_size=1, max_size=5)},
    optional={
        "description": st.text(max_size=30),
        "filter": st.fixed_dictionaries({}, optional={"pid": st.integers(-1, 2**23),
                                                      "comm": st.text(PRINTABLE, min_size=1, max_size=17)}),
    },
)


@FUZZ
@given(PROBE_SETS)
def test_plausible_probe_sets_round_trip(document: dict):
    result = outcome(yaml.safe_dump(document, allow_unicode=True, sort_keys=False))
    assert_round_trips(result)


def test_plausible_probe_sets_do_load():
    """The generator above is not all errors: a known-good member loads."""
    document = {"name": "n", "filter": {"pid": 7, "comm": "dd"},
                "probes": [{"spec": "vfs_read:c:a3", "filter": "a3 > 4096", "sample": 3, "rate_limit": 9}]}
    result = outcome(yaml.safe_dump(document, sort_keys=False))
    assert isinstance(result, ProbeSet) and result.pid == 7 and result.probes[0].sample == 3


# ---------------------------------------------------------------- hostile input


def load_quickly(text: str | bytes, limit: float = 5.0) -> ProbeSetError:
    # CPU seconds of this process, not wall-clock: the loader's own work,
    # which other processes competing for the machine do not inflate.
    start = time.process_time()
    with pytest.raises(ProbeSetError) as info:
        loads_probeset(text, source="<fuzz>")
    assert time.process_time() - start < limit
    assert LOCATED.match(str(info.value)), str(info.value)
    return info.value


BILLION_LAUGHS = "\n".join(
    ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"a{n}: &a{n} [" + ",".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, 10)]
    + ["name: *a9", "probes: [vfs_read:c]"]
)


def test_billion_laughs():
    err = load_quickly(BILLION_LAUGHS, limit=1.0)
    assert "aliases (*a0) are not allowed" in str(err)


@pytest.mark.parametrize("as_bytes", [False, True])
def test_ten_megabytes(as_bytes: bool):
    text = "name: x\nprobes: [vfs_read:c]\n" + "#" * (10 * 1024 * 1024)
    err = load_quickly(text.encode() if as_bytes else text, limit=1.0)
    assert "file too large" in str(err)


def test_ten_megabyte_file(tmp_path: Path):
    path = tmp_path / "huge.yaml"
    with path.open("wb") as out:
        out.truncate(10 * 1024 * 1024)  # sparse: cheap to make
    start = time.process_time()
    with pytest.raises(ProbeSetError, match="file too large"):
        load_probeset(path)
    assert time.process_time() - start < 1.0


@pytest.mark.parametrize("text", [
    "[" * 100_000,
    "{a: " * 100_000,
    "".join("  " * depth + "- \n" for depth in range(2000)),
    "name: " + "[" * 50_000 + "]" * 50_000,
    "name: x\nprobes:\n" + "".join("  " * depth + "x:\n" for depth in range(2, 3000)),
], ids=["flow-seq", "flow-map", "block-seq", "balanced", "block-map"])
def test_deep_nesting(text: str):
    load_quickly(text)


@pytest.mark.parametrize("text", [
    "name: x\nprobes: [" + "a," * 400_000 + "]",  # ~800 KiB of tiny values
    "{" + "k: 1, " * 170_000 + "}",
    "name: x\n" + "".join(f"k{i}: v\n" for i in range(100_000)),
    "name: x\nprobes:\n  - spec: vfs_read:c\n    sample: " + "9" * 1_000_000,
    "name: x\nprobes:\n  - spec: vfs_read:c\n    sample: 1" + ":59" * 300_000,
    "name: " + "a " * 500_000,
], ids=["many-items", "many-keys-flow", "many-keys-block", "long-int", "sexagesimal", "long-scalar"])
def test_large_inputs_under_the_limit(text: str):
    assert len(text) <= MAX_FILE_BYTES
    load_quickly(text)


def test_binary_noise():
    noise = random.Random(1234).randbytes(64 * 1024)
    load_quickly(noise, limit=1.0)
    load_quickly(b"\x00" * 1000, limit=1.0)
    load_quickly("name: x\nprobes: [vfs_read:c]\n".encode("utf-16"), limit=1.0)


@pytest.mark.parametrize("tag", [
    "!!python/object/apply:os.system",
    "!!python/object/new:os.system",
    "!!python/name:os.system",
    "!!python/module:os",
])
def test_python_tags_run_nothing(tmp_path: Path, tag: str):
    marker = tmp_path / "pwned"
    text = f"name: {tag} [\"touch {marker}\"]\nprobes: [vfs_read:c]\n"
    err = load_quickly(text, limit=1.0)
    assert "unsupported YAML tag" in str(err)
    assert not marker.exists()


def test_lone_surrogate_in_text():
    load_quickly("name: \ud800\nprobes: [vfs_read:c]\n", limit=1.0)


# ---------------------------------------------------------------- every error (ktui check)


def assert_check_agrees_with_load(text: str) -> None:
    """check_probeset finds an error exactly when load does, the one load
    raises among them, in file order; with none, the same set."""
    found, errors = checks_probeset(text, source="<fuzz>")
    try:
        loaded = loads_probeset(text, source="<fuzz>")
    except ProbeSetError as err:
        assert found is None and str(err) in [str(e) for e in errors], (str(err), [str(e) for e in errors])
        assert errors == sorted(errors, key=lambda e: (e.line, e.col))
        for e in errors:
            assert LOCATED.match(str(e)), str(e)
        return
    assert errors == [] and found == loaded


@FUZZ
@given(PROBE_SETS)
def test_check_agrees_with_load_on_plausible_sets(document: dict):
    assert_check_agrees_with_load(yaml.safe_dump(document, allow_unicode=True, sort_keys=False))


@FUZZ
@given(STRUCTURES)
def test_check_agrees_with_load_on_random_structures(document: object):
    assert_check_agrees_with_load(yaml.safe_dump(document, allow_unicode=True))


@FUZZ
@given(st.data())
def test_check_agrees_with_load_on_mutated_shipped_sets(data: st.DataObject):
    text = data.draw(st.sampled_from(SHIPPED_TEXTS))
    at = data.draw(st.integers(0, len(text)))
    text = text[:at] + data.draw(st.text(alphabet=YAML_ALPHABET, min_size=1, max_size=6)) + text[at:]
    assert_check_agrees_with_load(text)
