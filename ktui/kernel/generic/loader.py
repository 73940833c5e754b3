"""Get the generic program into the kernel: shipped, cached, or compiled once.

The package ships it built ahead of time (shipped.py): that is what loads,
with no compiler and no kernel headers. The cache and a compile are for
what the shipped objects cannot serve: a kernel whose verifier refuses
them (the refusal and its log go to ktui's log), or a checkout whose
program.c changed since they were built.

bcc has no public call to load a precompiled object, but its library has
the loader's parts: `BPF(text=...)` compiles (clang) and creates the maps,
`dump_func` hands back the finished instructions, in which every map
reference is a 64-bit load of a map fd (BPF_PSEUDO_MAP_FD). So a compile
is recorded as the instructions plus, for each such load, the name of the
map and how to create it. Loading, cached or fresh, is then bpf(2) alone
(kernel/bpfsys.py): create the maps, write their fds into the loads, load
the instructions. One path for both. The compile itself runs in a child
process (compile_child.py): ktui never imports bcc for the generic program.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass
from importlib import resources
from typing import Callable

from ktui import __version__
from ktui.kernel.maps import bpfsys
from ktui.kernel.generic import abi
from ktui.kernel.generic.cache import CompiledProgram, ProgramCache, cache_key
from ktui.kernel.codegen.runtime import entry_stack_c, interrupt_context_c
from ktui.kernel.generic.compile_child import compile_in_child
from ktui.kernel.generic.shipped import KPROBE, TRACEPOINT, TRACING, Stale, shipped_program
from ktui.kernel.quiet import captured_stderr, log_line

FUNCTION = "ktui_generic"
_LD_IMM64 = 0x18

# (program text, cache key) -> the compiled program: a session's compile
# helper (compile_child.CompileHelper.compile), or one of its own
Compiler = Callable[[str, str], CompiledProgram]


def program_text(kind: str = KPROBE, *, func_arg_helpers: bool = True) -> str:
    """The whole C text: the generated declarations, then program.c.
    `kind`: KPROBE, TRACING (its fentry/fexit variant, BPF_PROG_TYPE_TRACING)
    or TRACEPOINT (BPF_PROG_TYPE_TRACEPOINT).
    `func_arg_helpers`: the tracing variant reads arguments with
    bpf_get_func_arg/ret, which the kernel was probed to have
    (kernel/features: func_arg), rather than one probe read; both
    variants get the same value (they share one layout of maps). The
    default suits a compile check: every kernel ktui is tested on has them."""
    body = resources.files("ktui.kernel.generic").joinpath("program.c").read_text(encoding="utf-8")
    head = {KPROBE: "", TRACING: "#define KTUI_TRACING 1\n", TRACEPOINT: "#define KTUI_TRACEPOINT 1\n"}[kind]
    head += f"#define KTUI_FUNC_ARG_HELPERS {int(func_arg_helpers)}\n"
    return head + abi.c_declarations() + "\n" + entry_stack_c() + "\n" + interrupt_context_c() + "\n" + body


def _probed_func_arg(func_arg_helpers: bool | None) -> bool:
    """`func_arg_helpers`, or where None, what the kernel was probed to have."""
    if func_arg_helpers is not None:
        return func_arg_helpers
    from ktui.kernel.machine.features import kernel_features

    return kernel_features().func_arg_helpers


@dataclass
class LoadedProgram:
    prog_fd: int
    maps: dict[str, int]  # name -> fd
    specs: dict[str, dict]
    source: str  # "shipped", "cache" or "compiled", for the log and the benchmarks
    # what was loaded: copies of it with the same maps (a kprobe_multi
    # link's, load_kprobe_multi_copy) are loaded from it
    compiled: CompiledProgram | None = None

    def close(self) -> None:
        for fd in [self.prog_fd, *self.maps.values()]:
            try:
                os.close(fd)
            except OSError:
                pass
        self.maps.clear()


def compile_program(text: str, log_fd: int) -> CompiledProgram:
    """Compile with bcc and record what loading needs; bcc's own maps and
    module are freed again."""
    from bcc import BPF  # imported late: seconds under emulation

    with captured_stderr(log_fd) as cap:
        try:
            bpf = BPF(text=text.encode())
        except Exception as exc:  # bcc raises bare Exception on compile errors
            detail = cap.first_error() if cap.text else str(exc)
            raise bpfsys.BpfError(22, f"compiling the generic program: {detail}") from exc
    try:
        insns = bpf.dump_func(FUNCTION.encode())
        fds: dict[int, str] = {}
        specs: dict[str, dict] = {}
        relocations = []
        for index in range(len(insns) // 8):
            code, regs, _, imm = struct.unpack_from("<BBhi", insns, index * 8)
            if code == _LD_IMM64 and regs >> 4 == bpfsys.BPF_PSEUDO_MAP_FD:
                if imm not in fds:
                    info = bpfsys.map_info(imm)
                    name = info.pop("name")
                    fds[imm] = name
                    specs[name] = info
                relocations.append((index, fds[imm]))
        return CompiledProgram(insns, tuple(relocations), specs)
    finally:
        with captured_stderr(log_fd):
            bpf.cleanup()


EVENTS = "ktui_events"  # the ring buffer: its size is chosen at load time


def load_compiled(program: CompiledProgram, source: str, ring_bytes: int | None = None) -> LoadedProgram:
    """Create the maps and load the instructions with their fds. The
    program does not depend on the ring buffer's size, so one compiled (and
    cached) program serves every --buffer-pages."""
    specs = {name: dict(spec) for name, spec in program.maps.items()}
    if ring_bytes is not None:
        specs[EVENTS]["max_entries"] = ring_bytes
    maps: dict[str, int] = {}
    try:
        for name, spec in specs.items():
            maps[name] = bpfsys.map_create(spec["type"], spec["key_size"], spec["value_size"],
                                           spec["max_entries"], spec["flags"], name=name)
        prog_fd = bpfsys.prog_load(program.relocated(maps.__getitem__), name=FUNCTION, log_size=1 << 20)
    except BaseException:
        for fd in maps.values():
            os.close(fd)
        raise
    return LoadedProgram(prog_fd, maps, specs, source, program)


def _one_off(log_fd: int) -> Compiler:
    return lambda text, key: compile_in_child(text, key, log_fd)


def _shipped(text: str, *, kind: str, func_arg_helpers: bool, log_fd: int | None = None) -> CompiledProgram | None:
    """The variant's shipped object, if the package has one built from TEXT."""
    try:
        return shipped_program(text, kind, func_arg_helpers)
    except Stale as exc:
        if log_fd is not None:
            log_line(log_fd, f"ktui: {exc}")
        return None


