"""The BTF of a kernel that is not running, read from its boot image.

`ktui vm` boots another kernel than the host's (a stock Debian 6.1 or
6.12), and a name typo in a probe (`vfs_read:c:cuont`) cost a boot of a
minute or more before the guest said so (issue #29). The guest kernel's
BTF is in its image on the host: /boot/vmlinuz-RELEASE is a bzImage, a
small setup program followed by the compressed kernel (vmlinux, an ELF
file stripped of its symbols), whose `.BTF` section is what the running
kernel shows as /sys/kernel/btf/vmlinux.

The bzImage header (Documentation/arch/x86/boot.rst, protocol 2.08+) says
where the compressed payload is; its first bytes say how it is compressed.
gzip, xz, lzma and bzip2 are in Python's standard library; zstd (Debian's
6.12) is not, so the `zstd` program decompresses it. Everything that goes
wrong is one line (BtfError): the names are then checked in the guest, as
before.
"""

from __future__ import annotations

import bz2
import lzma
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

from ktui.btf.decode import BtfError

MAX_IMAGE = 128 << 20  # a Debian vmlinuz is 8-12 MB
MAX_KERNEL = 1 << 30  # the decompressed vmlinux (60-80 MB); refuse a bomb
SETUP_SECTS, HDRS_MAGIC, PAYLOAD = 0x1F1, 0x202, 0x248
ELF_MAGIC = b"\x7fELF"
_SECTION = struct.Struct("<IIQQQQIIQQ")

# How the payload starts, for each compression the kernel can be built with.
MAGICS = (
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"BZh", "bzip2"),
    (b"\x5d\x00\x00", "lzma"),
    (b"\x02\x21\x4c\x18", "lz4"),
    (b"\x89LZO", "lzo"),
)


def btf_of_image(path: Path) -> bytes:
    """The `.BTF` section of the kernel in the boot image `path`."""
    try:
        with open(path, "rb") as f:
            image = f.read(MAX_IMAGE + 1)
    except OSError as exc:
        raise BtfError(f"{path}: {exc.strerror}") from None
    if len(image) > MAX_IMAGE:
        raise BtfError(f"{path}: larger than {MAX_IMAGE >> 20} MiB, not a kernel image")
    return elf_section(decompress(bzimage_payload(image, str(path)), str(path)), ".BTF", str(path))


def bzimage_payload(image: bytes, source: str = "image") -> bytes:
    """The compressed kernel inside a bzImage (with the 4-byte size the
    kernel's build appends to it)."""
    if len(image) < PAYLOAD + 8 or image[HDRS_MAGIC:HDRS_MAGIC + 4] != b"HdrS":
        raise BtfError(f"{source}: not a bzImage (no HdrS header)")
    setup_sects = image[SETUP_SECTS] or 4
    offset, length = struct.unpack_from("<II", image, PAYLOAD)
    start = (setup_sects + 1) * 512 + offset
    if not length or start + length > len(image):
        raise BtfError(f"{source}: its payload runs past the end of the file")
    return image[start:start + length]


def decompress(payload: bytes, source: str = "image") -> bytes:
    kind = next((name for magic, name in MAGICS if payload.startswith(magic)), None)
    try:
        if kind == "gzip":
            out = zlib.decompressobj(wbits=31).decompress(payload, MAX_KERNEL)
        elif kind == "xz":
            out = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(payload, MAX_KERNEL)
        elif kind == "lzma":
            out = lzma.LZMADecompressor(format=lzma.FORMAT_ALONE).decompress(payload, MAX_KERNEL)
        elif kind == "bzip2":
            out = bz2.BZ2Decompressor().decompress(payload, MAX_KERNEL)
        elif kind == "zstd":
            out = _unzstd(payload[:-4], source)  # (without the size the build appends)
        else:
            raise BtfError(f"{source}: a kernel compressed with {kind or 'an unknown method'}: "
                           "its BTF is not read here")
    except (zlib.error, lzma.LZMAError, OSError, ValueError, EOFError) as exc:
        raise BtfError(f"{source}: its kernel does not decompress ({kind}: {exc})") from None
    if not out.startswith(ELF_MAGIC):
        raise BtfError(f"{source}: the decompressed kernel is not an ELF file")
    return out


def _unzstd(data: bytes, source: str) -> bytes:
    program = shutil.which("zstd")
    if program is None:
        raise BtfError(f"{source}: a zstd-compressed kernel, and no zstd program to read it "
                       "(apt-get install zstd)")
    done = subprocess.run([program, "-d", "-c", "-q"], input=data, capture_output=True, timeout=120)
    if done.returncode != 0 or len(done.stdout) > MAX_KERNEL:
        raise BtfError(f"{source}: zstd could not decompress its kernel: "
                       f"{done.stderr.decode(errors='replace').strip()[:100] or done.returncode}")
    return done.stdout


def elf_section(data: bytes, name: str, source: str = "image") -> bytes:
    """One section's bytes of a little-endian ELF64 file."""
    if len(data) < 64 or data[:4] != ELF_MAGIC or data[4] != 2 or data[5] != 1:
        raise BtfError(f"{source}: not a little-endian ELF64 kernel")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shentsize != _SECTION.size or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise BtfError(f"{source}: its kernel's section headers are not readable")
    sections = [_SECTION.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    names_at, names_size = sections[shstrndx][4], sections[shstrndx][5]
    names = data[names_at:names_at + names_size]
    wanted = name.encode()
    for sec in sections:
        end = names.find(b"\0", sec[0])
        if names[sec[0]:end] == wanted:
            offset, size = sec[4], sec[5]
            if offset + size > len(data):
                raise BtfError(f"{source}: its {name} section runs past the end of the kernel")
            return data[offset:offset + size]
    raise BtfError(f"{source}: its kernel has no {name} section (built without CONFIG_DEBUG_INFO_BTF?)")
