"""Prototypes for `lang.bind` from the running kernel's BTF.

vmlinux first (one walk of its functions, kept); a function vmlinux does
not describe is looked for in the loaded modules' BTF. A name BTF
describes more than once with different prototypes (static functions of
different files share names) is refused: which one a kprobe attaches to
is kallsyms' first match, and its arguments cannot be trusted by name.

A tracepoint's fields come from its tracefs format (`lang.tracepoints`),
read once per event and kept, errors too (a session binds each probe
again when it is edited).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ktui.btf.errors import BtfError
from ktui.lang.bind import NoPrototype
from ktui.lang.tracepoints import TracepointError, TracepointFormat, read_format

if TYPE_CHECKING:
    from ktui.btf.access import Access
    from ktui.btf.index import KernelBtf


@dataclass(frozen=True)
class FoundPrototype:
    access: Access
    proto_id: int
    text: str


class KernelNames:
    """`bind.Kernel` over a `KernelBtf` (the machine's, or a test's)."""

    def __init__(self, btf: KernelBtf | None = None, tracefs: str | None = None) -> None:
        self._btf = btf
        self.tracefs = tracefs  # tracefs' root; None: where it is mounted
        self._found: dict[str, FoundPrototype] = {}
        self._formats: dict[str, TracepointFormat | TracepointError] = {}

    @property
    def btf(self) -> KernelBtf:
        """The machine's BTF index, made when a probe first names something:
        a launch whose probes name nothing imports no BTF machinery."""
        if self._btf is None:
            from ktui.btf.index import KernelBtf

            self._btf = KernelBtf()
        return self._btf

    def tracepoint_format(self, tracepoint: str) -> TracepointFormat:
        """`CATEGORY/NAME`'s format; TracepointError (one line) when it cannot be read."""
        found = self._formats.get(tracepoint)
        if found is None:
            category, _, name = tracepoint.partition("/")
            try:
                found = read_format(category, name, self.tracefs)
            except TracepointError as err:
                found = err
            self._formats[tracepoint] = found
        if isinstance(found, TracepointError):
            raise TracepointError(found.message, unknown=found.unknown)
        return found

    def tracepoint_matches(self, pattern: str) -> tuple[str, ...]:
        """The events a pattern (`syscalls/sys_enter_*`) matches, sorted;
        SpecError (one line, at the target) when none, or tracefs cannot be read."""
        from ktui.lang.bind_wildcard import expand_events
        from ktui.lang.model import SpecError
        from ktui.lang.tracepoints import list_categories, list_events

        try:
            found = expand_events(pattern, list_categories(self.tracefs), lambda c: list_events(c, self.tracefs))
        except TracepointError as err:
            raise SpecError(f"{pattern}: {err.message}", col=1) from None
        if not found:
            raise SpecError(f"no tracepoint matches {pattern} (`ktui list '{pattern.partition('/')[0]}/*'` "
                            "lists a category's events)", col=1)
        return found

    def tracefs_problem(self) -> str | None:
        """Why tracepoint formats cannot be read here (None: they can)."""
        try:
            if self.tracefs is None:
                from ktui.lang.tracepoints import tracefs_root

                tracefs_root()
        except TracepointError as err:
            return err.message
        return None

    def problem(self) -> str | None:
        return self.btf.problem()

    def prototype(self, function: str) -> FoundPrototype:
        found = self._found.get(function)
        if found is None:
            found = self._found[function] = self._look_up(function)
        return found

    def _look_up(self, function: str) -> FoundPrototype:
        from ktui.btf.sysfs import module_names  # (kept off the launch path, as the index is)

        for module in [None, *sorted(module_names(self.btf.btf_dir))]:
            try:
                ids = self.btf.function_ids(function, module)
            except BtfError as err:
                if module is None:
                    raise
                continue  # a module whose BTF cannot be read: not where it is
            if not ids:
                continue
            render = self.btf.renderer(module)
            texts = {render.prototype(fid) for fid in ids}
            if len(texts) > 1:
                raise NoPrototype(f"BTF describes {len(texts)} different functions called "
                                  f"{function} (static functions of different files): which one "
                                  "a probe attaches to is not known by name")
            blob = render.btf
            proto_id = blob.head(ids[0])[3]
            return FoundPrototype(self.btf.access(module), proto_id, texts.pop())
        raise NoPrototype(f"BTF describes no function {function!r}", unknown=True)

    def close_functions(self, name: str, limit: int = 3) -> list[str]:
        """vmlinux functions whose names come close to `name` (a typo's
        did-you-mean). Only on that error path: it decodes every name."""
        blob = self.btf.vmlinux()
        names = {blob.name_of(fid) for fid in blob.func_ids}
        # candidates of a similar length sharing a first letter: difflib over
        # 60,000 names at once would take seconds under emulation
        near = [n for n in names if n[:1] == name[:1] and abs(len(n) - len(name)) <= 3]
        return difflib.get_close_matches(name, near, n=limit, cutoff=0.75)
