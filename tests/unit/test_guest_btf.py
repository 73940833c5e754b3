"""The guest kernel's BTF read on the host from its boot image (btf/image.py,
vm/guest_btf.py), and `ktui vm` refusing a name typo before it boots
(issue #29: `ktui vm stream -e` with a typo cost a boot of a minute or more
before the guest said so). The images here are made by the test: a
bzImage header, a compressed ELF kernel with a .BTF section; the
kernel test (tests/kernel/test_guest_btf.py) compares a real image's with
the running guest's /sys/kernel/btf/vmlinux."""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import ktui.vm
from ktui import cli
from ktui.btf.decode import BtfError, RawBtf
from ktui.btf.image import btf_of_image
from ktui.vm import guest_btf
from ktui.vm.guest_btf import GuestNames, guest_btf_dir
from tests.btfbuild import elf_module
from tests.unit.namedkernel import write_btf

RELEASE = "6.1.0-test"


def compressed(kernel: bytes, how: str) -> bytes:
    if how == "gzip":
        return gzip.compress(kernel)
    if how == "xz":
        return lzma.compress(kernel, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC32)
    if how == "lzma":
        return lzma.compress(kernel, format=lzma.FORMAT_ALONE)
    if how == "bzip2":
        return bz2.compress(kernel)
    if how == "zstd":  # as Debian's 6.12 is; Python has no zstd of its own
        return subprocess.run([shutil.which("zstd") or "zstd", "-q", "-c"], input=kernel,
                              capture_output=True, check=True).stdout
    raise AssertionError(how)


def bzimage(payload: bytes, setup_sects: int = 4) -> bytes:
    """A bzImage: the setup sectors (with the header's HdrS, setup_sects,
    payload_offset and payload_length), then the compressed kernel and the
    4-byte size the kernel's build appends."""
    payload += struct.pack("<I", 12345)
    setup = bytearray((setup_sects + 1) * 512)
    setup[0x1F1] = setup_sects
    setup[0x202:0x206] = b"HdrS"
    offset = 64  # the payload starts a little into the protected-mode code
    struct.pack_into("<II", setup, 0x248, offset, len(payload))
    return bytes(setup) + b"\x90" * offset + payload + b"\0" * 32


@pytest.fixture
def btf_blob(tmp_path) -> bytes:
    return (write_btf(tmp_path / "k") / "vmlinux").read_bytes()


@pytest.mark.parametrize("how", ["gzip", "xz", "lzma", "bzip2", "zstd"])
def test_the_btf_of_a_boot_image_for_each_compression(tmp_path, btf_blob, how):
    image = tmp_path / f"vmlinuz-{RELEASE}"
    image.write_bytes(bzimage(compressed(elf_module(["vfs_read"], btf_blob), how)))
    found = btf_of_image(image)
    assert found == btf_blob
    assert RawBtf(found).funcs_named("vfs_read")


@pytest.mark.parametrize("image, words", [
    (b"\0" * 4096, "not a bzImage"),
    (bzimage(b"\x02\x21\x4c\x18" + b"\0" * 64), "compressed with lz4"),
    (bzimage(gzip.compress(elf_module(["vfs_read"]))), "no .BTF section"),
    (bzimage(gzip.compress(b"not an elf")), "not an ELF file"),
    (bzimage(b"\xfd7zXZ\x00broken"), "does not decompress"),
])
def test_what_cannot_be_read_is_one_line(tmp_path, image, words):
    path = tmp_path / "vmlinuz-x"
    path.write_bytes(image)
    with pytest.raises(BtfError) as err:
        btf_of_image(path)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_btf_read_from_an_image_is_kept_for_the_next_check(tmp_path, btf_blob, monkeypatch):
    boot, cache = tmp_path / "boot", tmp_path / "cache"
    boot.mkdir()
    (boot / f"vmlinuz-{RELEASE}").write_bytes(bzimage(compressed(elf_module([], btf_blob), "xz")))
    told: list[str] = []
    first = guest_btf_dir(RELEASE, boot=boot, cache=cache, say=told.append)
    assert (first / "vmlinux").read_bytes() == btf_blob
    assert told == [f"reading {RELEASE}'s BTF from {boot}/vmlinuz-{RELEASE} to check names before "
                    "booting it (once)"]

    def no_second_read(path):
        raise AssertionError("the image was read again")

    monkeypatch.setattr(guest_btf, "btf_of_image", no_second_read)
    assert guest_btf_dir(RELEASE, boot=boot, cache=cache, say=told.append) == first
    assert len(told) == 1  # kept: nothing to say the second time
    assert guest_btf.guest_names(RELEASE, boot=boot, cache=cache) is not None
    assert guest_btf.guest_names("6.9.9-missing", boot=boot, cache=cache) is None  # no image: the guest checks


