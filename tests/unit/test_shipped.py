"""The shipped generic program (kernel/generic/shipped.py): there for every
variant, built from today's program text, the same bytes a fresh build
makes, and what the loader takes first. Whether each kernel's verifier
takes it: tests/kernel/test_shipped.py."""

from __future__ import annotations

import os
import subprocess

import pytest

from ktui.kernel.generic import loader
from ktui.kernel.generic.cache import CompiledProgram, ProgramCache, cache_key
from ktui.kernel.generic.shipped import (SUFFIX, VARIANTS, Stale, encode_shipped, shipped_dir,
                                         shipped_program)
from ktui.kernel.maps import bpfsys
from ktui import __version__

ROOT = shipped_dir().parents[3]


def test_every_variant_is_shipped_built_from_todays_program_text():
    """Change program.c (or abi.py, or the C pasted in) without running
    scripts/build-generic.sh and this fails."""
    for name, kind, helpers in VARIANTS:
        program = shipped_program(loader.program_text(kind, func_arg_helpers=helpers), kind, helpers)
        assert program is not None, name
        assert all(program.insns[i * 8 + 4:i * 8 + 8] == bytes(4) for i, _ in program.relocations), name
    assert sorted(p.name for p in shipped_dir().glob("*" + SUFFIX)) == sorted(n + SUFFIX for n, _, _ in VARIANTS)


def test_an_object_of_another_text_is_stale():
    with pytest.raises(Stale, match="build-generic.sh"):
        shipped_program(loader.program_text() + "\n/* changed */\n", "kprobe", True)


@pytest.mark.timeout(600)
def test_a_fresh_build_makes_the_shipped_bytes():
    """bcc, today's text and Debian's 6.1 headers make exactly the shipped
    objects (map-fd immediates zeroed): nothing else went into them."""
    assert os.geteuid() == 0, "make test runs as root: the build needs a mount namespace and bcc's maps"
    out = subprocess.run(["bash", str(ROOT / "scripts/build-generic.sh"), "--check"], capture_output=True,
                         text=True, timeout=540)
    assert out.returncode == 0, out.stderr
    assert "are today's build" in out.stdout


PROGRAM = CompiledProgram(insns=bytes(16), relocations=((0, "ktui_hits"),),
                          maps={"ktui_hits": {"type": 6, "key_size": 4, "value_size": 8, "max_entries": 4,
                                              "flags": 0}})
CACHED = CompiledProgram(insns=bytes(24), relocations=(), maps={})


class Kernel:
    """load_compiled's stand-in: refuses what it is told to, with words."""

    def __init__(self, refuse=()):
        self.refuse, self.loaded = refuse, []

    def load(self, program, source, ring_bytes=None):
        if program in self.refuse:
            raise bpfsys.BpfError(13, "loading the generic program", log="0: (95) exit\nR0 !read_ok\n")
        self.loaded.append(source)
        return loader.LoadedProgram(-1, {}, {}, source)


def log_fd_of(tmp_path):
    return os.open(tmp_path / "ktui.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


def no_compile(text, key):
    raise AssertionError("compiled")


def test_the_shipped_program_goes_before_the_cache_and_a_compile(tmp_path, monkeypatch):
    kernel = Kernel()
    monkeypatch.setattr(loader, "load_compiled", kernel.load)
    cache = ProgramCache(tmp_path / "cache")
    cache.put(cache_key(loader.program_text(), __version__), CACHED)
    fd = log_fd_of(tmp_path)
    try:
        assert loader.load_generic(fd, cache=cache, compiler=no_compile, func_arg_helpers=True).source == "shipped"
        for kind in ("kprobe", "tracing", "tracepoint"):
            assert loader.compiled_variant(fd, cache=None, kind=kind, compiler=no_compile,
                                           func_arg_helpers=False)[1] == "shipped"
        assert not loader.needs_compile(None, tracing=True, func_arg_helpers=True)
    finally:
        os.close(fd)
    assert kernel.loaded == ["shipped"]


def test_a_refused_shipped_program_is_logged_with_the_verifiers_words_and_compiled(tmp_path, monkeypatch):
    shipped = shipped_program(loader.program_text(), "kprobe", True)
    kernel = Kernel(refuse=(shipped,))
    monkeypatch.setattr(loader, "load_compiled", kernel.load)
    fd = log_fd_of(tmp_path)
    try:
        program = loader.load_generic(fd, cache=None, compiler=lambda text, key: PROGRAM, func_arg_helpers=True)
    finally:
        os.close(fd)
    assert program.source == "compiled" and kernel.loaded == ["compiled"]
    text = (tmp_path / "ktui.log").read_text()
    assert "refused the shipped generic program" in text and "R0 !read_ok" in text, text


def test_refused_and_no_compiler_is_one_line_saying_what_is_missing(tmp_path, monkeypatch):
    shipped = shipped_program(loader.program_text(), "kprobe", True)
    monkeypatch.setattr(loader, "load_compiled", Kernel(refuse=(shipped,)).load)

    def no_headers(text, key):
        raise RuntimeError("compiling the generic program: Unable to find kernel headers.")

    fd = log_fd_of(tmp_path)
    try:
        with pytest.raises(RuntimeError) as caught:
            loader.load_generic(fd, cache=None, compiler=no_headers, func_arg_helpers=True)
    finally:
        os.close(fd)
    said = str(caught.value)
    assert "\n" not in said
    assert "refused the shipped generic program" in said and "Unable to find kernel headers" in said
    assert f"linux-headers-{os.uname().release}" in said and "python3-bpfcc" in said


def test_a_stale_shipped_program_is_logged_and_compiled(tmp_path, monkeypatch):
    kernel = Kernel()
    monkeypatch.setattr(loader, "load_compiled", kernel.load)
    monkeypatch.setattr(loader, "program_text", lambda tracing=False, func_arg_helpers=True: "/* edited */")
    fd = log_fd_of(tmp_path)
    try:
        assert loader.needs_compile(None, tracing=False, func_arg_helpers=True)
        assert loader.load_generic(fd, cache=None, compiler=lambda t, k: PROGRAM,
                                   func_arg_helpers=True).source == "compiled"
    finally:
        os.close(fd)
    assert "not built from today's program text" in (tmp_path / "ktui.log").read_text()


def test_shipped_bytes_do_not_depend_on_the_fds_a_build_got():
    one = CompiledProgram(bytes(8) + bytes([0x18, 0x11, 0, 0, 7, 0, 0, 0]) + bytes(8), ((1, "m"),), {"m": {}})
    other = CompiledProgram(bytes(8) + bytes([0x18, 0x11, 0, 0, 9, 0, 0, 0]) + bytes(8), ((1, "m"),), {"m": {}})
    assert encode_shipped("text", one) == encode_shipped("text", other)