def needs_compile(cache: ProgramCache | None, *, tracing: bool, func_arg_helpers: bool | None = None) -> bool:
    """Whether a start may compile: neither the package nor the cache has
    the generic program, or (`tracing`: fentry/fexit may be used) its
    fentry/fexit variant."""
    helpers = _probed_func_arg(func_arg_helpers)
    for kind in (KPROBE, TRACING) if tracing else (KPROBE,):
        text = program_text(kind, func_arg_helpers=helpers)
        if _shipped(text, kind=kind, func_arg_helpers=helpers) is not None:
            continue
        if cache is None or cache.get(cache_key(text, __version__)) is None:
            return True
    return False


VERIFIER_LOG_TAIL = 64 << 10  # the verifier's conclusion is at the end of its log


def log_refusal(log_fd: int, what: str, exc: bpfsys.BpfError) -> None:
    """A refusal, with the verifier's words, in ktui's log."""
    log_line(log_fd, f"ktui: this kernel's verifier refused {what} ({exc}); trying the next way "
                     "(shipped, cached, compiled). The verifier's log:")
    os.write(log_fd, (exc.log or "(none)")[-VERIFIER_LOG_TAIL:].encode(errors="replace") + b"\n")


def load_generic(log_fd: int, *, cache: ProgramCache | None, ring_bytes: int | None = None,
                 compiler: Compiler | None = None, func_arg_helpers: bool | None = None) -> LoadedProgram:
    """The generic program, loaded: the shipped one; else from `cache` when
    it has it (None: no cache, compile every time). A shipped or cached
    program the kernel refuses is compiled afresh, once. `compiler`: the
    session's compile helper (else one of its own); `func_arg_helpers`:
    see program_text (None: this kernel's probed features say)."""
    helpers = _probed_func_arg(func_arg_helpers)
    text = program_text(func_arg_helpers=helpers)
    started = time.monotonic()
    refused = None
    # the shipped program, then the cache's (its key is worked out only
    # when needed: it reads the kernel headers' identity and kallsyms)
    ready = (("shipped", "the shipped generic program",
              lambda: _shipped(text, kind=KPROBE, func_arg_helpers=helpers, log_fd=log_fd)),
             ("cache", "the cached generic program",
              lambda: cache.get(cache_key(text, __version__)) if cache is not None else None))
    for source, what, get in ready:
        program = get()
        if program is None:
            continue
        try:
            loaded = load_compiled(program, source, ring_bytes)
            log_line(log_fd, f"ktui: generic program ({source}) loaded in {time.monotonic() - started:.2f} s")
            return loaded
        except bpfsys.BpfError as exc:
            log_refusal(log_fd, what, exc)
            if source == "shipped":
                refused = exc
    key = cache_key(text, __version__)
    try:
        compiled = (compiler or _one_off(log_fd))(text, key)
    except (OSError, RuntimeError) as exc:
        # one line: why a compile was needed, how it failed, what it needs
        why = (f"this kernel refused the shipped generic program ({refused}; the verifier's log is in "
               "ktui's log)" if refused is not None else
               "the package holds no generic program built from this text (scripts/build-generic.sh)")
        raise RuntimeError(f"{why}, and it could not be compiled here instead ({exc}): that needs bcc "
                           f"(python3-bpfcc) and this kernel's headers (linux-headers-{os.uname().release})") from exc
    compiled_at = time.monotonic()
    log_line(log_fd, f"ktui: generic program compiled in {compiled_at - started:.2f} s")
    if cache is not None:
        cache.put(key, compiled)
    loaded = load_compiled(compiled, "compiled", ring_bytes)
    log_line(log_fd, f"ktui: generic program loaded in {time.monotonic() - compiled_at:.2f} s")
    return loaded


