"""A cache of compiled programs, so that a later start runs no compiler.

An entry is the BPF instructions bcc produced for one program text on one
kernel's headers, with the maps it needs and where their fds go:
everything to load it again through bpf(2) alone. Its key hashes
everything the bytecode depends on (the program text, ktui's and bcc's
versions, the kernel headers bcc compiles against, named by their
content, and the little bcc asks the running kernel: build_inputs.py), so
nothing stale is ever loaded: any change is a different key. The running
kernel itself is not in the key, so an entry compiled elsewhere against
the same headers (the test rig compiles on the host for the VM's kernel)
is the very entry a compile here would make.

The store is private to the user and refuses to be fooled: the directory
is created 0700; an entry is written to a temporary file and renamed; a
file that is not a regular file, is owned by someone else, or is writable
by group or others is ignored; an entry that does not parse or whose
checksum does not match is a miss (the caller recompiles and logs it),
never a crash. The cache keeps at most MAX_ENTRIES files and MAX_BYTES
bytes, oldest out first. `--no-cache` bypasses it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from ktui.cachefiles import NotTrusted, cache_dir, private_dir, read_trusted, write_private
from ktui.kernel.generic import build_inputs
from ktui.kernel.generic.build_inputs import BuildInputs

FORMAT = 1
MAX_ENTRIES = 16
MAX_BYTES = 64 << 20
SUFFIX = ".ktuiprog"


@dataclass(frozen=True)
class CompiledProgram:
    """What bcc produced: instructions, and for each map-fd load in them,
    which map (by name). `maps` holds each map's bpf(2) creation spec."""

    insns: bytes
    relocations: tuple[tuple[int, str], ...]  # (instruction index, map name)
    maps: dict[str, dict]  # name -> {type, key_size, value_size, max_entries, flags}

    def relocated(self, fd_of) -> bytes:
        """The instructions with each map-fd load holding `fd_of(map name)`."""
        insns = bytearray(self.insns)
        for index, name in self.relocations:
            struct.pack_into("<i", insns, index * 8 + 4, fd_of(name))
        return bytes(insns)


def cache_key(program_text: str, ktui_version: str, inputs: BuildInputs | None = None) -> str:
    """Everything the compiled bytecode depends on, hashed: the text, ktui's
    version, and what a compile here depends on besides (build_inputs;
    `inputs` None: worked out now)."""
    inputs = inputs if inputs is not None else build_inputs.here()
    parts = [
        f"format {FORMAT}",
        f"ktui {ktui_version}",
        *inputs.lines(),
        "program " + hashlib.sha256(program_text.encode()).hexdigest(),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


class ProgramCache:
    def __init__(self, directory: Path | None = None, *, log=None) -> None:
        self.directory = directory or cache_dir()
        self._log = log or (lambda text: None)

    def _path(self, key: str) -> Path:
        return self.directory / (key + SUFFIX)

    def get(self, key: str) -> CompiledProgram | None:
        path = self._path(key)
        try:
            data = read_trusted(path, MAX_BYTES)
        except NotTrusted as exc:
            self._log(f"ktui: program cache: ignoring {path}: {exc}")
            return None
        if data is None:
            return None
        try:
            return decode_entry(data, key)
        except (ValueError, KeyError, TypeError) as exc:
            self._log(f"ktui: program cache: {path} is corrupt ({exc}); recompiling")
            return None

    def put(self, key: str, program: CompiledProgram) -> None:
        """Store an entry; a cache that cannot be written is only logged."""
        try:
            self._ensure_dir()
            write_private(self._path(key), encode_entry(program, key))
            self._trim()
        except OSError as exc:
            self._log(f"ktui: program cache: cannot write to {self.directory}: {exc}")

    def _ensure_dir(self) -> None:
        why = private_dir(self.directory, create=True)
        if why:
            raise OSError(f"{self.directory}: {why}")

    def _trim(self) -> None:
        """Keep the newest entries within MAX_ENTRIES and MAX_BYTES."""
        entries = []
        for path in self.directory.glob("*" + SUFFIX):
            try:
                info = path.lstat()
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                entries.append((info.st_mtime, info.st_size, path))
        entries.sort(reverse=True)
        total = 0
        for index, (_, size, path) in enumerate(entries):
            total += size
            if index >= MAX_ENTRIES or total > MAX_BYTES:
                try:
                    path.unlink()
                except OSError:
                    pass


def encode_entry(program: CompiledProgram, key: str) -> bytes:
    body = {
        "format": FORMAT,
        "key": key,
        "insns": base64.b64encode(program.insns).decode(),
        "relocations": [list(r) for r in program.relocations],
        "maps": program.maps,
    }
    text = json.dumps(body, sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return json.dumps({"sha256": digest, "body": text}).encode()


def decode_entry(data: bytes, key: str) -> CompiledProgram:
    outer = json.loads(data)
    text = outer["body"]
    if hashlib.sha256(text.encode()).hexdigest() != outer["sha256"]:
        raise ValueError("checksum mismatch")
    body = json.loads(text)
    if body["format"] != FORMAT or body["key"] != key:
        raise ValueError("another format or key")
    insns = base64.b64decode(body["insns"], validate=True)
    if not insns or len(insns) % 8:
        raise ValueError("instructions are not whole")
    maps = {str(name): {k: int(spec[k]) for k in ("type", "key_size", "value_size", "max_entries", "flags")}
            for name, spec in body["maps"].items()}
    relocations = tuple((int(i), str(name)) for i, name in body["relocations"])
    for index, name in relocations:
        if name not in maps or not 0 <= index < len(insns) // 8:
            raise ValueError("a relocation points nowhere")
    return CompiledProgram(insns, relocations, maps)
