"""Which kernel functions can be probed, and if not, why: `ktui list`.

Every function comes with one verdict, from the files that decide it:

    traceable    in kallsyms and available_filter_functions, not blacklisted:
                 a kprobe and an fentry program both attach
    kprobe-only  a symbol, but not in available_filter_functions (notrace,
                 or no fentry call site): an int3 kprobe may still work
    blacklisted  on the kprobe blacklist: the kernel refuses kprobes there
    copy-only    no symbol of its own, but compiler copies of it have one
                 (`name.isra.0`): probe a copy
    no-symbol    BTF knows the function, nothing in kallsyms has its name:
                 it was inlined into its callers, or it is init code that
                 was freed once the kernel or its module had started
    not-loaded   in a module that is not loaded (modprobe it first)
    unchecked    a symbol, but available_filter_functions could not be read

A copy (`.constprop.N`, `.isra.N`, `.part.N`, `.cold`) is listed under its
own name with its own verdict and a note: its BTF prototype is the original
function's, and the copy's real arguments may differ (dropped, reordered,
passed in pieces), so only positional fetches make sense on it. A `.cold`
copy is the unlikely tail of a function, not an entry point at all.

Functions of modules that are not loaded are listed only for a pattern
naming the module (`xfs:*`): reading every module file on disk for `*`
would cost far more than the listing. An exact name is still looked up in
modules.symbols (exported symbols of every module) so that "not loaded"
beats "unknown".
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import NamedTuple

from ktui.btf.decode import BtfError, RawBtf
from ktui.btf.index import FunctionTable, KernelBtf
from ktui.btf.render import Renderer
from ktui.kernel.ftrace import FILTER_FUNCTIONS, read_filter_functions
from ktui.kernel.ksyms import NOT_FUNCTIONS, KernelSymbols, close_names, copy_of
from ktui.kernel.modules import (
    SYS_MODULE, ModuleFileError, ModuleTree, loaded_modules, read_module_file,
)

VERDICTS = ("traceable", "kprobe-only", "blacklisted", "copy-only", "no-symbol", "not-loaded",
            "unchecked")
GLOB_CHARS = re.compile(r"[*?\[]")


class CatalogError(Exception):
    """A pattern that cannot be listed; one line. `usage`: the pattern is
    malformed (rather than naming something that does not exist)."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


class Entry(NamedTuple):
    name: str
    verdict: str
    module: str  # "" for vmlinux
    prototype: str  # "" when BTF does not describe it
    copy_of: str  # the original, for a compiler copy; else ""
    note: str
    symbols: int  # how many kallsyms entries carry this name


_DEFAULT = object()


class Sources:
    """Where each fact comes from; every one is replaceable for tests.
    `btf` None: no BTF at all."""

    def __init__(self, *, symbols: KernelSymbols | None = None, btf: KernelBtf | None | object = _DEFAULT,
                 filter_functions: tuple[Path, ...] = FILTER_FUNCTIONS,
                 modules: ModuleTree | None = None, sys_module: Path = SYS_MODULE) -> None:
        self.symbols = symbols if symbols is not None else KernelSymbols()
        self.btf: KernelBtf | None = KernelBtf() if btf is _DEFAULT else btf  # type: ignore[assignment]
        self.filter_functions = filter_functions
        self.modules = modules if modules is not None else ModuleTree.running()
        self.sys_module = sys_module


