"""Does the running kernel have the functions a probe set names?

`ktui check` asks this after a file has loaded, so that `vfs_raed` is
caught before anything compiles, with the same did-you-mean the attach
path gives. The common case costs one read of /proc/kallsyms (a name that
is there is the answer); only a name that is not there pulls in the
catalog (BTF, copies, modules) to say why.

A probe naming alternatives (`function: [a, b]`) needs one of them, not
each (`alternatives_problem`). A wildcard (`tcp_*`) needs a match, and
no more than the caps (`pattern_problem`).

Fatal: no such function; a function that has no symbol (inlined, or only
compiler copies have one); the kprobe blacklist; a notrace function on a
kernel whose kprobe events refuse those. A warning: a function of a module
that is not loaded (it may be loaded before the set is run), or a notrace
function where the kernel's config cannot be read.

Where kallsyms cannot be read (no CONFIG_KALLSYMS), `unchecked()` says so
in one line and nothing is refused.
"""

from __future__ import annotations

from typing import NamedTuple

from ktui.kernel.symbols.catalog import Catalog, Sources
from ktui.kernel.symbols.ksyms import KernelSymbols, copy_of
from ktui.lang import wildcards
from ktui.lang.alternatives import none_present
from ktui.lang.limits import WILDCARD_MAX_MULTI, WILDCARD_MAX_SINGLE


class NameProblem(NamedTuple):
    message: str
    fatal: bool


class FunctionCheck:
    def __init__(self, sources: Sources | None = None) -> None:
        self._sources = sources
        self._symbols = sources.symbols if sources is not None else KernelSymbols()
        self._catalog: Catalog | None = None

    def unchecked(self) -> str | None:
        """Why names cannot be checked here, or None."""
        if self._symbols.available:
            return None
        why = self._symbols.error or "it lists no functions"
        return f"function names not checked: {why}"

    def catalog(self) -> Catalog:
        if self._catalog is None:
            from ktui.btf.cache import FunctionCache
            from ktui.btf.index import KernelBtf

            sources = self._sources or Sources(symbols=self._symbols,
                                               btf=KernelBtf(cache=FunctionCache()))
            self._catalog = Catalog(sources)
        return self._catalog

    def problem(self, name: str) -> NameProblem | None:
        """What is wrong with probing the function `name`, or None."""
        if not self._symbols.available:
            return None
        if self._symbols.exists(name):
            if self._symbols.blacklisted(name):
                return NameProblem(f"{name} is on the kernel's kprobe blacklist: it cannot be probed",
                                   True)
            return self._notrace(name)
        entry = self.catalog().entry(name)
        if entry is None:
            catalog = self.catalog()
            close = self._symbols.close_names(name, extra=catalog.table().names())
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            return NameProblem(f"unknown kernel function {name!r}{hint}", True)
        if entry.verdict == "copy-only":
            return NameProblem(f"{name} has no symbol of its own, only compiler copies "
                               f"({entry.note.split(': ', 1)[-1]}): probe a copy, with "
                               "positional fetches", True)
        if entry.verdict == "not-loaded":
            return NameProblem(f"{name} is in module {entry.module}, which is not loaded "
                               f"(modprobe {entry.module} before running this set)", False)
        return NameProblem(f"{name} has no symbol: it was inlined into its callers, or is "
                           "init code already freed; nothing to probe", True)

    def alternatives_problem(self, names: tuple[str, ...]) -> NameProblem | None:
        """What is wrong with a probe naming alternatives (`lang.alternatives`):
        one of them is enough, so only the first this kernel has is asked
        (its blacklist, notrace); where none is, one line names them all,
        with a did-you-mean for the first (a module's function that is not
        loaded is that module's warning, as for one name)."""
        if not self._symbols.available:
            return None
        present = next((name for name in names if self._symbols.exists(name)), None)
        if present is not None:
            return self.problem(present)
        for name in names:
            found = self.problem(name)
            if found is not None and not found.fatal:
                return found
        close = self._symbols.close_names(names[0], extra=self.catalog().table().names())
        return NameProblem(none_present(names, close), True)

    def pattern_problem(self, pattern: str) -> NameProblem | None:
        """A wildcard (`tcp_*`), matched as the session matches it: against
        available_filter_functions, or kallsyms where that cannot be read
        (not root). Fatal: it matches nothing, or more than one kprobe_multi
        link takes; a warning: more than one perf kprobe each takes (it
        attaches only on a kernel with kprobe_multi, 5.18+ with CONFIG_FPROBE)."""
        if not self._symbols.available:
            return None
        from ktui.kernel.symbols.wildcard_matches import attachable, read_blacklist

        traced = self.catalog().filterable()
        names = attachable(traced if traced is not None else self._symbols.names(), read_blacklist())
        matched = wildcards.expand(pattern, names)
        if not matched:
            close = wildcards.close_patterns(pattern, names)
            return NameProblem(wildcards.matches_nothing(pattern, wildcards.FUNCTIONS, close), True)
        if len(matched) > WILDCARD_MAX_MULTI:
            return NameProblem(wildcards.too_many(pattern, len(matched), WILDCARD_MAX_MULTI,
                                                  wildcards.FUNCTIONS, matched), True)
        if len(matched) > WILDCARD_MAX_SINGLE:
            return NameProblem(wildcards.too_many(pattern, len(matched), WILDCARD_MAX_SINGLE,
                                                  wildcards.FUNCTIONS, matched)
                               + "; it attaches only where the kernel has kprobe_multi (5.18+, CONFIG_FPROBE)",
                               False)
        return None

    def _notrace(self, name: str) -> NameProblem | None:
        """A symbol ftrace does not know, on a kernel whose kprobe events
        refuse those (see ktui/kernel/symbols/kconfig.py)."""
        catalog = self.catalog()
        traced = catalog.filterable()
        if traced is None or name in traced:
            return None
        original = copy_of(name)
        if original is not None and original[0] in traced:
            return None  # the kernel checks the original of a copy
        refused = catalog.notrace_refused()
        if refused is False:
            return None
        why = ("CONFIG_KPROBE_EVENTS_ON_NOTRACE is off" if refused else
               "unless the kernel has CONFIG_KPROBE_EVENTS_ON_NOTRACE=y; its config is unreadable")
        return NameProblem(f"{name} is notrace (not in available_filter_functions): this kernel's "
                           f"kprobe events refuse it ({why})", refused is True)
