"""`ktui list`: kernel functions, their prototypes and verdicts, on stdout.

Exit status: 0 every pattern matched; 1 a pattern matched nothing (or an
unknown module), with a did-you-mean for a name that looks like a typo,
whatever the other patterns listed; 2 a malformed pattern. On stderr, the
first line says which kernel is listed (the running one: `ktui vm` runs
another, whose functions `ktui vm list` lists); then what could not be
checked (no BTF, available_filter_functions or the blacklist unreadable
without root), one `ktui: not checked: ...` line each; a summary line
ends the listing there.
"""

from __future__ import annotations

import platform
import shutil
import sys
from typing import TextIO

from ktui.btf.cache import FunctionCache
from ktui.btf.index import KernelBtf
from ktui.kernel.symbols.catalog import Catalog, CatalogError, Sources, GLOB_CHARS
from ktui.kernel.symbols.catalog_text import cut, entries_json, entry_lines, summary
from ktui.kernel.symbols.ksyms import close_names

EXIT_OK, EXIT_NO_MATCH, EXIT_USAGE = 0, 1, 2


def bad_pattern(pattern: str) -> str | None:
    if pattern.isascii() and pattern.isprintable():
        return None
    from ktui.lang.chars import first_refused, refused_message

    odd = first_refused(pattern)
    if odd is not None:
        return f"pattern {odd + 1}: {refused_message(pattern[odd], 'in a pattern')}"
    return None


def kernel_line(release: str, vm_kernel: str | None) -> str:
    """Which kernel a listing is of: the running one, which is not the one
    `ktui vm` boots (a newcomer on a host lists the host's)."""
    line = f"functions of the running kernel, {release}"
    if vm_kernel and vm_kernel != release:
        line += f" (ktui vm runs {vm_kernel}: `ktui vm list PATTERN` lists its functions)"
    return line


def run_list(patterns: list[str], *, as_json: bool = False, wide: bool = False, cache: bool = True,
             catalog: Catalog | None = None, out: TextIO | None = None,
             err: TextIO | None = None, release: str | None = None, vm_kernel: str | None = None) -> int:
    """`vm_kernel`: the kernel `ktui vm` would boot, if any (the command
    line finds it); `release`: the running kernel's (uname -r)."""
    out = out or sys.stdout
    err = err or sys.stderr
    for pat in patterns:
        problem = bad_pattern(pat)
        if problem:
            err.write(f"ktui: {problem}\n")
            return EXIT_USAGE
    if catalog is None:
        catalog = Catalog(Sources(btf=KernelBtf(cache=FunctionCache() if cache else None)))
    width = shutil.get_terminal_size().columns if not wide and not as_json and out.isatty() else 0
    try:
        bulk = None if as_json else catalog.text(patterns)
        entries = catalog.list(patterns) if bulk is None else None
    except CatalogError as exc:
        err.write(f"ktui: {exc}\n")
        return EXIT_USAGE if exc.usage else EXIT_NO_MATCH
    not_checked = catalog.not_checked()
    if as_json:
        out.write(entries_json(entries, not_checked, catalog.btf_problem() is None))
    else:
        err.write(f"ktui: {kernel_line(release or platform.release(), vm_kernel)}\n")
        for line in not_checked:
            err.write(f"ktui: {line}\n")
        out.write(cut(bulk[0], width) if bulk is not None else entry_lines(entries, width))
    out.flush()
    found = bulk[1] if bulk is not None else entries
    if not found:
        err.write(f"ktui: {_nothing(patterns, catalog)}\n")
        return EXIT_NO_MATCH
    missing = catalog.unmatched(patterns) if len(patterns) > 1 else []
    for pat in missing:
        err.write(f"ktui: {_nothing([pat], catalog)}\n")
    if not as_json:
        err.write(f"ktui: {summary(found)}\n")
    return EXIT_NO_MATCH if missing else EXIT_OK


def _nothing(patterns: list[str], catalog: Catalog) -> str:
    """No match: for a single exact name, the names close to it."""
    quoted = ", ".join(repr(p) for p in patterns)
    if len(patterns) == 1 and not GLOB_CHARS.search(patterns[0]) and ":" not in patterns[0]:
        universe = set(catalog.src.symbols.names()) | catalog.table().names()
        close = close_names(patterns[0], universe)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        return f"no kernel function {patterns[0]!r}{hint}"
    return f"no kernel function matches {quoted}"
