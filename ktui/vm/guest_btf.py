"""The guest kernel's names, on the host, before `ktui vm` boots it.

`ktui vm stream -e 'vfs_read:c:cuont'` booted the VM (a minute or more
under emulation) before the guest said `vfs_read has no parameter 'cuont'`
(issue #29). The guest's BTF is read here from its boot image
(btf/image.py) and kept beside the VM's other files, keyed by the image's
size and time, so the next check reads a few MB instead of decompressing a
kernel; probes then bind against it as they will in the guest.

Only vmlinux's BTF is in the image: a function it does not describe may
be a module's, which the guest knows once the module is loaded. It is
refused here only when it looks like a typo (`typo`): no module of that
kernel exports it, and vmlinux has functions of close names; the message
says how to probe a module's function anyway (by position, which needs no
BTF). Anything else is left for the guest to check.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Callable

from ktui.btf.decode import BtfError
from ktui.btf.image import btf_of_image
from ktui.btf.index import KernelBtf
from ktui.kernel.symbols.modules import LIB_MODULES, ModuleTree
from ktui.lang.bind import NoPrototype
from ktui.lang.kernel_names import FoundPrototype, KernelNames
from ktui.vm.boot import BOOT
from ktui.vm.guest import run_dir

log = logging.getLogger(__name__)


class GuestNames:
    """`lang.bind.Kernel` over the guest kernel's vmlinux BTF. `unknown`:
    the functions it was asked about and does not describe (a module's, or
    a typo: the guest tells which)."""

    def __init__(self, btf_dir: Path, release: str, lib_modules: Path = LIB_MODULES) -> None:
        self.release = release
        self._names = KernelNames(KernelBtf(btf_dir, btf_dir / "notes"))
        self._modules = ModuleTree(lib_modules / release)
        self.unknown: set[str] = set()

    def problem(self) -> str | None:
        return self._names.problem()

    def prototype(self, function: str) -> FoundPrototype:
        try:
            return self._names.prototype(function)
        except NoPrototype as err:
            if err.unknown:
                self.unknown.add(function)
            raise

    def close_functions(self, name: str, limit: int = 3) -> list[str]:
        return self._names.close_functions(name, limit)

    def typo(self, function: str) -> bool:
        """An unknown function that is a typo rather than a module's: no
        module of this kernel exports it, and vmlinux has close names."""
        return (function in self.unknown and function not in self._modules.exported()
                and bool(self.close_functions(function)))


def guest_names(release: str | None, *, boot: Path = BOOT, cache: Path | None = None,
                say: Callable[[str], None] | None = None) -> GuestNames | None:
    """The names of the kernel `ktui vm` boots, or None when its BTF cannot
    be read here (why is logged; the guest checks the names then). `say`
    is told when the image is read (seconds, once per image)."""
    if not release:
        return None
    try:
        btf_dir = guest_btf_dir(release, boot=boot, cache=cache, say=say)
    except BtfError as exc:
        log.warning("names are checked in the VM: %s", exc)
        return None
    return GuestNames(btf_dir, release)


def guest_btf_dir(release: str, *, boot: Path = BOOT, cache: Path | None = None,
                  say: Callable[[str], None] | None = None) -> Path:
    """A directory holding the guest's BTF as `vmlinux` (as /sys/kernel/btf
    does): the copy kept from an earlier check, else read from the image."""
    image = boot / f"vmlinuz-{release}"
    try:
        info = image.stat()
    except OSError as exc:
        raise BtfError(f"{image}: {exc.strerror}") from None
    where = (cache if cache is not None else run_dir() / "btf") / f"{release}-{info.st_size}-{int(info.st_mtime)}"
    if (where / "vmlinux").is_file():
        return where
    if say is not None:
        say(f"reading {release}'s BTF from {image} to check names before booting it (once)")
    data = btf_of_image(image)
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=where, prefix=".vmlinux.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, where / "vmlinux")
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise BtfError(f"{where}: cannot keep the guest's BTF: {exc.strerror}") from None
    return where