SELF = "ktui_self"  # a tracing copy's own map: its cookie and argument count
_SELF_VALUE = struct.Struct("<QII")


def tracing_variant(log_fd: int, *, cache: ProgramCache | None,
                    compiler: Compiler | None = None, func_arg_helpers: bool | None = None) -> CompiledProgram:
    """The fentry/fexit variant's instructions (not loaded: every probe
    loads its own copy, load_tracing_copy), from `cache` or compiled once
    (by `compiler`, else a helper of its own)."""
    return compiled_variant(log_fd, cache=cache, kind=TRACING, compiler=compiler,
                            func_arg_helpers=func_arg_helpers)[0]


def compiled_variant(log_fd: int, *, cache: ProgramCache | None, kind: str,
                     compiler: Compiler | None = None,
                     func_arg_helpers: bool | None = None) -> tuple[CompiledProgram, str]:
    """A variant's instructions, not loaded, and where they came from
    ("shipped", "cache" or "compiled"): the shipped ones, else from
    `cache`, or compiled once into it
    (`kind`: KPROBE, TRACING or TRACEPOINT; by
    `compiler`, else a helper of its own; `func_arg_helpers`: see
    program_text, None: this kernel's probed features say)."""
    helpers = _probed_func_arg(func_arg_helpers)
    text = program_text(kind, func_arg_helpers=helpers)
    shipped = _shipped(text, kind=kind, func_arg_helpers=helpers, log_fd=log_fd)
    if shipped is not None:
        return shipped, "shipped"
    key = cache_key(text, __version__)
    cached = cache.get(key) if cache is not None else None
    if cached is not None:
        return cached, "cache"
    started = time.monotonic()
    compiled = (compiler or _one_off(log_fd))(text, key)
    what = {KPROBE: "generic program", TRACING: "fentry/fexit variant", TRACEPOINT: "tracepoint variant"}[kind]
    log_line(log_fd, f"ktui: {what} compiled in {time.monotonic() - started:.2f} s")
    if cache is not None:
        cache.put(key, compiled)
    return compiled, "compiled"


