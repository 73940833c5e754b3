"""The running kernel's BTF: every function's prototype, vmlinux and modules.

`KernelBtf` opens /sys/kernel/btf lazily. Its function table (name ->
rendered prototype) is what `ktui list` and the name checks need; for
vmlinux it comes from the build-id keyed cache when one is there. Lookups
by name for fetches (`function()`, `access()`) walk the blob they need.

A kernel without BTF is not an error here: `problem()` says why in one
line and everything else answers "nothing known".
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ktui.btf.cache import FunctionCache
from ktui.btf.decode import BtfError, RawBtf
from ktui.btf.render import Renderer
from ktui.btf.sysfs import BTF_DIR, NOTES, build_id, module_names, read_blob

if TYPE_CHECKING:
    from ktui.btf.access import Access

log = logging.getLogger(__name__)


class FunctionTable:
    """Prototypes by function name; module functions say their module.
    `ambiguous`: names BTF describes more than once, differently (static
    functions of different files; older pahole kept both): the prototype
    shown is the first, and named arguments cannot be trusted there."""

    def __init__(self, vmlinux: dict[str, str], modules: dict[str, tuple[str, str]],
                 ambiguous: set[str] | frozenset[str] = frozenset()) -> None:
        self.vmlinux = vmlinux
        self.modules = modules
        self.ambiguous = ambiguous

    def __len__(self) -> int:
        return len(self.vmlinux) + len(self.modules)

    def __contains__(self, name: str) -> bool:
        return name in self.vmlinux or name in self.modules

    def prototype(self, name: str) -> str | None:
        found = self.vmlinux.get(name)
        if found is None and name in self.modules:
            found = self.modules[name][1]
        return found

    def module(self, name: str) -> str | None:
        """The module whose BTF describes `name`; None for vmlinux or unknown."""
        entry = self.modules.get(name)
        return entry[0] if entry is not None and name not in self.vmlinux else None

    def names(self) -> set[str]:
        return set(self.vmlinux) | set(self.modules)


class KernelBtf:
    def __init__(self, btf_dir: Path = BTF_DIR, notes: Path = NOTES,
                 cache: FunctionCache | None = None) -> None:
        """`cache` None: no cache (tests, or `--no-cache`)."""
        self.btf_dir = btf_dir
        self.notes = notes
        self.cache = cache
        self.warnings: list[str] = []  # module BTF that could not be read, one line each
        self._vmlinux: RawBtf | None = None
        self._modules: dict[str, RawBtf] = {}
        self._renderers: dict[str, Renderer] = {}
        self._table: FunctionTable | None = None
        self._by_name: dict[tuple[str, str], list[int]] = {}

    @property
    def vmlinux_path(self) -> Path:
        return self.btf_dir / "vmlinux"

    def problem(self) -> str | None:
        """Why there is no BTF to use, in one line; None when there is."""
        path = self.vmlinux_path
        if not path.exists():
            return (f"no BTF: {path} is missing (a kernel built without CONFIG_DEBUG_INFO_BTF); "
                    "prototypes are unknown, positional fetches (a1..a6) still work")
        if not os.access(path, os.R_OK):
            return f"no BTF: {path} is not readable by this user"
        return None

    # ------------------------------------------------------------ blobs
    def vmlinux(self) -> RawBtf:
        if self._vmlinux is None:
            self._vmlinux = RawBtf(read_blob(self.vmlinux_path), source=str(self.vmlinux_path))
        return self._vmlinux

    def module(self, name: str) -> RawBtf:
        """A loaded module's split BTF on top of vmlinux's (BtfError if none)."""
        found = self._modules.get(name)
        if found is None:
            if name == "vmlinux" or "/" in name or name.startswith("."):
                raise BtfError(f"{name!r} is not a module name")
            path = self.btf_dir / name
            found = self._modules[name] = RawBtf(read_blob(path), base=self.vmlinux(), source=str(path))
        return found

    def renderer(self, module: str | None = None) -> Renderer:
        key = module or "vmlinux"
        found = self._renderers.get(key)
        if found is None:
            blob = self.module(module) if module else self.vmlinux()
            found = self._renderers[key] = Renderer(blob)
        return found

    def access(self, module: str | None = None) -> "Access":
        """Parameter and member lookups in vmlinux's (or a module's) types."""
        from ktui.btf.access import Access

        return Access(self.module(module) if module else self.vmlinux(), self.renderer(module))

    # ------------------------------------------------------------ functions
    def function(self, name: str, module: str | None = None) -> tuple[RawBtf, int] | None:
        """The BTF and (first) FUNC id describing `name`, or None."""
        ids = self.function_ids(name, module)
        if not ids:
            return None
        return (self.module(module) if module else self.vmlinux()), ids[0]

    def function_ids(self, name: str, module: str | None = None) -> list[int]:
        """Every FUNC id called `name` in vmlinux's (or a module's own) BTF:
        static functions of different files may share a name."""
        key = (module or "vmlinux", name)
        ids = self._by_name.get(key)
        if ids is None:
            blob = self.module(module) if module else self.vmlinux()
            ids = self._by_name[key] = blob.funcs_named(name)
        return list(ids)

    def table(self, modules: bool = True) -> FunctionTable:
        """Every function's prototype, from the cache where it has them.
        BtfError only for vmlinux's BTF; a module whose BTF cannot be read
        is left out with a warning."""
        if self._table is None or (modules and not self._table.modules and module_names(self.btf_dir)):
            vmlinux, ambiguous = self._vmlinux_table()
            mods: dict[str, tuple[str, str]] = {}
            if modules:
                mods, mod_ambiguous = self._module_table()
                ambiguous = ambiguous | mod_ambiguous
            self._table = FunctionTable(vmlinux, mods, ambiguous)
        return self._table

    def cache_key(self) -> str | None:
        bid = build_id(self.notes)
        if bid is None:
            return None
        try:
            size = os.stat(self.vmlinux_path).st_size
        except OSError:
            return None
        return f"{bid}-{size}"

    def _vmlinux_table(self) -> tuple[dict[str, str], set[str]]:
        key = self.cache_key() if self.cache is not None else None
        if key is not None and self.cache is not None:
            cached = self.cache.load("vmlinux", key)
            if cached is not None:
                return cached
        table, ambiguous = functions_of(self.renderer())
        if key is not None and self.cache is not None:
            self.cache.store("vmlinux", key, table, ambiguous)
        return table, ambiguous

    def _module_table(self) -> tuple[dict[str, tuple[str, str]], set[str]]:
        """Every loaded module's functions. Cached as one entry keyed by a
        hash of all their BTF: walking 53 modules' BTF again cost 3 s of a
        4-second listing in the VM."""
        blobs: dict[str, bytes] = {}
        for mod in module_names(self.btf_dir):
            try:
                blobs[mod] = read_blob(self.btf_dir / mod)
            except BtfError as exc:
                self.warnings.append(f"module BTF left out: {exc}")
        key = self._modules_key(blobs) if self.cache is not None else None
        if key is not None and self.cache is not None:
            cached = self.cache.load("modules", key)
            if cached is not None:
                flat, ambiguous = cached
                return {n.partition(":")[2]: (n.partition(":")[0], p) for n, p in flat.items()}, ambiguous
        mods: dict[str, tuple[str, str]] = {}
        ambiguous: set[str] = set()
        for mod, data in blobs.items():
            try:
                blob = self._modules.get(mod) or RawBtf(data, base=self.vmlinux(),
                                                        source=str(self.btf_dir / mod))
            except BtfError as exc:
                self.warnings.append(f"module BTF left out: {exc}")
                continue
            self._modules[mod] = blob
            table, amb = functions_of(self.renderer(mod))
            ambiguous |= amb
            for name, proto in table.items():
                mods.setdefault(name, (mod, proto))
        if key is not None and self.cache is not None and not self.warnings:
            self.cache.store("modules", key, {f"{m}:{n}": p for n, (m, p) in mods.items()}, ambiguous)
        return mods, ambiguous

    def _modules_key(self, blobs: dict[str, bytes]) -> str | None:
        base = self.cache_key()
        if base is None:
            return None
        digest = hashlib.blake2b(base.encode(), digest_size=20)
        for mod in sorted(blobs):
            digest.update(b"\0%s\0%d\0" % (mod.encode(), len(blobs[mod])))
            digest.update(blobs[mod])
        return f"{digest.hexdigest()}-{len(blobs)}"


def functions_of(render: Renderer) -> tuple[dict[str, str], set[str]]:
    """name -> prototype for one blob's own FUNCs, and the names it
    describes more than once with different prototypes."""
    blob = render.btf
    table: dict[str, str] = {}
    first_proto: dict[str, int] = {}
    ambiguous: set[str] = set()
    words, starts, first = blob.words, blob.starts, blob.first_id
    for fid in blob.func_ids:
        name = blob.name_of(fid)
        proto = words[starts[fid - first] + 2]
        seen = first_proto.get(name)
        if seen is None:
            first_proto[name] = proto
            table[name] = render.prototype(fid)
        elif seen != proto and render.prototype(fid) != table[name]:
            ambiguous.add(name)
    return table, ambiguous
