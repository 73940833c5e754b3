"""Where the running kernel keeps its BTF, and which kernel build it is.

/sys/kernel/btf/vmlinux is the kernel's own BTF (CONFIG_DEBUG_INFO_BTF),
readable by every user; /sys/kernel/btf/MODULE is a loaded module's split
BTF (CONFIG_DEBUG_INFO_BTF_MODULES). /sys/kernel/notes holds the kernel
image's ELF notes, among them the GNU build id: the same id means the same
vmlinux, hence the same BTF, which is what the cache is keyed by.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from ktui.btf.decode import BtfError

BTF_DIR = Path("/sys/kernel/btf")
NOTES = Path("/sys/kernel/notes")
NT_GNU_BUILD_ID = 3
MAX_BLOB = 256 << 20  # a 6.x vmlinux BTF is 4-6 MB; refuse to slurp something absurd
_NOTE = struct.Struct("<III")


def read_blob(path: Path) -> bytes:
    """A BTF file's bytes; BtfError (one line) when it cannot be read."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BLOB + 1)
    except FileNotFoundError:
        raise BtfError(f"{path}: no such file") from None
    except OSError as exc:
        raise BtfError(f"{path}: {exc.strerror}") from None
    if len(data) > MAX_BLOB:
        raise BtfError(f"{path}: larger than {MAX_BLOB >> 20} MiB, not a BTF file")
    return data


def module_names(btf_dir: Path = BTF_DIR) -> list[str]:
    """Modules whose BTF the kernel exposes (the loaded ones that have it)."""
    try:
        names = os.listdir(btf_dir)
    except OSError:
        return []
    return sorted(n for n in names if n != "vmlinux")


def build_id(notes: Path = NOTES) -> str | None:
    """The kernel's GNU build id as hex, or None if there is none to read."""
    try:
        data = notes.read_bytes()
    except OSError:
        return None
    return gnu_build_id(data)


def gnu_build_id(data: bytes) -> str | None:
    """The GNU build id in a sequence of ELF notes (namesz, descsz, type,
    name and desc each padded to 4 bytes)."""
    at = 0
    while at + _NOTE.size <= len(data):
        namesz, descsz, kind = _NOTE.unpack_from(data, at)
        name_at = at + _NOTE.size
        desc_at = name_at + (namesz + 3) // 4 * 4
        end = desc_at + (descsz + 3) // 4 * 4
        if end > len(data):
            return None
        if kind == NT_GNU_BUILD_ID and data[name_at:name_at + namesz] == b"GNU\0" and descsz:
            return data[desc_at:desc_at + descsz].hex()
        at = end
    return None
