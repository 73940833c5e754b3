"""The generic program as shipped in the package: built ahead of time, loaded without a compiler.

The generic program reads no kernel structure but the uapi pt_regs (BTF
offsets are resolved in Python, lang/bind.py), so one build serves every
kernel: bcc's output for 6.1's headers and for 6.12's is the same but for
a few instructions' order. scripts/build-generic.sh compiles each variant
(kprobe, fentry/fexit or tracepoint, with or without bpf_get_func_arg) once, against
Debian's 6.1 headers, into shipped/; the verifier of each kernel ktui is
tested on passes them (tests/kernel/test_shipped.py). A machine with no
compiler and no kernel headers then starts at once.

An object is named by its variant and keyed by the program text it was
built from: after program.c changes, a stale object is a miss (logged;
the loader compiles, as without a shipped object) and
tests/unit/test_shipped.py fails until the objects are built again. The
map-fd immediates are zeroed: the loader writes its own (loader.py).
"""

from __future__ import annotations

import functools
import hashlib
from importlib import resources
from pathlib import Path

from ktui.kernel.generic.cache import CompiledProgram, decode_entry, encode_entry

SUFFIX = ".ktuiprog"
# what a variant's program is loaded as: a kprobe's, fentry/fexit's
# (BPF_PROG_TYPE_TRACING) or a tracepoint's
KPROBE, TRACING, TRACEPOINT = "kprobe", "tracing", "tracepoint"
# (file stem, program kind, func_arg_helpers): every text program_text
# makes. Every kind comes with and without the helpers: they change the
# scratch state's layout, and a session's variants share its maps.
VARIANTS = (
    ("kprobe", KPROBE, True),
    ("kprobe-no-func-arg", KPROBE, False),
    ("tracing", TRACING, True),
    ("tracing-no-func-arg", TRACING, False),
    ("tracepoint", TRACEPOINT, True),
    ("tracepoint-no-func-arg", TRACEPOINT, False),
)


def shipped_dir() -> Path:
    return Path(str(resources.files("ktui.kernel.generic").joinpath("shipped")))


def shipped_key(program_text: str) -> str:
    return "shipped " + hashlib.sha256(program_text.encode()).hexdigest()


def variant_name(kind: str, func_arg_helpers: bool) -> str:
    return next(name for name, k, h in VARIANTS if k == kind and h == func_arg_helpers)


class Stale(ValueError):
    """A shipped object built from another program text."""


def shipped_program(program_text: str, kind: str, func_arg_helpers: bool,
                    directory: Path | None = None) -> CompiledProgram | None:
    """The variant's shipped object (`kind`: KPROBE, TRACING or
    TRACEPOINT); None when there is none (a package built without them);
    Stale when it was built from another text."""
    path = (directory or shipped_dir()) / (variant_name(kind, func_arg_helpers) + SUFFIX)
    return _read(path, shipped_key(program_text))


@functools.lru_cache(maxsize=len(VARIANTS))
def _read(path: Path, key: str) -> CompiledProgram | None:
    """Read and decoded once a process: a start asks for each variant
    several times (whether to start a compile helper, then to load)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return decode_entry(data, key)
    except (ValueError, KeyError, TypeError) as exc:
        raise Stale(f"{path} was not built from today's program text ({exc}): "
                    "run scripts/build-generic.sh") from exc


def without_map_fds(program: CompiledProgram) -> CompiledProgram:
    """The same program with every map-fd immediate 0: the fds a compile
    happened to get are no part of it, and the shipped bytes stay the same
    from one build to the next."""
    return CompiledProgram(program.relocated(lambda name: 0), program.relocations, program.maps)


def encode_shipped(program_text: str, program: CompiledProgram) -> bytes:
    return encode_entry(without_map_fds(program), shipped_key(program_text))
