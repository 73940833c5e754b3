"""`ktui list PATH:GLOB`: the functions of a binary or a library, each
with what a probe on it needs (`uprobe_target` reads the file: its
.symtab, else what a stripped file exports in .dynsym).

    malloc              0x98930  file 0x98930  791 bytes
    memcpy              0xa0b40  file 0xa0b40  209 bytes  ifunc
    read                -        -             import: probe it in its library

A pattern's path is absolute, as a probe's is; `PATH` alone lists every
function. One line (`BinaryListError`) for a file that is missing or no
ELF file, or a malformed pattern (`usage`).
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from typing import NamedTuple

from ktui.kernel.symbols.uprobe_target import ListedFunction, UprobeTargetError, has_symtab, list_functions

GLOB_CHARS = re.compile(r"[*?\[]")


def is_binary_pattern(pattern: str) -> bool:
    """A pattern that starts with / names a file (a tracepoint's never does)."""
    return pattern.startswith("/")


class BinaryListError(Exception):
    """One line; `usage`: the pattern is malformed (exit 2, not 1)."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


class BinaryListing(NamedTuple):
    path: str
    glob: str
    functions: list[ListedFunction]
    miss: str | None  # the line to say when nothing matched


def split_pattern(pattern: str) -> tuple[str, str]:
    """`PATH:GLOB` -> (PATH, GLOB); `PATH` alone is every function."""
    path, sep, glob = pattern.partition(":")
    if sep and not glob:
        raise BinaryListError(f"pattern {pattern!r}: expected a glob after the ':', e.g. {path}:'read*'",
                              usage=True)
    if ":" in glob:
        raise BinaryListError(f"pattern {pattern!r}: a path with ':' in it cannot be probed", usage=True)
    return path, glob or "*"


def list_binary(pattern: str) -> BinaryListing:
    """The functions of the pattern's file its glob matches."""
    path, glob = split_pattern(pattern)
    try:
        every = list_functions(path)
        matched = [fn for fn in every if fnmatch.fnmatchcase(fn.name, glob)]
        miss = None if matched else _nothing(path, glob, every)
    except UprobeTargetError as err:
        raise BinaryListError(err.message) from None
    return BinaryListing(path, glob, matched, miss)


def _nothing(path: str, glob: str, every: list[ListedFunction]) -> str:
    """No match: for an exact name, the names close to it."""
    if GLOB_CHARS.search(glob):
        return f"no function of {path} matches {glob!r}"
    close = difflib.get_close_matches(glob, sorted({fn.name for fn in every}), n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    stripped = "" if has_symtab(path) else " (it is stripped: only what it exports is listed)"
    return f"no function {glob!r} in {path}{stripped}{hint}"


def function_lines(listing: BinaryListing) -> list[str]:
    width = max((len(fn.name) for fn in listing.functions), default=0)
    lines = []
    for fn in listing.functions:
        if fn.imported:
            lines.append(f"{fn.name:<{width}}  {'-':>10}  {'-':>15}  import: probe it in its library")
            continue
        offset = f"file 0x{fn.file_offset:x}" if fn.file_offset is not None else "no code segment"
        mark = "  ifunc" if fn.ifunc else ""
        lines.append(f"{fn.name:<{width}}  {f'0x{fn.address:x}':>10}  {offset:>15}  {fn.size} bytes{mark}")
    return lines


def functions_data(listing: BinaryListing) -> dict:
    return {"path": listing.path, "glob": listing.glob, "functions": [
        {"name": fn.name, "address": fn.address, "file_offset": fn.file_offset, "size": fn.size,
         "ifunc": fn.ifunc, "import": fn.imported} for fn in listing.functions]}


def binary_summary(listings: list[BinaryListing]) -> str | None:
    count = sum(len(listing.functions) for listing in listings)
    if not count:
        return None
    files = sorted({listing.path for listing in listings if listing.functions})
    return f"{count} function{'s' if count != 1 else ''} of {', '.join(files)}"