def cached_tracing_variant(cache: ProgramCache, *, func_arg_helpers: bool | None = None) -> CompiledProgram | None:
    """The fentry/fexit variant's instructions if the package or `cache` holds them."""
    helpers = _probed_func_arg(func_arg_helpers)
    text = program_text(TRACING, func_arg_helpers=helpers)
    return _shipped(text, kind=TRACING, func_arg_helpers=helpers) or cache.get(cache_key(text, __version__))


def load_tracing_copy(program: CompiledProgram, maps: dict[str, int], *, cookie: int, nargs: int,
                      btf_id: int, attach_type: int, name: str) -> int:
    """One copy of the tracing variant for the kernel function `btf_id`
    (its FUNC in vmlinux's BTF), sharing the kprobe program's maps (same
    names, same layout: one text) and with a ktui_self map of its own.
    The program holds that map; ktui's fd to it is closed at once."""
    spec = program.maps[SELF]
    self_fd = bpfsys.map_create(spec["type"], spec["key_size"], spec["value_size"], 1, spec["flags"],
                                name=SELF)
    try:
        value = _SELF_VALUE.pack(cookie, nargs, 0).ljust(spec["value_size"], b"\0")
        bpfsys.map_update(self_fd, b"\0\0\0\0", value)
        insns = program.relocated(lambda map_name: self_fd if map_name == SELF else maps[map_name])
        return bpfsys.prog_load(insns, name=name, log_size=1 << 20,
                                prog_type=bpfsys.BPF_PROG_TYPE_TRACING,
                                expected_attach_type=attach_type, attach_btf_id=btf_id)
    finally:
        os.close(self_fd)


def load_tracepoint_program(program: CompiledProgram, maps: dict[str, int], *, name: str) -> int:
    """The tracepoint variant loaded as a BPF_PROG_TYPE_TRACEPOINT program
    sharing the kprobe program's maps (same names, same layout: one text).
    Each tracepoint probe loads its own, as each kprobe its own dispatcher:
    the kernel's run-time statistics are then the probe's (dispatch.py)."""
    insns = program.relocated(maps.__getitem__)
    return bpfsys.prog_load(insns, name=name, log_size=1 << 20, prog_type=bpfsys.BPF_PROG_TYPE_TRACEPOINT)


def load_kprobe_multi_copy(program: CompiledProgram, maps: dict[str, int], *, name: str) -> int:
    """The kprobe variant loaded again for a kprobe_multi link (a wildcard's
    functions, all in one link): the kernel wants the attach type at load
    time, and refuses a program array that mixes it with plain kprobes, so
    such a probe runs its own copy, as a tracepoint probe does, with the
    same maps (one text)."""
    insns = program.relocated(maps.__getitem__)
    return bpfsys.prog_load(insns, name=name, log_size=1 << 20, prog_type=bpfsys.BPF_PROG_TYPE_KPROBE,
                            expected_attach_type=bpfsys.BPF_TRACE_KPROBE_MULTI)
