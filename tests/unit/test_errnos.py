"""Errnos only where the function can return one (issue 28): a return
probe learns its function's return type from BTF when it is bound
(`lang.bind.bind_returns`), a probe set can say `errno: on|off`, and
`lang.errnos.errno_mode` gives the kernel's mode (0, 4 or 8 bytes) and the
words the user reads (ProbeStats.errno_check).

The kernel here is BTF built in the test (tests/btfbuild.py): one function
per kind of return type, each reached through the typedefs and qualifiers
the kernel's own headers put in the way."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from ktui import cli
from ktui.btf.index import KernelBtf
from ktui.lang.bind import bind_probe, bind_returns
from ktui.lang.errnos import errno_mode, probe_errno_mode
from ktui.lang.kernel_names import KernelNames
from ktui.lang.model import Kind, ProbeSetError, SpecError
from ktui.lang.probeset import checks_probeset, loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_probe_text, parse_spec, validate_probe
from ktui.screens.probe_dialog import build_probe
from tests.btfbuild import BtfBuilder, vfs_like
from tests.unit.namedkernel import no_btf

# function -> (errno_width, return_class, what the user reads)
RETURNS = {
    "ret_void": (0, "void", "off: void"),
    "ret_int": (4, "int", "int"),
    "ret_const_int": (4, "int", "int"),  # a qualifier in the way
    "ret_long": (8, "long", "long"),
    "ret_ssize_t": (8, "long", "long"),  # a typedef of long
    "ret_loff_t": (8, "long", "long"),  # long long, through a typedef
    "ret_pid_t": (4, "int", "int"),  # typedef int
    "ret_ptr": (8, "pointer", "pointer"),  # ERR_PTR
    "ret_void_ptr": (8, "pointer", "pointer"),
    "ret_uint": (0, "unsigned", "off: unsigned"),
    "ret_size_t": (0, "unsigned", "off: unsigned"),  # a comparator's or a size's -1 is no errno
    "ret_bool": (0, "bool", "off: bool"),
    "ret_enum": (0, "enum", "off: enum"),
    "ret_struct": (0, "not an integer", "off: not an integer"),  # a small struct by value
    "ret_short": (0, "16-bit int", "off: 16-bit int"),
    "ret_schar": (0, "8-bit int", "off: 8-bit int"),
}


def write_kernel(root: Path) -> KernelNames:
    btf_dir = root / "sys/kernel/btf"
    btf_dir.mkdir(parents=True)
    b = BtfBuilder()
    t = vfs_like(b)
    arg = [("x", t["int"])]
    b.func("ret_void", b.func_proto(0, arg))
    b.func("ret_int", b.func_proto(t["int"], arg))
    b.func("ret_const_int", b.func_proto(b.const(t["int"]), arg))
    b.func("ret_long", b.func_proto(t["long"], arg))
    b.func("ret_ssize_t", b.func_proto(t["ssize_t"], arg))
    b.func("ret_loff_t", b.func_proto(t["loff_t"], arg))
    b.func("ret_pid_t", b.func_proto(b.typedef("pid_t", t["int"]), arg))
    b.func("ret_ptr", b.func_proto(t["file_ptr"], arg))
    b.func("ret_void_ptr", b.func_proto(b.ptr(0), arg))
    b.func("ret_uint", b.func_proto(t["uint"], arg))
    b.func("ret_size_t", b.func_proto(t["size_t"], arg))
    b.func("ret_bool", b.func_proto(b.int("_Bool", 1, bool_=True), arg))
    b.func("ret_enum", b.func_proto(b.enum("state", [("A", 0), ("B", 1)], signed=True), arg))
    pair = b.struct("pair", 16, [("a", t["long"], 0), ("b", t["long"], 64)])
    b.func("ret_struct", b.func_proto(pair, arg))
    b.func("ret_short", b.func_proto(b.int("short int", 2, signed=True), arg))
    b.func("ret_schar", b.func_proto(b.int("signed char", 1, signed=True), arg))
    (btf_dir / "vmlinux").write_bytes(b.blob())
    mod = BtfBuilder(base=b)
    mod.func("mymod_close", mod.func_proto(0, [("file", t["file_ptr"])]))
    (btf_dir / "mymod").write_bytes(mod.blob())
    return KernelNames(KernelBtf(btf_dir=btf_dir, notes=root / "sys/kernel/notes"))


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    return write_kernel(tmp_path_factory.mktemp("kernel"))


# ---------------------------------------------------------------- the mode


@pytest.mark.parametrize("errno, width, kind, returns, expected", [
    ("", 4, Kind.CALL, "int", (0, "")),  # a call probe has no return value
    ("", 4, Kind.RETURN, "int", (4, "int")),
    ("", 8, Kind.RETURN, "long", (8, "long")),
    ("", 8, Kind.RETURN, "pointer", (8, "pointer")),
    ("on", 8, Kind.RETURN, "pointer", (8, "pointer")),  # what BTF says, asked for or not
    ("off", 4, Kind.RETURN, "int", (0, "off: by the probe set")),
    ("off", None, Kind.RETURN, "", (0, "off: by the probe set")),
    ("", 0, Kind.RETURN, "void", (0, "off: void")),
    ("on", 0, Kind.RETURN, "void", (0, "off: void")),  # no errno comes back from a void function
    ("", 0, Kind.RETURN, "unsigned", (0, "off: unsigned")),
    ("", 0, Kind.RETURN, "not an integer", (0, "off: not an integer")),
    ("", None, Kind.RETURN, "", (0, "off: no BTF")),  # nothing claimed without BTF
    ("on", None, Kind.RETURN, "", (4, "guessed")),  # asked for: the int-sized guess
    ("", 4, Kind.RETURN, "", (4, "int")),  # a width without its class (a hand-built probe)
    ("", 0, Kind.RETURN, "", (0, "off: not an integer")),
])
def test_errno_mode_follows_the_probe_set_then_btf(errno, width, kind, returns, expected):
    assert tuple(errno_mode(errno, width, kind, returns)) == expected


# ---------------------------------------------------------------- binding


@pytest.mark.parametrize("function", sorted(RETURNS))
def test_a_return_probe_learns_what_its_function_returns(kernel, function):
    width, returns, text = RETURNS[function]
    probe = bind_probe(parse_spec(f"{function}:r"), kernel)
    assert (probe.errno_width, probe.return_class) == (width, returns)
    assert probe_errno_mode(probe) == (width, text)
    # bound or not, it is the same probe (what it prints, saves and compares)
    assert probe == parse_spec(f"{function}:r")


def test_a_module_function_is_bound_from_the_modules_btf(kernel):
    probe = bind_probe(parse_spec("mymod_close:r"), kernel)
    assert probe_errno_mode(probe) == (0, "off: void")


def test_names_and_the_return_type_are_bound_together(kernel):
    text = "vfs_read:r:retval if count > 4096"
    probe = bind_probe(parse_probe_text(text), kernel, text=text)
    assert probe.bindings and "count" in probe.bindings
    assert probe_errno_mode(probe) == (8, "long")  # ssize_t


def test_what_btf_cannot_say_stays_unknown(kernel, tmp_path):
    assert bind_returns(parse_spec("ret_int:r"), no_btf(tmp_path)).errno_width is None
    assert bind_returns(parse_spec("ret_int:r"), None).errno_width is None
    assert bind_returns(parse_spec("no_such_function:r"), kernel).errno_width is None
    # a compiler copy may have lost its return value: its BTF is the original's
    assert bind_returns(parse_spec("ret_int.isra.0:r"), kernel).errno_width is None
    assert bind_returns(parse_spec("0xffffffff81234560:r"), kernel).errno_width is None
    assert bind_returns(parse_spec("ret_int:c:a1"), kernel).errno_width is None  # a call probe
    assert probe_errno_mode(bind_returns(parse_spec("ret_int:r"), None)) == (0, "off: no BTF")


def test_a_probe_set_loaded_against_the_kernel_is_bound(kernel):
    ps = loads_probeset("name: x\nprobes:\n  - ret_void:r\n  - spec: ret_ptr:r\n    errno: off\n"
                        "  - spec: ret_uint:r\n    errno: on\n", kernel=kernel)
    assert [tuple(probe_errno_mode(p)) for p in ps.probes] == [
        (0, "off: void"), (0, "off: by the probe set"), (0, "off: unsigned")]


# ---------------------------------------------------------------- the probe set key


@pytest.mark.parametrize("written, errno", [
    ("on", "on"), ("off", "off"), ("auto", ""), ("true", "on"), ("false", "off"),
    ("yes", "on"), ("'on'", "on"), ('"off"', "off"), ("'auto'", ""), ("Off", "off"),
])
def test_errno_in_a_probe_set(written, errno):
    ps = loads_probeset(f"name: x\nprobes:\n  - spec: vfs_read:r:retval\n    errno: {written}\n")
    assert ps.probes[0].errno == errno


def test_errno_saves_back_as_written_and_loads_back_equal():
    text = ("name: x\nprobes:\n  - spec: vfs_read:r:retval\n    errno: on\n"
            "  - spec: vfs_write:r\n    errno: off\n  - spec: ret_int:r\n    errno: auto\n")
    ps = loads_probeset(text)
    saved = dumps_probeset(ps)
    assert "errno: on\n" in saved and "errno: off\n" in saved and "'" not in saved
    assert saved.count("errno:") == 2  # auto is the default: left out
    assert loads_probeset(saved) == ps
    assert [p.errno for p in loads_probeset(saved).probes] == ["on", "off", ""]


@pytest.mark.parametrize("text, where, message", [
    ("  - spec: vfs_read:c:a3\n    errno: on\n", "4:5",
     "probe 1 (vfs_read:c:a3): errno: only a return probe (:r) has errnos"),
    ("  - function: vfs_read\n    fetch: [a3]\n    errno: off\n", "5:5",
     "probe 1 (vfs_read): errno: only a return probe (:r) has errnos"),
    ("  - spec: vfs_read:r\n    errno: maybe\n", "4:12",
     "probe 1 (vfs_read:r): errno: expected on, off or auto, got a string 'maybe'"),
    ("  - spec: vfs_read:r\n    errno: 1\n", "4:12",
     "probe 1 (vfs_read:r): errno: expected on, off or auto, got an integer"),
    ("  - spec: vfs_read:r\n    errno: [on]\n", "4:12", "probe 1 (vfs_read:r): errno: expected on or off"),
])
def test_a_wrong_errno_is_an_error_at_its_place(text, where, message):
    with pytest.raises(ProbeSetError) as info:
        loads_probeset("name: x\nprobes:\n" + text, source="set.yaml")
    assert str(info.value).startswith(f"set.yaml:{where}: {message}"), str(info.value)
    _ps, errors = checks_probeset("name: x\nprobes:\n" + text, source="set.yaml")
    assert [str(e).split(": ", 1)[0] for e in errors] == [f"set.yaml:{where}"]


def test_a_hand_built_probe_is_held_to_the_same_rules():
    with pytest.raises(SpecError, match="only a return probe"):
        validate_probe(dataclasses.replace(parse_spec("vfs_read:c:a3"), errno="on"))
    with pytest.raises(SpecError, match="errno: expected on, off"):
        validate_probe(dataclasses.replace(parse_spec("vfs_read:r"), errno="maybe"))
    validate_probe(dataclasses.replace(parse_spec("vfs_read:r"), errno="off"))


def test_editing_a_probe_keeps_its_errno_while_it_returns():
    base = dataclasses.replace(parse_spec("vfs_read:r:retval"), errno="off")
    assert build_probe("vfs_read:r:retval", "retval < 0", "", base=base).errno == "off"
    assert build_probe("vfs_read:c:a3", "", "", base=base).errno == ""  # a call probe has none


# ---------------------------------------------------------------- ktui check


def _check(monkeypatch, kernel, path):
    monkeypatch.setattr(cli, "_kernel_names", lambda: kernel)
    # the functions are in the test's BTF, not in this machine's kallsyms
    monkeypatch.setattr(cli, "_name_problems", lambda *_args: [])
    return CliRunner().invoke(cli.main, ["check", str(path)])


def test_ktui_check_warns_of_an_errno_on_that_counts_nothing(monkeypatch, kernel, tmp_path):
    f = tmp_path / "set.yaml"
    f.write_text("name: x\nprobes:\n  - spec: ret_int:r\n    errno: on\n"
                 "  - spec: ret_void:r\n    errno: on\n  - ret_uint:r\n")
    r = _check(monkeypatch, kernel, f)
    lines = r.output.splitlines()
    assert r.exit_code == 0, r.output
    assert [line for line in lines if "warning" in line] == [
        f"{f}:5:11: warning: probe 2 (ret_void:r): errno: on counts nothing: BTF says ret_void returns void"]
    assert lines[-1].startswith(f"{f}: ok (3 probes")
    assert "errno" not in lines[-1]  # BTF answered for every probe


def test_ktui_check_says_errnos_are_not_counted_without_btf(monkeypatch, tmp_path):
    f = tmp_path / "set.yaml"
    f.write_text("name: x\nprobes:\n  - vfs_read:r\n")
    r = _check(monkeypatch, no_btf(tmp_path), f)
    assert r.output.endswith("; errnos not counted: no BTF)\n"), r.output
    f.write_text("name: x\nprobes:\n  - spec: vfs_read:r\n    errno: on\n")
    r = _check(monkeypatch, no_btf(tmp_path), f)
    assert r.output.endswith("; errnos guessed as int: no BTF)\n"), r.output
    f.write_text("name: x\nprobes:\n  - spec: vfs_read:r\n    errno: off\n  - vfs_read:c:a3\n")
    assert _check(monkeypatch, no_btf(tmp_path), f).output == f"{f}: ok (2 probes)\n"
