"""`ktui list`: kernel functions, their prototypes and verdicts, and
tracepoints with their fields (a pattern with a slash, `sched/*`), on stdout.

Exit status: 0 every pattern matched; 1 a pattern matched nothing (or an
unknown module, or tracefs could not be read for a tracepoint pattern),
with a did-you-mean for a name that looks like a typo, whatever the other
patterns listed; 2 a malformed pattern. On stderr, the first line says
which kernel is listed (the running one: `ktui vm` runs another, whose
functions `ktui vm list` lists); then what could not be checked (no BTF,
available_filter_functions or the blacklist unreadable without root), one
`ktui: not checked: ...` line each; a summary line ends the listing there.
Functions are listed first, then tracepoints (kernel/symbols/tracepoint_list),
then the functions of binaries and libraries (a pattern that starts with
/, `PATH:GLOB`: kernel/symbols/binary_list), each with its address, file
offset and size. For those, 1 also says a file is missing or no ELF file
(one line, the other patterns still listed), and 2 a pattern with nothing
after its ':'.
"""

from __future__ import annotations

import json
import platform
import shutil
import sys
from typing import NamedTuple, TextIO

from ktui.btf.cache import FunctionCache
from ktui.btf.index import KernelBtf
from ktui.kernel.symbols.binary_list import (
    BinaryListError,
    binary_summary,
    function_lines,
    functions_data,
    is_binary_pattern,
    list_binary,
    split_pattern,
)
from ktui.kernel.symbols.catalog import Catalog, CatalogError, Sources, GLOB_CHARS
from ktui.kernel.symbols.catalog_text import JSON_VERSION, cut, entries_doc, entry_lines, summary
from ktui.kernel.symbols.ksyms import close_names
from ktui.kernel.symbols.tracepoint_list import (
    TracepointLister,
    check_patterns,
    event_lines,
    events_data,
    is_tracepoint_pattern,
    tracepoint_summary,
)

EXIT_OK, EXIT_NO_MATCH, EXIT_USAGE = 0, 1, 2


def bad_pattern(pattern: str) -> str | None:
    if pattern.isascii() and pattern.isprintable():
        return None
    from ktui.lang.chars import first_refused, refused_message

    odd = first_refused(pattern)
    if odd is not None:
        return f"pattern {odd + 1}: {refused_message(pattern[odd], 'in a pattern')}"
    return None


def kernel_line(release: str, vm_kernel: str | None, what: str = "functions") -> str:
    """Which kernel a listing is of: the running one, which is not the one
    `ktui vm` boots (a newcomer on a host lists the host's)."""
    line = f"{what} of the running kernel, {release}"
    if vm_kernel and vm_kernel != release:
        line += f" (ktui vm runs {vm_kernel}: `ktui vm list PATTERN` lists its {what})"
    return line


class _Part(NamedTuple):
    """One kind of thing listed: its stdout text (or JSON data), the
    `not checked` lines, the summary (None: nothing found), and one line
    per pattern that matched nothing."""

    text: str
    data: dict
    not_checked: list[str]
    summary: str | None
    misses: list[str]


