"""What the function browser shows, without Textual: every function the
catalog knows (loaded once, in a worker thread), one function's verdict and
parameters, the members of a parameter that points to a struct, and the
spec text the ticked ones make.

The spec uses the probe language's names (issue 12): a parameter by its BTF
name (`count`), a member through a pointer (`file->f_pos`), `args.NAME` for
a parameter whose name is a predefined word of the language (`flags` is a
register, `pid` a builtin), `retval` in return probes. Only what the
language can take from exactly one argument register is offered: BTF's
parameter i is not always register i (Access.arg_slots), and a compiler
copy's BTF prototype is its original's, so there only positional fetches
(a1..a6) are honest. What cannot be ticked is still shown, with why.

Kernels built with GCC carry no `__user` tags, so whether a char pointer
points to user or kernel memory is never guessed: a text leaf is fetched
as a pointer unless the user picks `:string` or `:ustring`.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Callable

from ktui.btf.access import Access, ArgSlot
from ktui.btf.decode import BtfError
from ktui.btf.types import Kind
from ktui.kernel.symbols.catalog import Catalog, CatalogError, Entry
from ktui.lang.names import is_reserved
from ktui.screens.browse_choice import Choice
from ktui.screens.browse_match import Matcher
from ktui.screens.browse_places import Places

log = logging.getLogger(__name__)

# What each verdict means for someone about to add a probe.
VERDICT_TEXT = {
    "traceable": "traceable: a kprobe attaches (and fentry would)",
    "kprobe-only": "kprobe only: not in available_filter_functions, so no fentry; an int3 kprobe attaches",
    "notrace": "not traceable: notrace (not in available_filter_functions) and this kernel's "
               "kprobe events refuse such functions",
    "blacklisted": "not traceable: on the kprobe blacklist, the kernel refuses kprobes here",
    "copy-only": "no symbol of its own: probe one of its compiler copies",
    "no-symbol": "no symbol: inlined into its callers, or init code freed after start",
    "not-loaded": "in a module that is not loaded: modprobe it first",
    "unchecked": "not checked: available_filter_functions is unreadable (not root?); "
                 "a kprobe may or may not attach",
}
TYPE_CYCLE = ("", "string", "ustring")  # a text leaf's fetch type, as the user picks it
_FETCHABLE = ("int", "enum", "bool", "pointer")


@dataclass(frozen=True, slots=True)
class Detail:
    entry: Entry
    verdict_line: str
    notes: tuple[str, ...]  # module, copy, ambiguity: one line each
    named: str  # why names cannot be used here ("" when they can)
    params: tuple[Choice, ...]
    retval: Choice | None  # None for a void function

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def target(self) -> str:
        """As the spec writes it (a PlaceDetail's is a tracepoint or a file's)."""
        return self.entry.name

    @property
    def kinds(self) -> tuple[str, ...]:
        """A kernel function is probed at its call or its return."""
        return ("c", "r")


def param_ref(name: str) -> str:
    """`count` -> `count`; a predefined word (`flags`, `pid`) -> `args.flags`."""
    return f"args.{name}" if is_reserved(name) else name


def spec_text(target: str, kind: str, picks: list[tuple[str, str]] | tuple[tuple[str, str], ...]) -> str:
    """`vfs_read:c:count,file->f_pos`; `picks` are (ref, fetch type or "")."""
    fetches = ",".join(f"{ref}:{t}" if t else ref for ref, t in picks)
    return f"{target}:{kind}" + (f":{fetches}" if fetches else "")


def verdict_line(entry: Entry) -> str:
    return VERDICT_TEXT.get(entry.verdict, entry.verdict)


class QuickEntries(Mapping[str, Entry]):
    """Every function symbol's entry, made when first asked for, from
    kallsyms, ftrace and the blacklist only (Catalog.quick_entry): what the
    browser's first screen shows while BTF's prototypes are still read."""

    def __init__(self, catalog: Catalog, names: set[str]) -> None:
        self._catalog = catalog
        self._names = names
        self._made: dict[str, Entry] = {}

    def __getitem__(self, name: str) -> Entry:
        found = self._made.get(name)
        if found is None:
            if name not in self._names:
                raise KeyError(name)
            found = self._catalog.quick_entry(name) or Entry(name, "unchecked", "", "", "", "", 0)
            self._made[name] = found
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class Functions:
    """Every function of one catalog, searchable, with details on demand.

    `partial`: the first, quick index (function symbols and their verdicts;
    no prototypes, no parameters, no functions only BTF knows), shown while
    the whole one loads: on the emulated VM the catalog took about 20 s,
    a blank screen that long (issue #29)."""

    def __init__(self, entries: list[Entry] | Mapping[str, Entry], catalog: Catalog | None,
                 problems: tuple[str, ...], btf_problem: str | None, *, partial: bool = False) -> None:
        self.entries: Mapping[str, Entry] = (entries if isinstance(entries, Mapping)
                                             else {e.name: e for e in entries})
        self.matcher = Matcher(self.entries)
        self.catalog = catalog
        self.problems = problems  # what could not be checked, one line each
        self.btf_problem = btf_problem  # None: BTF is there (or, partial: not read yet)
        self.partial = partial
        self._details: dict[str, Detail] = {}

    @classmethod
    def quick(cls, catalog: Catalog) -> "Functions":
        """The partial index: a few files read, no BTF (call it off the UI
        thread)."""
        catalog.prepare_quick()
        return cls(QuickEntries(catalog, catalog.symbol_names()), catalog, (), None, partial=True)

    def __len__(self) -> int:
        return len(self.entries)

    def detail(self, name: str) -> Detail | None:
        found = self._details.get(name)
        if found is None and name in self.entries:
            found = self._details[name] = self._detail(self.entries[name])
        return found

    def param_names(self, name: str) -> list[str]:
        """The spec names of a function's parameters (for completion)."""
        detail = self.detail(name)
        if detail is None or detail.named:
            return []
        return [c.ref for c in detail.params if c.tickable]

    # ------------------------------------------------------------ one function
    def _detail(self, entry: Entry) -> Detail:
        notes = []
        if entry.module:
            notes.append(f"module {entry.module}")
        if entry.note:
            notes.append(entry.note)
        if self.partial:  # BTF is still being read, in the loading thread
            return Detail(entry, verdict_line(entry), tuple(notes),
                          "reading the kernel's BTF: its parameters show in a moment", (), None)
        found = self._prototype(entry)
        if isinstance(found, str):
            named = found
            return Detail(entry, verdict_line(entry), tuple(notes), named, (),
                          Choice("retval", "retval", ""))
        access, proto_id = found
        named = ""
        if entry.copy_of:
            named = (f"a compiler copy of {entry.copy_of}: BTF describes the original, the copy's "
                     "arguments may differ; positional fetches (a1..a6) only")
        elif self.catalog is not None and entry.name in self.catalog.table().ambiguous:
            named = "BTF has several prototypes for this name: positional fetches (a1..a6) only"
        try:
            slots = access.arg_slots(proto_id)
        except BtfError as exc:
            return Detail(entry, verdict_line(entry), tuple(notes), f"BTF: {exc}", (),
                          Choice("retval", "retval", ""))
        params = tuple(self._param(access, slot, named) for slot in slots)
        ret_id = access.btf.head(proto_id)[3]
        retval = None
        if ret_id != 0:
            retval = Choice("retval", f"{access.render.type_name(ret_id)} retval", "")
        return Detail(entry, verdict_line(entry), tuple(notes), named, params, retval)

    def _prototype(self, entry: Entry) -> tuple[Access, int] | str:
        """The Access and FUNC_PROTO id for an entry, or why there is none."""
        if self.catalog is None or self.catalog.src.btf is None:
            return "no BTF: parameter names are unknown; positional fetches (a1..a6) only"
        if self.btf_problem:
            return f"{self.btf_problem}"
        btf = self.catalog.src.btf
        name = entry.copy_of or entry.name
        module = entry.module or None
        try:
            found = btf.function(name, module) if module and module in btf_modules(btf) else None
            if found is None:
                found = btf.function(name)
                module = None
            if found is None:
                return "not described in BTF: positional fetches (a1..a6) only"
            blob, fid = found
            return btf.access(module), blob.type(fid).type  # type: ignore[attr-defined]
        except BtfError as exc:
            return f"BTF: {exc}"

    def _param(self, access: Access, slot: ArgSlot, named: str) -> Choice:
        ctype = access.render.type_name(slot.type_id)
        register = f"a{slot.registers[0]}" if len(slot.registers) == 1 else ""
        shown = access.render.declaration(slot.type_id, slot.name) if slot.name else ctype
        leaf = access.leaf(slot.type_id)
        why = named or slot.note
        if not why and not slot.name:
            why = "no name in BTF: fetch it by position"
        if not why and leaf.kind not in _FETCHABLE:
            why = f"a {leaf.kind} passed by value: not fetched by name"
        expandable = False
        target = 0
        pointee = None
        ref = param_ref(slot.name) if slot.name else f"a{slot.index + 1}"
        if leaf.kind == "pointer":
            pointed = access.btf.head(access.btf.resolve(slot.type_id))[3]
            target = access.btf.resolve(pointed)
            expandable = access.btf.head(target)[0] in (Kind.STRUCT, Kind.UNION) and not why
            if not why and not leaf.text:
                pointee = _pointee(access, pointed, ref, slot.name or ref)
        return Choice(ref, shown, why, text=leaf.text, type_id=target, expandable=expandable,
                      register=register, pointee=pointee)

    def members(self, detail: Detail, param: Choice) -> tuple[Choice, ...]:
        """The members of what `param` points to, one level, each a choice."""
        if not param.expandable or self.catalog is None or self.catalog.src.btf is None:
            return ()
        module = detail.entry.module or None
        btf = self.catalog.src.btf
        try:
            access = btf.access(module if module and module in btf_modules(btf) else None)
            found = access.members(param.type_id)
        except BtfError as exc:
            log.info("members of %s: %s", param.ref, exc)
            return ()
        out = []
        for name, bit_offset, member in found:
            leaf = access.leaf(member.type)
            why = ""
            if member.bitfield_size or bit_offset % 8:
                why = "a bitfield: not fetched by name here"
            elif leaf.kind == "array":
                why = ("a zero-length marker: no bytes" if leaf.nelems == 0 else
                       "" if leaf.text else "an array: not fetched by name")
            elif leaf.kind in ("struct", "union"):
                why = f"a {leaf.kind} inside: type {param.ref}->{name}.MEMBER in the spec"
            elif leaf.kind not in _FETCHABLE:
                why = f"a {leaf.kind}: not fetched"
            out.append(Choice(f"{param.ref}->{name}", access.render.declaration(member.type, name),
                              why, depth=1, text=leaf.text,
                              default_type="string" if leaf.kind == "array" and leaf.text else ""))
        return tuple(out)


def _pointee(access: Access, type_id: int, ref: str, name: str) -> Choice | None:
    """`loff_t *pos`: the loff_t itself, read where pos points, as the
    language writes it (`+0(pos):s64`); None unless it points to a number
    (an integer, an enum, a bool) of 1, 2, 4 or 8 bytes."""
    if type_id == 0:
        return None  # void *
    leaf = access.leaf(type_id)
    if leaf.kind not in ("int", "enum", "bool") or leaf.size not in (1, 2, 4, 8):
        return None
    fetch_type = f"{'s' if leaf.signed and leaf.kind != 'bool' else 'u'}{leaf.size * 8}"
    return Choice(f"+0({ref})", f"*{name}  ({leaf.ctype}: the value {name} points to)", "",
                  depth=1, default_type=fetch_type)


def running_kernel_catalog() -> Catalog:
    """The catalog `ktui list` uses, with its build-id keyed cache."""
    from ktui.btf.cache import FunctionCache
    from ktui.btf.index import KernelBtf
    from ktui.kernel.symbols.catalog import Sources

    return Catalog(Sources(btf=KernelBtf(cache=FunctionCache())))


def btf_modules(btf) -> set[str]:
    """The modules with BTF of their own (split BTF in /sys/kernel/btf)."""
    from ktui.btf.sysfs import module_names

    return set(module_names(btf.btf_dir))


class FunctionIndex:
    """The catalog, loaded once on first use, off the UI thread; shared by
    the browser and the add dialog's completion. `catalog_factory` None:
    no kernel to ask (the index is empty and says so). `places`: what the
    browser lists beside the kernel's functions (tracepoints, files; by
    default this machine's tracefs), kept as long as the catalog is."""

    def __init__(self, catalog_factory: Callable[[], Catalog] | None, *, places: Places | None = None) -> None:
        self._factory = catalog_factory
        self._lock = threading.Lock()
        self._loaded: Functions | None = None
        self.places = places if places is not None else Places()

    @classmethod
    def of(cls, functions: Functions, *, places: Places | None = None) -> "FunctionIndex":
        """An index already loaded (benchmarks, tests)."""
        index = cls(None, places=places)
        index._loaded = functions
        return index

    @property
    def loaded(self) -> Functions | None:
        return self._loaded

    def load(self, progress: Callable[[int], None] | None = None,
             first: Callable[[Functions], None] | None = None) -> Functions:
        """Blocking; safe from any thread (one load, the others wait for it).
        `progress(n)` is called once the symbol count is known, `first`
        with the partial index (Functions.quick) as soon as it is made,
        long before the whole one (BTF's prototypes) is."""
        with self._lock:
            if self._loaded is None:
                self._loaded = self._load(progress, first)
            return self._loaded

    def _load(self, progress: Callable[[int], None] | None,
              first: Callable[[Functions], None] | None) -> Functions:
        if self._factory is None:
            return Functions([], None, ("no kernel catalog in this mode",), "no BTF source")
        try:
            catalog = self._factory()
            if progress is not None:
                progress(len(catalog.src.symbols.names()))
            if first is not None and catalog.src.symbols.available:
                first(Functions.quick(catalog))
            entries = catalog.list(["*"])
            if catalog.src.btf is not None and catalog.btf_problem() is None:
                catalog.src.btf.function("")  # builds its name -> id map here, not on the UI thread
            problems = tuple(catalog.not_checked())
            btf_problem = catalog.btf_problem()
        except (OSError, BtfError, CatalogError) as exc:
            log.warning("function catalog: %s", exc)
            return Functions([], None, (f"cannot list the kernel's functions: {exc}",), str(exc))
        return Functions(entries, catalog, problems, btf_problem)
