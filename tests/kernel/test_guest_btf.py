"""The BTF `ktui vm` reads on the host from a kernel's boot image, to check
names before it boots that kernel (btf/image.py, issue #29), is the BTF
that kernel shows once it runs: read from /boot/vmlinuz-$(uname -r) here,
in the guest, which sees the host's /boot, and compared byte for byte with
/sys/kernel/btf/vmlinux. 6.1 is xz-compressed, 6.12 zstd-compressed."""

from __future__ import annotations

import os
from pathlib import Path

from ktui.btf.image import btf_of_image
from ktui.lang.bind import bind_probe
from ktui.lang.spec import parse_probe_text
from ktui.vm.guest_btf import GuestNames, guest_btf_dir


def test_the_image_holds_the_btf_the_running_kernel_shows(tmp_path):
    release = os.uname().release
    from_image = btf_of_image(Path(f"/boot/vmlinuz-{release}"))
    running = Path("/sys/kernel/btf/vmlinux").read_bytes()
    assert len(from_image) > 1 << 20
    assert from_image == running


def test_names_bind_to_the_image_as_to_the_running_kernel(tmp_path):
    """The offsets a probe reads, bound on the host from the image, are the
    ones the running kernel's BTF gives."""
    from ktui.lang.kernel_names import KernelNames

    release = os.uname().release
    guest = GuestNames(guest_btf_dir(release, cache=tmp_path), release)
    text = "vfs_read:c:count,pos=file->f_pos,name=file->f_path.dentry->d_name.name:string"
    from_image = bind_probe(parse_probe_text(text), guest, text=text)
    running = bind_probe(parse_probe_text(text), KernelNames(), text=text)
    assert [f.expr.binding for f in from_image.fetches] == [f.expr.binding for f in running.fetches]