class Catalog:
    def __init__(self, sources: Sources | None = None) -> None:
        self.src = sources or Sources()
        self._filterable: frozenset[str] | None = None
        self._filter_problem: str | None = None
        self._table: FunctionTable | None = None
        self._btf_problem: str | None = None
        self._copies: dict[str, list[str]] | None = None
        self._loaded: set[str] | None = None

    # ------------------------------------------------------------ sources
    def filterable(self) -> frozenset[str] | None:
        if self._filter_problem is None:
            self._filterable, self._filter_problem = read_filter_functions(self.src.filter_functions)
        return self._filterable

    def table(self) -> FunctionTable:
        """BTF's prototypes (empty, with `btf_problem()` saying why, without BTF)."""
        if self._table is None:
            btf = self.src.btf
            problem = "no BTF source" if btf is None else btf.problem()
            table = FunctionTable({}, {})
            if problem is None and btf is not None:
                try:
                    table = btf.table()
                except BtfError as exc:
                    problem = f"no BTF: {exc}"
            self._btf_problem = problem
            self._table = table
        return self._table

    def btf_problem(self) -> str | None:
        self.table()
        return self._btf_problem

    def not_checked(self) -> list[str]:
        """One line per fact that could not be read, saying what it costs."""
        lines = []
        if self.src.symbols.error or not self.src.symbols.available:
            why = self.src.symbols.error or "no function symbols in it"
            lines.append(f"not checked: which functions have a symbol (kallsyms: {why})")
        if self.filterable() is None:
            lines.append(f"not checked: fentry, so kprobe-only vs traceable "
                         f"(available_filter_functions: {self._filter_problem})")
        if self.src.symbols.blacklist() is None:
            lines.append(f"not checked: the kprobe blacklist ({self.src.symbols.blacklist_path} "
                         "unreadable: debugfs not mounted, or not root)")
        problem = self.btf_problem()
        if problem:
            lines.append(problem)
        lines.extend(self.src.btf.warnings if self.src.btf is not None else [])
        return lines

    def copies(self) -> dict[str, list[str]]:
        """original -> its copies that have symbols."""
        if self._copies is None:
            out: dict[str, list[str]] = {}
            for name in [n for n in self.src.symbols.names() if "." in n]:
                c = copy_of(name)
                if c is not None:
                    out.setdefault(c[0], []).append(name)
            self._copies = out
        return self._copies

    def loaded(self) -> set[str]:
        if self._loaded is None:
            self._loaded = loaded_modules(self.src.sys_module)
        return self._loaded

    # ------------------------------------------------------------ verdicts
    def entry(self, name: str) -> Entry | None:
        """The verdict on one function name; None if nothing knows it."""
        found = self._entries([name])
        if found:
            return found[0]
        exported = self.src.modules.exported().get(name)
        if exported is not None and exported not in self.loaded():
            return Entry(name, "not-loaded", exported, "", "", "module not loaded", 0)
        return None

    def list(self, patterns: list[str] | tuple[str, ...]) -> list[Entry]:
        """Every function matching any of the shell globs, sorted by name.
        `MODULE:GLOB` limits a pattern to one module (`vmlinux:` to the
        kernel itself), loaded or not."""
        plain: list[str] = []
        scoped: dict[str, list[str]] = {}
        for pat in patterns:
            if not pat:
                raise CatalogError("an empty pattern matches nothing; use '*' for every function",
                                   usage=True)
            mod, sep, glob = pat.rpartition(":")
            if sep:
                if not mod or not glob:
                    raise CatalogError(f"{pat!r}: expected MODULE:PATTERN, e.g. xfs:xfs_file_*",
                                       usage=True)
                scoped.setdefault(mod.replace("-", "_"), []).append(glob)
            else:
                plain.append(pat)
        entries: dict[str, Entry] = {}
        if plain:
            for e in self._entries(self._matching(self._universe(), plain)):
                entries[e.name] = e
            for pat in plain:  # an exact name nothing else knows: maybe an unloaded module's
                if not GLOB_CHARS.search(pat) and pat not in entries:
                    e = self.entry(pat)
                    if e is not None:
                        entries[e.name] = e
        for mod, globs in scoped.items():
            for e in self._module_entries(mod, globs):
                entries[e.name] = e
        return [entries[k] for k in sorted(entries)]

    def _universe(self) -> set[str]:
        """Symbols, BTF's functions, and originals known only from their copies."""
        names = set(self.src.symbols.names())
        names.update(self.table().names())
        names.update(self.copies())
        return names

    @staticmethod
    def _matching(names, patterns: list[str]) -> list[str]:
        if "*" in patterns:
            return list(names)
        rx = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))
        return [n for n in names if rx.match(n)]

    def _entries(self, names: list[str]) -> list[Entry]:
        """Verdicts for names from kallsyms, BTF or copies: the hot loop of
        `ktui list '*'` (55,000 names on 6.1). The common case, a plain
        symbol, takes the first branch; entries are made with
        tuple.__new__, a third of what calling the NamedTuple costs."""
        symbols = self.src.symbols
        kallsyms = symbols.names()
        table = self.table()
        vm_protos, mod_protos = table.vmlinux, table.modules
        aff = self.filterable()
        blacklist = symbols.blacklist() or frozenset()
        shared = symbols.shared()
        unchecked = aff is None
        aff = aff or frozenset()
        new = tuple.__new__
        out = []
        for name in names:
            mod = kallsyms.get(name)
            if mod is not None and "." not in name and name not in shared and name not in blacklist:
                proto = vm_protos.get(name)
                if proto is None and name in mod_protos:
                    proto = mod_protos[name][1]
                verdict = "unchecked" if unchecked else "traceable" if name in aff else "kprobe-only"
                out.append(new(Entry, (name, verdict, mod, proto or "", "", "", 1)))
            elif mod is not None:
                out.append(self._symbol_entry(name, mod, vm_protos, mod_protos, aff, unchecked,
                                              blacklist, shared))
            else:
                found = self._no_symbol_entry(name, vm_protos, mod_protos)
                if found is not None:
                    out.append(found)
        return out

    def _symbol_entry(self, name, mod, vm_protos, mod_protos, aff, unchecked, blacklist,
                      shared) -> Entry:
        """A symbol that is a copy, shared, or blacklisted."""
        proto = vm_protos.get(name) or (mod_protos[name][1] if name in mod_protos else "")
        if name in blacklist:
            verdict = "blacklisted"
        else:
            verdict = "unchecked" if unchecked else "traceable" if name in aff else "kprobe-only"
        original = note = ""
        c = copy_of(name) if "." in name else None
        if c is not None:
            original = c[0]
            if not proto:
                proto = vm_protos.get(original) or (mod_protos[original][1]
                                                    if original in mod_protos else "")
            note = (f"cold part of {original}, not an entry: no arguments"
                    if c[1].startswith(".cold") else
                    f"copy of {original}: BTF shows its arguments; positional fetches only")
        count = shared.get(name, 1)
        if count > 1:
            note = (note + "; " if note else "") + f"{count} symbols share this name"
        return Entry(name, verdict, mod, proto, original, note, count)

    def _no_symbol_entry(self, name, vm_protos, mod_protos) -> Entry | None:
        """A name without a symbol of its own: known from its copies or from BTF."""
        proto = vm_protos.get(name) or (mod_protos[name][1] if name in mod_protos else "")
        found = self.copies().get(name)
        if found:
            module = self.src.symbols.module(found[0]) or ""
            shown = ", ".join(sorted(found)[:3]) + (", ..." if len(found) > 3 else "")
            return Entry(name, "copy-only", module, proto, "",
                         f"no symbol of its own; probe a copy: {shown}", 0)
        if name in vm_protos or name in mod_protos:
            module = "" if name in vm_protos else mod_protos[name][0]
            return Entry(name, "no-symbol", module, proto, "",
                         "inlined into its callers, or init code freed after loading", 0)
        return None

    # ------------------------------------------------------------ one module
    def _module_entries(self, module: str, globs: list[str]) -> list[Entry]:
        if module == "vmlinux":
            names = [n for n in self._universe()
                     if self.src.symbols.module(n) == "" or
                     (self.src.symbols.module(n) is None and n in self.table().vmlinux)]
            return self._entries(self._matching(names, globs))
        if module in self.loaded():
            kallsyms = self.src.symbols.names()
            names = [n for n, m in kallsyms.items() if m == module and not n.startswith(NOT_FUNCTIONS)]
            names += [n for n, (m, _p) in self.table().modules.items() if m == module and n not in kallsyms]
            return self._entries(self._matching(names, globs))
        files = self.src.modules.files()
        path = files.get(module)
        if path is None:
            close = close_names(module, set(files) | self.loaded(), cutoff=0.6)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise CatalogError(f"no module named {module!r}{hint}: not loaded, and not in "
                               f"{self.src.modules.root}/modules.dep")
        try:
            mf = read_module_file(path)
        except ModuleFileError as exc:
            raise CatalogError(str(exc)) from None
        render = self._module_renderer(mf.btf, path)
        protos: dict[str, str] = {}
        if render is not None:
            for fid in render.btf.func_ids:
                protos.setdefault(render.btf.name_of(fid), render.prototype(fid))
        names = [n for n in mf.functions if not n.startswith(NOT_FUNCTIONS)]
        out = []
        for name in self._matching(names, globs):
            c = copy_of(name) if "." in name else None
            original = c[0] if c else ""
            proto = protos.get(name) or protos.get(original, "")
            note = "module not loaded"
            if c:
                note += f"; copy of {original}: positional fetches only"
            out.append(Entry(name, "not-loaded", module, proto, original, note, 0))
        return out

    def _module_renderer(self, btf: bytes | None, path: Path) -> Renderer | None:
        base = self.src.btf
        if btf is None or base is None or base.problem() is not None:
            return None
        try:
            return Renderer(RawBtf(btf, base=base.vmlinux(), source=f"{path} .BTF"))
        except BtfError as exc:
            base.warnings.append(f"module BTF left out: {exc}")
            return None