# ---------------------------------------------------------------- ktui vm


@pytest.fixture
def boots(monkeypatch, tmp_path) -> list[list[str]]:
    """`ktui vm` against a guest kernel whose BTF is tests/unit/namedkernel's
    (vfs_read, do_sys_openat2, ... and mymod's mymod_open), with a module
    tree exporting xfs_file_read_iter: the VMs it would have booted."""
    lib_modules = tmp_path / "lib/modules"
    (lib_modules / RELEASE).mkdir(parents=True)
    (lib_modules / RELEASE / "modules.symbols").write_text("alias symbol:vfs_readx xfs\n")
    btf_dir = write_btf(tmp_path / "guest")
    (btf_dir / "mymod").unlink()  # an image holds vmlinux's BTF only
    monkeypatch.setattr(cli, "_guest_names", lambda kernel: GuestNames(btf_dir, RELEASE, lib_modules))
    started: list[list[str]] = []
    monkeypatch.setattr(ktui.vm, "run_in_vm", lambda argv, kernel=None, workload=True: started.append(argv) or 0)
    return started


def run(*args):
    return CliRunner().invoke(cli.main, list(args))


@pytest.mark.parametrize("spec, col, words", [
    ("vfs_read:c:cuont", 12, "vfs_read has no parameter 'cuont' (did you mean count?)"),
    ("vfs_read:c:file->f_pso", 18, "struct file has no member 'f_pso'"),
    ("vfs_raed:c:count", 1, "unknown kernel function 'vfs_raed' (did you mean vfs_read"),
    ("vfs_read:c:a3 if cuont > 1", 18, "no parameter 'cuont'"),
])
def test_a_name_typo_is_refused_before_the_vm_boots(boots, spec, col, words):
    r = run("vm", "stream", "-e", "ok=vfs_read:c:count", "-e", spec, "--duration", "1")
    assert r.exit_code == 1, r.output
    assert r.output.startswith(f"ktui: -e #2:{col}: ") and words in r.output, r.output
    assert f"(in {RELEASE}, the kernel ktui vm boots" in r.output and r.output.count("\n") == 1
    assert boots == []


@pytest.mark.parametrize("spec", [
    "vfs_read:c:count,file->f_pos",
    "vfs_readx:c:len",  # not in vmlinux's BTF: a module exports it; the guest checks it
    "nothing_like_it:c:arg",  # no close name either: maybe a module's static function
    "vfs_raed:c:a3",  # by position: no BTF needed (the guest checks the function)
])
def test_what_may_be_right_in_the_guest_boots_it(boots, spec):
    r = run("vm", "stream", "-e", spec, "--duration", "1")
    assert r.exit_code == 0, r.output
    assert boots == [["stream", "-e", spec, "--duration", "1"]]


def test_a_probe_set_is_checked_against_the_guest_kernel(boots, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nprobes:\n  - spec: vfs_read:c:count\n  - spec: vfs_read:c:cuont\n"
                   "  - spec: vfs_raed:c:count\n")
    r = run("vm", "stream", str(bad), "--duration", "1")
    assert r.exit_code == 1 and r.output.startswith(f"ktui: {bad}:4:22: ") and r.output.count("\n") == 1
    r = run("vm", "check", str(bad))
    assert r.exit_code == 1
    assert [line.split(": ")[0] for line in r.output.splitlines()] == [f"{bad}:4:22", f"{bad}:5:11"]
    assert "no parameter 'cuont'" in r.output and "unknown kernel function 'vfs_raed'" in r.output
    assert run("vm", "probesets/vfs.yaml").exit_code == 0  # every name there is the guest's
    assert boots == [["run", "probesets/vfs.yaml"]]


def test_without_the_guest_kernels_btf_names_are_left_to_the_guest(boots, monkeypatch):
    monkeypatch.setattr(cli, "_guest_names", lambda kernel: None)
    assert run("vm", "stream", "-e", "vfs_read:c:cuont").exit_code == 0
    assert boots == [["stream", "-e", "vfs_read:c:cuont"]]
