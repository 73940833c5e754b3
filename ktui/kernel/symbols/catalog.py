"""Which kernel functions can be probed, and if not, why: `ktui list`.

Every function comes with one verdict, from the files that decide it:

    traceable    in kallsyms and available_filter_functions, not blacklisted:
                 a kprobe and an fentry program both attach
    notrace      a symbol, but not in available_filter_functions, and this
                 kernel's kprobe events refuse such functions (built with
                 CONFIG_KPROBES_ON_FTRACE and without
                 CONFIG_KPROBE_EVENTS_ON_NOTRACE, as Debian's are: see
                 ktui/kernel/symbols/kconfig.py); also when the config is unknown
    kprobe-only  the same, on a kernel whose kprobe events take notrace
                 functions: an int3 kprobe works, fentry does not
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
import operator
import re
from collections import Counter
from itertools import repeat
from pathlib import Path
from typing import NamedTuple

from ktui.btf.decode import BtfError, RawBtf
from ktui.btf.index import FunctionTable, KernelBtf
from ktui.btf.render import Renderer
from ktui.kernel.symbols.ftrace import FILTER_FUNCTIONS, read_filter_functions
from ktui.kernel.symbols.kconfig import config_paths, kprobe_events_refuse_notrace, read_config
from ktui.kernel.symbols.ksyms import NOT_FUNCTIONS, KernelSymbols, close_names, copy_of
from ktui.kernel.symbols.modules import (
    SYS_MODULE, ModuleFileError, ModuleTree, loaded_modules, read_module_file,
)

VERDICTS = ("traceable", "notrace", "kprobe-only", "blacklisted", "copy-only", "no-symbol",
            "not-loaded", "unchecked")
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
                 modules: ModuleTree | None = None, sys_module: Path = SYS_MODULE,
                 kernel_config: tuple[Path, ...] | None = None) -> None:
        self.symbols = symbols if symbols is not None else KernelSymbols()
        self.btf: KernelBtf | None = KernelBtf() if btf is _DEFAULT else btf  # type: ignore[assignment]
        self.filter_functions = filter_functions
        self.modules = modules if modules is not None else ModuleTree.running()
        self.sys_module = sys_module
        self.kernel_config = kernel_config if kernel_config is not None else config_paths()


class Catalog:
    def __init__(self, sources: Sources | None = None) -> None:
        self.src = sources or Sources()
        self._filterable: frozenset[str] | None = None
        self._filter_problem: str | None = None
        self._table: FunctionTable | None = None
        self._btf_problem: str | None = None
        self._copies: dict[str, list[str]] | None = None
        self._loaded: set[str] | None = None
        self._notrace: tuple[bool | None, str] | None = None
        self._names: set[str] | None = None  # _universe, once built

    # ------------------------------------------------------------ sources
    def filterable(self) -> frozenset[str] | None:
        if self._filter_problem is None:
            self._filterable, self._filter_problem = read_filter_functions(self.src.filter_functions)
        return self._filterable

    def notrace_refused(self) -> bool | None:
        """Do kprobe events refuse functions ftrace does not know? None: no
        kernel config to tell."""
        if self._notrace is None:
            config, looked = read_config(self.src.kernel_config)
            self._notrace = kprobe_events_refuse_notrace(config), looked
        return self._notrace[0]

    def notrace_note(self) -> str:
        if self.notrace_refused() is None:
            return "kprobe events refuse it unless the kernel has CONFIG_KPROBE_EVENTS_ON_NOTRACE=y"
        return ""

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
            problem = self._filter_problem or "?"
            where = f"available_filter_functions {problem}" if problem.startswith("not found") else problem
            lines.append(f"not checked: which functions fentry can attach to ({where}); verdicts "
                         "say unchecked, not traceable or kprobe-only")
        if self.src.symbols.blacklist() is None:
            lines.append(f"not checked: the kprobe blacklist ({self.src.symbols.blacklist_path} "
                         "unreadable: debugfs not mounted, or not root)")
        if self.filterable() is not None and self.notrace_refused() is None:
            lines.append("not checked: whether kprobe events refuse notrace functions (no kernel "
                         f"config in {self._notrace[1] if self._notrace else '?'}); said they do")
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
        parts: list[list[Entry]] = []
        if plain:
            universe = self._universe()
            parts.append(self._entries(sorted(self._matching(universe, plain))))
            for pat in plain:  # an exact name nothing else knows: maybe an unloaded module's
                if not GLOB_CHARS.search(pat) and pat not in universe:
                    e = self.entry(pat)
                    if e is not None:
                        parts.append([e])
        for mod, globs in scoped.items():
            parts.append(self._module_entries(mod, globs))
        if len(parts) == 1:
            return parts[0]  # `ktui list '*'`: already sorted and unique
        merged = {e[0]: e for part in parts for e in part}
        return [merged[k] for k in sorted(merged)]

    def text(self, patterns: list[str] | tuple[str, ...]) -> tuple[list[str], Counter] | None:
        """`ktui list`'s lines and verdict counts for plain globs, computed in
        bulk: the same verdicts as list() gives (a test holds the two
        together), but the common case, a plain symbol, never passes
        through a Python loop: set algebra picks the names that need
        list()'s care, map() over dict.get builds every other line in C.
        Entries one by one cost 2.7 s of the listing in the VM. None for
        patterns this does not cover (MODULE:GLOB, a name only an unloaded
        module knows): then use list()."""
        from ktui.kernel.symbols.catalog_text import VERDICT_WIDTH, entry_line

        if any(":" in p or not p for p in patterns):
            return None
        universe = self._universe()
        if any(not GLOB_CHARS.search(p) and p not in universe for p in patterns):
            return None
        names = sorted(self._matching(universe, list(patterns)))
        symbols = self.src.symbols
        kallsyms = symbols.names()
        table = self.table()
        aff = self.filterable()
        blacklist = symbols.blacklist() or frozenset()
        wanted = set(names)
        # Names that need list()'s care: no symbol of their own, copies,
        # shared, blacklisted, ambiguous in BTF, notrace with a note.
        dotted = re.findall(r"^[^\n.]*\.[^\n]*$", "\n".join(names), re.M)
        careful = wanted - kallsyms.keys()
        careful.update(dotted)
        careful.update(wanted & (symbols.shared().keys() | blacklist | table.ambiguous))
        if aff is not None and self.notrace_note():
            careful.update((wanted & kallsyms.keys()) - aff)
        pad = {v: f"{v:<{VERDICT_WIDTH}} " for v in VERDICTS}
        counts: Counter = Counter()
        if aff is None:
            default, prefix = pad["unchecked"], {}
        else:
            notrace = (wanted & kallsyms.keys()) - aff - careful
            word = "kprobe-only" if self.notrace_refused() is False else "notrace"
            default, prefix = pad["traceable"], dict.fromkeys(notrace, pad[word])
            counts[word] = len(notrace)
        counts["unchecked" if aff is None else "traceable"] = len(wanted) - len(careful) - len(prefix)
        vm_protos, mod_protos = table.vmlinux, table.modules
        shown = dict(vm_protos)
        for n, m in symbols.module_functions().items():
            shown[n] = f"{m}:{vm_protos.get(n) or (mod_protos[n][1] if n in mod_protos else n)}"
        lines = list(map(operator.add, map(prefix.get, names, repeat(default)),
                         map(shown.get, names, names)))
        special = self._entries(sorted(careful))
        counts.update(e[1] for e in special)
        lines = list(map({e[0]: entry_line(e) for e in special}.get, names, lines))
        return lines, +counts

    def _universe(self) -> set[str]:
        """Symbols, BTF's functions, and originals known only from their copies."""
        if self._names is None:
            names = set(self.src.symbols.names())
            names.update(self.table().names())
            names.update(self.copies())
            self._names = names
        return self._names

    def unmatched(self, patterns: list[str] | tuple[str, ...]) -> list[str]:
        """The plain patterns (not MODULE:GLOB) that name no function: an
        exact name nothing knows (not even an unloaded module), a glob that
        matches none. `ktui list vfs_read vfs_raed` must not drop the typo."""
        universe = self._universe()
        out = []
        for pat in patterns:
            if ":" in pat or not pat:
                continue
            if not GLOB_CHARS.search(pat):
                if pat not in universe and self.entry(pat) is None:
                    out.append(pat)
                continue
            rx = re.compile(fnmatch.translate(pat))
            if not any(map(rx.match, universe)):
                out.append(pat)
        return out

    @staticmethod
    def _matching(names, patterns: list[str]) -> list[str]:
        if "*" in patterns:
            return list(names)
        rx = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))
        return [n for n in names if rx.match(n)]

    def symbol_names(self) -> set[str]:
        """What is known without BTF: every function symbol, and the
        originals known from their copies (the function browser's first
        screen, before BTF's prototypes are read)."""
        names = set(self.src.symbols.names())
        names.update(self.copies())
        return names

    def quick_entry(self, name: str) -> Entry | None:
        """The verdict on one name from kallsyms, ftrace and the blacklist
        alone (no prototype, nothing BTF would add): cheap once `prepare_quick`
        has read those files."""
        found = self._entries([name], FunctionTable({}, {}))
        return found[0] if found else None

    def prepare_quick(self) -> None:
        """Read what `quick_entry` needs (off the UI thread)."""
        self.src.symbols.names()
        self.src.symbols.blacklist()
        self.src.symbols.shared()
        self.filterable()
        self.notrace_refused()
        self.copies()

    def _entries(self, names: list[str], table: FunctionTable | None = None) -> list[Entry]:
        """Verdicts for names from kallsyms, BTF or copies: the hot loop of
        `ktui list '*'` (55,000 names on 6.1). The common case, a plain
        symbol, takes the first branch; entries are made with
        tuple.__new__, a third of what calling the NamedTuple costs.
        `table`: BTF's prototypes (default: the kernel's, read now)."""
        symbols = self.src.symbols
        kallsyms = symbols.names()
        table = self.table() if table is None else table
        vm_protos, mod_protos, ambiguous = table.vmlinux, table.modules, table.ambiguous
        aff = self.filterable()
        blacklist = symbols.blacklist() or frozenset()
        shared = symbols.shared()
        unchecked = aff is None
        aff = aff or frozenset()
        notrace = "kprobe-only" if self.notrace_refused() is False else "notrace"
        notrace_note = self.notrace_note()
        new = tuple.__new__
        out = []
        for name in names:
            mod = kallsyms.get(name)
            if (mod is not None and "." not in name and name not in shared and name not in blacklist
                    and name not in ambiguous and (name in aff or not notrace_note)):
                proto = vm_protos.get(name)
                if proto is None and name in mod_protos:
                    proto = mod_protos[name][1]
                verdict = "unchecked" if unchecked else "traceable" if name in aff else notrace
                out.append(new(Entry, (name, verdict, mod, proto or "", "", "", 1)))
            elif mod is not None:
                out.append(self._symbol_entry(name, mod, table, aff, unchecked, blacklist, shared,
                                              notrace, notrace_note))
            else:
                found = self._no_symbol_entry(name, vm_protos, mod_protos)
                if found is not None:
                    out.append(found)
        return out

    def _symbol_entry(self, name, mod, table, aff, unchecked, blacklist, shared, notrace,
                      notrace_note) -> Entry:
        """A symbol that is a copy, shared, blacklisted, ambiguous in BTF, or
        notrace with a note."""
        vm_protos, mod_protos = table.vmlinux, table.modules
        proto = vm_protos.get(name) or (mod_protos[name][1] if name in mod_protos else "")
        c = copy_of(name) if "." in name else None
        original = c[0] if c is not None else ""
        notes = []
        if name in blacklist:
            verdict = "blacklisted"
        elif unchecked:
            verdict = "unchecked"
        elif name in aff:
            verdict = "traceable"
        elif original and original in aff:
            # trace_kprobe.c checks the original of a suffixed symbol ftrace
            # does not know: a kprobe is taken, there is no fentry site.
            verdict = "kprobe-only"
        else:
            verdict = notrace
            if notrace_note:
                notes.append(notrace_note)
        if c is not None:
            if not proto:
                proto = vm_protos.get(original) or (mod_protos[original][1]
                                                    if original in mod_protos else "")
            notes.insert(0, f"cold part of {original}, not an entry: no arguments"
                         if c[1].startswith(".cold") else
                         f"copy of {original}: BTF shows its arguments; positional fetches only")
        if (original or name) in table.ambiguous:
            notes.append("BTF has several different prototypes for this name: the first is shown")
        count = shared.get(name, 1)
        if count > 1:
            notes.append(f"{count} symbols share this name")
        return Entry(name, verdict, mod, proto, original, "; ".join(notes), count)

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
            return self._entries(sorted(self._matching(names, globs)))
        if module in self.loaded():
            kallsyms = self.src.symbols.names()
            names = [n for n, m in kallsyms.items() if m == module and not n.startswith(NOT_FUNCTIONS)]
            names += [n for n, (m, _p) in self.table().modules.items() if m == module and n not in kallsyms]
            return self._entries(sorted(self._matching(names, globs)))
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
        for name in sorted(self._matching(names, globs)):
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
