"""A tracepoint's record, as tracefs describes it in `events/CAT/NAME/format`.

    name: sys_enter_openat
    ID: 749
    format:
    	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
    	...
    	field:int dfd;	offset:16;	size:8;	signed:0;
    	field:const char * filename;	offset:24;	size:8;	signed:0;
    	field:__data_loc char[] name;	offset:8;	size:4;	signed:0;
    	field:char comm[16];	offset:8;	size:16;	signed:0;

`parse_format` turns that text into a frozen `TracepointFormat` (pure: the
tests feed it Debian 6.1's and 6.12's real files); `read_format` reads it
from tracefs, which is mode 0700 (root only), and says in one line why it
cannot: no such event (with the category's close names), tracefs not
mounted, or not readable. `lang.bind` binds a tracepoint probe's names to
these fields; nothing here runs in the kernel, and no text of the format
ever becomes C (only offsets and sizes, as numbers).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ktui.lang.model import KtuiError, Probe

TRACEFS_ROOTS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
NEEDS_ROOT = "reading tracepoint formats needs root (tracefs is mode 0700)"
NOT_MOUNTED = ("tracefs is not mounted (neither /sys/kernel/tracing nor /sys/kernel/debug/tracing "
               "has events/): mount -t tracefs nodev /sys/kernel/tracing")
FORMAT_MAX = 1 << 20  # a format file is a few KiB; kmalloc's print fmt is the longest, ~10 KiB
_NAME = re.compile(r"[A-Za-z0-9_]+\Z")  # a tracefs category or event name (never a path)
_DECL = re.compile(r"(?P<type>.*?)\s*\b(?P<name>[A-Za-z_]\w*)\s*(?:\[(?P<array>[^\]]*)\])?\Z")


class TracepointError(KtuiError):
    """A format that cannot be read or parsed; one line. `unknown`: tracefs
    has no such event (a typo, or a module that is not loaded)."""

    def __init__(self, message: str, *, unknown: bool = False) -> None:
        super().__init__(message)
        self.unknown = unknown


@dataclass(frozen=True)
class TracepointField:
    """One field of the record. `ctype` is the C type as the format says it,
    without the array or the __data_loc word (`const char *`, `char`,
    `unsigned long`); `loc` is "data" for `__data_loc`, "rel" for
    `__rel_loc` (a u32 at `offset` locating the bytes), else ""; `array` is
    the element count of an inline array (`char comm[16]`), else None."""

    name: str
    ctype: str
    offset: int
    size: int
    signed: bool
    loc: str = ""
    array: int | None = None

    @property
    def type_text(self) -> str:
        """The declared type, for messages and the UI: `char[16]`,
        `__data_loc char[]`, `const char *`."""
        if self.loc:
            return f"__{self.loc}_loc {self.ctype}[]"
        if self.array is not None:
            return f"{self.ctype}[{self.array}]"
        return self.ctype

    @property
    def is_pointer(self) -> bool:
        return self.ctype.endswith("*")

    @property
    def is_char(self) -> bool:
        """Whether its elements (or it) are characters: text when an array."""
        return _base(self.ctype) in ("char", "signed char", "unsigned char")


@dataclass(frozen=True)
class TracepointFormat:
    name: str  # the event's name (`sys_enter_openat`), as the file says
    id: int
    fields: tuple[TracepointField, ...]

    def field(self, name: str) -> TracepointField | None:
        return next((f for f in self.fields if f.name == name), None)

    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]


def _base(ctype: str) -> str:
    return " ".join(w for w in ctype.split() if w not in ("const", "volatile"))


# ---------------------------------------------------------------- parsing


def parse_format(text: str) -> TracepointFormat:
    """The text of a `format` file -> TracepointFormat. Raises
    TracepointError (one line, naming the line) on what it cannot read."""
    name, event_id, fields = "", None, []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("name:") and not name:
            name = stripped[len("name:"):].strip()
        elif stripped.startswith("ID:") and event_id is None:
            value = stripped[len("ID:"):].strip()
            if not value.isdigit():
                raise TracepointError(f"format line {number}: ID is not a number: {value[:40]!r}")
            event_id = int(value)
        elif stripped.startswith("field:"):
            fields.append(_parse_field(stripped, number))
        elif stripped.startswith("print fmt:"):
            break  # the rest is C for the kernel's own printing: not ours to read
    if not name or event_id is None:
        raise TracepointError("not a tracepoint format: no name: or ID: line")
    return TracepointFormat(name=name, id=event_id, fields=tuple(fields))


def _parse_field(line: str, number: int) -> TracepointField:
    """`field:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;`"""
    parts = {}
    for item in line.split(";"):
        key, sep, value = item.strip().partition(":")
        if sep:
            parts[key] = value.strip()
    decl = parts.get("field", "")
    try:
        offset, size = int(parts["offset"]), int(parts["size"])
        signed = parts.get("signed", "0") == "1"  # kernels before 2.6.32 did not say
    except (KeyError, ValueError):
        raise TracepointError(f"format line {number}: expected offset:N; size:N; after the field, "
                              f"got {line[:80]!r}") from None
    loc = ""
    for word, kind in (("__data_loc ", "data"), ("__rel_loc ", "rel")):
        if decl.startswith(word):
            decl, loc = decl[len(word):].replace("[]", " ", 1), kind
    m = _DECL.match(decl.strip())
    if m is None or not m.group("type"):
        raise TracepointError(f"format line {number}: cannot read the field {decl[:80]!r}")
    ctype = " ".join(m.group("type").replace("*", " * ").split()).replace("* *", "**")
    array = None
    if m.group("array") is not None and not loc:
        count = m.group("array").strip()
        # A size the kernel left as a macro (old kernels): count bytes then.
        array = int(count) if count.isdigit() else size
    return TracepointField(m.group("name"), ctype, offset, size, signed, loc, array)


# ---------------------------------------------------------------- tracefs


def tracefs_root() -> Path:
    """Where tracefs is mounted; TracepointError when nowhere readable."""
    denied = False
    for root in TRACEFS_ROOTS:
        try:
            os.stat(os.path.join(root, "events"))
            return Path(root)
        except PermissionError:
            denied = True
        except OSError:
            continue
    raise TracepointError(NEEDS_ROOT if denied else NOT_MOUNTED)


def read_format(category: str, name: str, root: str | os.PathLike[str] | None = None) -> TracepointFormat:
    """`events/CATEGORY/NAME/format` under tracefs (`root`, else where it is
    mounted), parsed. TracepointError says why not, in one line."""
    for part in (category, name):
        if not _NAME.match(part):
            raise TracepointError(f"not a tracepoint name: {part[:60]!r} (letters, digits and _)")
    base = Path(root) if root is not None else tracefs_root()
    path = base / "events" / category / name / "format"
    try:
        with open(path, "rb") as handle:
            data = handle.read(FORMAT_MAX + 1)
    except PermissionError:
        raise TracepointError(NEEDS_ROOT) from None
    except FileNotFoundError:
        raise TracepointError(no_event_message(base, category, name), unknown=True) from None
    except OSError as err:
        raise TracepointError(f"cannot read {path}: {err.strerror or err}") from None
    if len(data) > FORMAT_MAX:
        raise TracepointError(f"{category}/{name}: format larger than {FORMAT_MAX} bytes")
    try:
        return parse_format(data.decode("utf-8", errors="replace"))
    except TracepointError as err:
        raise TracepointError(f"{category}/{name}: {err.message}") from None


def list_events(category: str, root: str | os.PathLike[str] | None = None) -> list[str]:
    """The events of one category, by name ([] when there is no such category)."""
    base = Path(root) if root is not None else tracefs_root()
    return _subdirs(base / "events" / category)


def list_categories(root: str | os.PathLike[str] | None = None) -> list[str]:
    base = Path(root) if root is not None else tracefs_root()
    return _subdirs(base / "events")


def _subdirs(path: Path) -> list[str]:
    try:
        return sorted(e.name for e in os.scandir(path) if e.is_dir())
    except PermissionError:
        raise TracepointError(NEEDS_ROOT) from None
    except OSError:
        return []


def no_event_message(base: Path, category: str, name: str) -> str:
    """No event `category/name` under tracefs `base`: with the category's
    close names, or close categories when the category is not there."""
    events = list_events(category, base)
    if events:
        close = difflib.get_close_matches(name, events, n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(f'{category}/{c}' for c in close)}?)" if close else ""
        return f"no tracepoint {category}/{name}{hint}"
    close = difflib.get_close_matches(category, list_categories(base), n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"no tracepoint category {category!r}{hint}: no tracepoint {category}/{name}"


# ---------------------------------------------------------------- notes


def sys_enter_user_string_note(probe: Probe) -> str | None:
    """What to know about a user string read at a syscall's entry, or None.

    At sys_enter the arguments are the user's pointers: a page of the
    string that is not in memory yet reads as nothing (a probe cannot
    fault it in), so a first open of a path may show an empty name."""
    tracepoint = probe.target.tracepoint
    if tracepoint is None or not tracepoint.startswith("syscalls/sys_enter_"):
        return None
    if not _reads_user_string(probe):
        return None
    return ("at sys_enter a user string that is not paged in yet reads as empty "
            "(the probe cannot fault it in); a return probe on the syscall's function "
            "(e.g. do_sys_openat2:r:filename:ustring) reads it after the kernel copied it")


def _reads_user_string(probe: Probe) -> bool:
    fetches = probe.fetches + (probe.agg.fetches() if probe.agg is not None else ())
    if any(f.type == "ustring" for f in fetches):
        return True
    for bound in (probe.bindings or {}).values():
        if bound.binding is not None and bound.binding.type == "ustring":
            return True
    return False
