"""`ktui list CATEGORY/EVENT`: tracepoints and their fields, from tracefs.

    syscalls/sys_enter_openat  dfd:s32 filename:x64(const char *) flags:s32 mode:u64
    sched/sched_process_exec  filename:string args.pid:s32 old_pid:s32
    tcp/tcp_probe  saddr:unreadable(__u8[28]) ... sport:u16 ...

One line per event: its name, two spaces, then each field as a fetch
names it (`args.pid` where a bare `pid` is the builtin) with the type it
reads as when the spec gives none (`lang.bind_fields.listed_type`, the
binding's own rule). The C type follows in parentheses where that type
does not say what the field holds: an address (x64: add :string,
:ustring or :symbol) or a field ktui cannot read yet. The common_* fields
every event has are left out. A pattern is `CATEGORY_GLOB/EVENT_GLOB`;
the formats are read from tracefs (mode 0700: root only).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from ktui.kernel.symbols.catalog import GLOB_CHARS, CatalogError
from ktui.lang.bind_fields import listed_type
from ktui.lang.bind_wildcard import expand_events
from ktui.lang.model import Kind, Named, SpecError
from ktui.lang.spec import parse_fetch
from ktui.lang.tracepoints import (
    NEEDS_ROOT,
    TracepointError,
    TracepointField,
    TracepointFormat,
    list_categories,
    list_events,
    no_event_message,
    read_format,
    tracefs_root,
)

LIST_NEEDS_ROOT = "tracefs is mode 0700: listing tracepoints needs root"


class Listed(NamedTuple):
    """One event: `format` when it was read, else `error` says why not."""

    name: str  # CATEGORY/EVENT
    format: TracepointFormat | None
    error: str = ""


def is_tracepoint_pattern(pattern: str) -> bool:
    """A slash makes a pattern a tracepoint's: no kernel function has one."""
    return "/" in pattern


class TracepointLister:
    """Globs over one tracefs (`root`; None: where it is mounted)."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self._root = root

    def root(self) -> str | os.PathLike[str]:
        """tracefs' root; CatalogError (one line) when it cannot be read."""
        if self._root is None:
            try:
                self._root = tracefs_root()
            except TracepointError as err:
                raise CatalogError(_listing_words(err.message)) from None
        return self._root

    def list(self, patterns: list[str]) -> tuple[list[Listed], list[str]]:
        """The events matching any pattern, sorted and once each, and the
        patterns that matched none. CatalogError (usage) for a malformed one."""
        check_patterns(patterns)
        found: dict[str, Listed] = {}
        unmatched = []
        for pattern in patterns:
            names = self._matching(pattern)
            if not names:
                unmatched.append(pattern)
            for name in names:
                if name not in found:
                    found[name] = self._read(name)
        return [found[name] for name in sorted(found)], unmatched

    def nothing(self, pattern: str) -> str:
        """Why `pattern` matched nothing, with close names where it is one
        exact name, or names a category that does not exist."""
        category, event = _split(pattern)
        root = self.root()
        if not GLOB_CHARS.search(category) and category not in list_categories(root):
            if not GLOB_CHARS.search(event):
                return no_event_message(root, category, event)
            return no_event_message(root, category, event).partition(":")[0]
        if not GLOB_CHARS.search(pattern):
            return no_event_message(root, category, event)
        return f"no tracepoint matches {pattern!r}"

    def _matching(self, pattern: str) -> list[str]:
        """The events `pattern` matches, as a wildcard probe's are (lang.bind_wildcard)."""
        _split(pattern)
        root = self.root()
        try:
            return list(expand_events(pattern, list_categories(root), lambda category: list_events(category, root)))
        except TracepointError as err:
            raise CatalogError(_listing_words(err.message)) from None

    def _read(self, name: str) -> Listed:
        category, _, event = name.partition("/")
        try:
            return Listed(name, read_format(category, event, self.root()))
        except TracepointError as err:
            if err.message == NEEDS_ROOT:
                raise CatalogError(LIST_NEEDS_ROOT) from None
            return Listed(name, None, err.message)  # one odd event does not end the listing


def check_patterns(patterns: list[str]) -> None:
    """CatalogError (usage) for the first pattern that is not CATEGORY/EVENT."""
    for pattern in patterns:
        _split(pattern)


def _split(pattern: str) -> tuple[str, str]:
    category, _, event = pattern.partition("/")
    if not category or not event or "/" in event:
        raise CatalogError(f"{pattern!r}: expected CATEGORY/EVENT, e.g. 'sched/*' or "
                           "'syscalls/sys_enter_open*'", usage=True)
    return category, event


def _listing_words(message: str) -> str:
    """tracefs' problems as `ktui list` says them."""
    return LIST_NEEDS_ROOT if message == NEEDS_ROOT else message


# ---------------------------------------------------------------- text


def own_fields(fmt: TracepointFormat) -> list[TracepointField]:
    """The event's own fields: common_type, common_pid... are every event's."""
    return [f for f in fmt.fields if not f.name.startswith("common_")]


def written_name(field: TracepointField) -> str:
    """The field as a fetch names it: `args.pid` where a bare `pid` would
    be the builtin (the grammar decides, as it does for a spec)."""
    try:
        expr = parse_fetch(field.name, Kind.TRACEPOINT).expr
    except SpecError:
        expr = None
    if isinstance(expr, Named) and expr.param == field.name:
        return field.name
    return f"args.{field.name}"


def field_text(field: TracepointField) -> str:
    kind = listed_type(field)
    text = f"{written_name(field)}:{kind or 'unreadable'}"
    if kind in (None, "x64"):
        text += f"({field.type_text})"
    return text


def event_line(listed: Listed) -> str:
    if listed.format is None:
        return f"{listed.name}  # {listed.error}"
    fields = " ".join(field_text(f) for f in own_fields(listed.format))
    return f"{listed.name}  {fields}" if fields else listed.name


def event_lines(events: list[Listed]) -> list[str]:
    return [event_line(e) for e in events]


def tracepoint_summary(events: list[Listed]) -> str:
    n = len(events)
    return f"{n} tracepoint{'s' if n != 1 else ''}"


def events_data(events: list[Listed]) -> list[dict]:
    """The events as `--json` gives them (the fields' C type as declared,
    `type` as the text line's, null where ktui cannot read the field)."""
    return [{"name": e.name, "id": e.format.id if e.format else None,
             "fields": [_field_data(f) for f in own_fields(e.format)] if e.format else [],
             "error": e.error or None}
            for e in events]


def _field_data(field: TracepointField) -> dict:
    return {"name": field.name, "ctype": field.type_text, "offset": field.offset, "size": field.size,
            "signed": field.signed, "type": listed_type(field), "loc": field.loc}