def run_list(patterns: list[str], *, as_json: bool = False, wide: bool = False, cache: bool = True,
             catalog: Catalog | None = None, tracepoints: TracepointLister | None = None,
             out: TextIO | None = None, err: TextIO | None = None, release: str | None = None,
             vm_kernel: str | None = None) -> int:
    """`vm_kernel`: the kernel `ktui vm` would boot, if any (the command
    line finds it); `release`: the running kernel's (uname -r);
    `tracepoints`: the lister over tracefs (a test's fixture root)."""
    out = out or sys.stdout
    err = err or sys.stderr
    for pat in patterns:
        problem = bad_pattern(pat)
        if problem:
            err.write(f"ktui: {problem}\n")
            return EXIT_USAGE
    binaries = [p for p in patterns if is_binary_pattern(p)]
    functions = [p for p in patterns if not is_tracepoint_pattern(p) and not is_binary_pattern(p)]
    events = [p for p in patterns if is_tracepoint_pattern(p) and not is_binary_pattern(p)]
    width = shutil.get_terminal_size().columns if not wide and not as_json and out.isatty() else 0
    parts: list[_Part] = []
    try:
        if binaries:  # a malformed one is usage: before anything is listed
            for pat in binaries:
                split_pattern(pat)
    except BinaryListError as exc:
        err.write(f"ktui: {exc}\n")
        return EXIT_USAGE
    try:
        if events:  # first: a malformed one is usage, before anything is listed
            parts.append(_tracepoints(events, tracepoints or TracepointLister(), width))
        if functions:
            if catalog is None:
                catalog = Catalog(Sources(btf=KernelBtf(cache=FunctionCache() if cache else None)))
            parts.insert(0, _functions(functions, catalog, as_json, width))
    except CatalogError as exc:
        err.write(f"ktui: {exc}\n")
        return EXIT_USAGE if exc.usage else EXIT_NO_MATCH
    if binaries:
        parts.append(_binaries(binaries, width))
    if as_json:
        doc: dict = {}
        for part in parts:
            doc.update(part.data)
        out.write(json.dumps(doc, indent=None, separators=(",", ":")) + "\n")
    else:
        what = " and ".join(["functions"] * bool(functions) + ["tracepoints"] * bool(events))
        if what:  # (a binary's functions are no kernel's)
            err.write(f"ktui: {kernel_line(release or platform.release(), vm_kernel, what)}\n")
        for line in (line for part in parts for line in part.not_checked):
            err.write(f"ktui: {line}\n")
        for part in parts:
            out.write(part.text)
    out.flush()
    for line in (line for part in parts for line in part.misses):
        err.write(f"ktui: {line}\n")
    if not as_json:
        for part in parts:
            if part.summary:
                err.write(f"ktui: {part.summary}\n")
    return EXIT_NO_MATCH if any(part.misses for part in parts) else EXIT_OK


def _functions(patterns: list[str], catalog: Catalog, as_json: bool, width: int) -> _Part:
    bulk = None if as_json else catalog.text(patterns)
    entries = catalog.list(patterns) if bulk is None else None
    not_checked = catalog.not_checked()
    found = bulk[1] if bulk is not None else entries
    if as_json:
        text, data = "", entries_doc(entries, not_checked, catalog.btf_problem() is None)
    else:
        text, data = cut(bulk[0], width) if bulk is not None else entry_lines(entries, width), {}
    if not found:
        return _Part(text, data, not_checked, None, [_nothing(patterns, catalog)])
    missing = catalog.unmatched(patterns) if len(patterns) > 1 else []
    return _Part(text, data, not_checked, summary(found), [_nothing([p], catalog) for p in missing])


def _tracepoints(patterns: list[str], lister: TracepointLister, width: int) -> _Part:
    """The events matching `patterns`; tracefs that cannot be read is one
    line, not the end of the listing (functions may still be listed)."""
    check_patterns(patterns)
    try:
        events, unmatched = lister.list(patterns)
        misses = [lister.nothing(p) for p in unmatched]
    except CatalogError as exc:
        return _Part("", {"version": JSON_VERSION, "tracepoints": []}, [], None, [str(exc)])
    data = {"version": JSON_VERSION, "tracepoints": events_data(events)}
    return _Part(cut(event_lines(events), width), data, [], tracepoint_summary(events) if events else None,
                 misses)


def _binaries(patterns: list[str], width: int) -> _Part:
    """The functions of files (`PATH:GLOB`); a file that cannot be read is
    one line, and the other patterns are still listed."""
    listings, misses = [], []
    for pat in patterns:
        try:
            listing = list_binary(pat)
        except BinaryListError as exc:
            misses.append(str(exc))
            continue
        listings.append(listing)
        if listing.miss:
            misses.append(listing.miss)
    lines = [line for listing in listings for line in function_lines(listing)]
    data = {"version": JSON_VERSION, "binaries": [functions_data(listing) for listing in listings]}
    return _Part(cut(lines, width), data, [], binary_summary(listings), misses)


def _nothing(patterns: list[str], catalog: Catalog) -> str:
    """No match: for a single exact name, the names close to it."""
    quoted = ", ".join(repr(p) for p in patterns)
    if len(patterns) == 1 and not GLOB_CHARS.search(patterns[0]) and ":" not in patterns[0]:
        universe = set(catalog.src.symbols.names()) | catalog.table().names()
        close = close_names(patterns[0], universe)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        return f"no kernel function {patterns[0]!r}{hint}"
    return f"no kernel function matches {quoted}"
