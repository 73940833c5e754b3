"""What the function browser lists beyond the kernel's functions, without
Textual (tests/unit/test_browse_places.py drives it). The query says where
to look:

    sched/sw                    tracepoints, CATEGORY/EVENT: their fields by name
    /usr/bin/bash:read          a binary's or library's functions: a1..a6
    usdt /usr/bin/python3:gc    a file's USDT probe points: a1..aN, from its notes
    vfs_read                    anything else: the kernel's functions (browse_model)

Each reads what `ktui list` reads (tracepoint_list, uprobe_target, usdt)
and says it the same way: a field is shown with the type
`ktui list 'sched/*'` prints, which is the type a probe reads it as, and a
USDT argument as `ktui list --usdt` shows it. What a pick can fetch is a
`Choice`, as for a kernel function's parameters, so the screen ticks both
alike. While a path is typed and names no file yet, the rows are the
names its folder holds that it begins, so a path can be completed from
the list.

A name's pattern is fuzzy (browse_match) or, with `*?[`, a shell glob as
`ktui list` takes. A file's functions are read when its path is first
typed, on the UI thread: /usr/bin/bash (1,895 functions) and libc (2,637)
each take under 10 ms here; the result is kept until the file changes.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from dataclasses import dataclass

from ktui.kernel.symbols.catalog import GLOB_CHARS
from ktui.kernel.symbols.tracepoint_list import LIST_NEEDS_ROOT, field_text, own_fields, written_name
from ktui.kernel.symbols.uprobe_target import ListedFunction, UprobeTargetError, list_functions
from ktui.kernel.symbols.usdt import UsdtProbe, usdt_probes
from ktui.kernel.symbols.usdt_text import arg_words, differing, probe_groups
from ktui.lang.bind_fields import listed_type
from ktui.lang.tracepoints import NEEDS_ROOT, TracepointError, list_categories, list_events, read_format, tracefs_root
from ktui.screens.browse_match import DEFAULT_CAP, Matcher
from ktui.screens.browse_choice import Choice

USDT_WORD = "usdt "  # `usdt /PATH`: the file's USDT probe points, not its functions
SYSV_REGISTERS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")  # a1..a6 on x86-64
KEEP_FILES = 8  # files whose listings are kept (a user going back and forth between a few)


@dataclass(frozen=True, slots=True)
class Query:
    place: str  # "function", "tracepoint", "binary", "usdt"
    path: str  # the file, for "binary" and "usdt" ("" otherwise)
    pattern: str  # what the names are matched against


def parse_query(text: str) -> Query:
    """Where the browser looks for what was typed (the module docstring)."""
    query = text.strip()
    if query == USDT_WORD.strip() or query.startswith(USDT_WORD):
        path, _, pattern = query[len(USDT_WORD):].strip().partition(":")
        return Query("usdt", path, pattern)
    if query.startswith("/"):
        path, _, pattern = query.partition(":")
        return Query("binary", path, pattern)
    if "/" in query:
        return Query("tracepoint", "", query)
    return Query("function", "", query)


@dataclass(frozen=True, slots=True)
class Row:
    id: str  # what `detail` takes
    label: str
    tag: str  # a few words after the label
    tone: str  # "good", "warn", "bad", "dim": how the tag is coloured


@dataclass(frozen=True, slots=True)
class Found:
    rows: tuple[Row, ...]  # the best DEFAULT_CAP, best first
    total: int  # how many match
    of: int  # how many there are
    what: str  # "tracepoints", "functions of /usr/bin/bash"
    problem: str = ""  # why nothing can be listed, one line ("" when it can)
    paths: bool = False  # the rows are files and folders that complete the typed path


@dataclass(frozen=True, slots=True)
class PlaceDetail:
    """One tracepoint, function of a file, or USDT probe point, as the
    browser's right side shows it. `kinds`: the probe kinds it can be
    added as, the first the default (empty: nothing can be added here)."""

    target: str  # as the spec writes it: sched/sched_switch, /usr/bin/bash:readline, /p:prov:name
    kinds: tuple[str, ...]
    title: str
    verdict_line: str
    tone: str
    notes: tuple[str, ...]
    params: tuple[Choice, ...]
    retval: Choice | None = None
    named: str = ""  # (what a kernel Detail says when names cannot be used: never here)

    @property
    def name(self) -> str:
        return self.target


def _search(names: list[str], matcher: Matcher, pattern: str, cap: int) -> tuple[list[str], int]:
    """The best `cap` names for a pattern, and how many match: a shell
    glob when it has `*?[` (as `ktui list` takes), else fuzzy."""
    if GLOB_CHARS.search(pattern):
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        return hits[:cap], len(hits)
    found = matcher.search(pattern, cap)
    return list(found.names), found.total


# ---------------------------------------------------------------- tracepoints


class Tracepoints:
    """Every event under one tracefs (`root`; None: where it is mounted),
    listed on first use (one directory per category: ~2,000 events in
    ~150 folders, a few ms), each one's format read when it is shown."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self._root = root
        self._names: list[str] | None = None
        self._matcher: Matcher | None = None
        self.problem = ""

    def _load(self) -> list[str]:
        if self._names is None:
            try:
                root = self._root if self._root is not None else tracefs_root()
                self._root = root
                self._names = [f"{category}/{event}" for category in list_categories(root)
                               for event in list_events(category, root)]
            except TracepointError as err:
                self.problem = _tracefs_words(err.message)
                self._names = []
            self._matcher = Matcher(self._names)
        return self._names

    def search(self, pattern: str, cap: int = DEFAULT_CAP) -> Found:
        names = self._load()
        if not names:
            return Found((), 0, 0, "tracepoints", self.problem or "no tracepoints under tracefs")
        assert self._matcher is not None
        if pattern.endswith("/") and not GLOB_CHARS.search(pattern):
            pattern += "*"  # a whole category: its events in name order, not shortest first
        shown, total = _search(names, self._matcher, pattern, cap)
        return Found(tuple(Row(n, n, "", "dim") for n in shown), total, len(names), "tracepoints")

    def detail(self, name: str) -> PlaceDetail:
        category, _, event = name.partition("/")
        try:
            fmt = read_format(category, event, self._root)
        except TracepointError as err:
            return PlaceDetail(name, (), name, _tracefs_words(err.message), "bad", (), ())
        fields = own_fields(fmt)
        return PlaceDetail(name, ("t",), f"{name}  (id {fmt.id})",
                           "tracepoint: fields read as the type shown", "good",
                           ("no fields of its own",) if not fields else (), tuple(_field(f) for f in fields))


def _field(field) -> Choice:
    kind = listed_type(field)
    why = "" if kind is not None else "ktui cannot read this field yet"
    # A char pointer is an address unless the user says whose memory it
    # points into: `:string` (kernel) or `:ustring` (a syscall's argument).
    text = kind == "x64" and "char" in field.type_text and "*" in field.type_text
    return Choice(written_name(field), field_text(field), why, text=text)


def _tracefs_words(message: str) -> str:
    return LIST_NEEDS_ROOT if message == NEEDS_ROOT else message


# ---------------------------------------------------------------- files


@dataclass(frozen=True, slots=True)
class _FileListing:
    stamp: tuple[int, int, int]  # (inode, size, mtime): a file rebuilt is read again
    names: list[str]
    matcher: Matcher
    functions: dict[str, list[ListedFunction]]
    usdt: dict[str, list[UsdtProbe]]
    problem: str


class Files:
    """The functions and USDT probe points of files, read on first use and
    kept (KEEP_FILES of them) until a file changes."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], _FileListing] = {}

    def search(self, query: Query, cap: int = DEFAULT_CAP) -> Found:
        what = ("USDT probes of " if query.place == "usdt" else "functions of ") + (query.path or "…")
        if not query.path:
            return Found((), 0, 0, what, "type the absolute path of a program or library: usdt /PATH")
        if not _is_file(query.path):
            return _path_rows(query, cap)
        listing = self._listing(query.place, query.path)
        if listing.problem:
            return Found((), 0, 0, what, listing.problem)
        shown, total = _search(listing.names, listing.matcher, query.pattern, cap)
        rows = tuple(self._row(query, listing, name) for name in shown)
        return Found(rows, total, len(listing.names), what)

    def detail(self, query: Query, id_: str) -> PlaceDetail:
        if not _is_file(query.path):
            return _path_detail(query, id_)
        listing = self._listing(query.place, query.path)
        if query.place == "usdt":
            return _usdt_detail(query.path, listing.usdt[id_])
        return _function_detail(query.path, listing.functions[id_])

    def _row(self, query: Query, listing: _FileListing, name: str) -> Row:
        if query.place == "usdt":
            sites = listing.usdt[name]
            args = len(sites[0].args)
            tag = f"{args} arg{'s' if args != 1 else ''}" + (f", {len(sites)} sites" if len(sites) > 1 else "")
            return Row(name, name, tag, "good")
        fn = listing.functions[name][0]
        if fn.imported:
            return Row(name, name, "import", "bad")
        if fn.file_offset is None:
            return Row(name, name, "no code segment", "bad")
        return Row(name, name, "ifunc" if fn.ifunc else f"{fn.size} bytes", "warn" if fn.ifunc else "dim")

    def _listing(self, place: str, path: str) -> _FileListing:
        key = (place, path)
        stamp = _stamp(path)
        kept = self._kept.get(key)
        if kept is None or kept.stamp != stamp:
            kept = _read_usdt(path, stamp) if place == "usdt" else _read_functions(path, stamp)
            self._kept.pop(key, None)
            if len(self._kept) >= KEEP_FILES:
                self._kept.pop(next(iter(self._kept)))
            self._kept[key] = kept
        return kept


def _read_functions(path: str, stamp) -> _FileListing:
    try:
        every = list_functions(path)
    except UprobeTargetError as err:
        return _FileListing(stamp, [], Matcher(()), {}, {}, err.message)
    by_name: dict[str, list[ListedFunction]] = {}
    for fn in every:
        by_name.setdefault(fn.name, []).append(fn)
    names = sorted(by_name)
    problem = "" if names else f"{path} has no functions in its symbol tables"
    return _FileListing(stamp, names, Matcher(names), by_name, {}, problem)


def _read_usdt(path: str, stamp) -> _FileListing:
    try:
        groups = probe_groups(usdt_probes(path))
    except UprobeTargetError as err:  # (UsdtError is one)
        return _FileListing(stamp, [], Matcher(()), {}, {}, err.message)
    problem = "" if groups else (f"{path} has no USDT probes (no .note.stapsdt notes: built without "
                                 "sys/sdt.h probes, or stripped)")
    return _FileListing(stamp, list(groups), Matcher(groups), {}, groups, problem)


def _function_detail(path: str, fns: list[ListedFunction]) -> PlaceDetail:
    fn = fns[0]
    target = f"{path}:{fn.name}"
    if fn.imported:
        return PlaceDetail(target, (), f"{fn.name}  (import)", f"{path} calls {fn.name} from a shared library: "
                           f"probe it there (ldd {path} lists them)", "bad", (), ())
    if fn.file_offset is None:
        return PlaceDetail(target, (), fn.name, f"0x{fn.address:x} is in no code segment of {path}", "bad", (), ())
    notes = ["no prototypes in ELF: a1..a6, read as u64"]
    if len(fns) > 1:
        notes.insert(0, f"{len(fns)} functions of this name: the probe needs one, by its address "
                        f"({', '.join(f'{path}:0x{f.address:x}' for f in fns[:3])})")
    if fn.ifunc:
        notes.insert(0, "an indirect function (IFUNC): its address is the resolver, not the code that runs")
    params = tuple(Choice(f"a{i}", f"argument {i} ({reg})", "", register=f"a{i}")
                   for i, reg in enumerate(SYSV_REGISTERS, 1))
    return PlaceDetail(target, ("c", "r"), f"{fn.name}  0x{fn.address:x}  file 0x{fn.file_offset:x}  "
                       f"{fn.size} bytes", "uprobe at its entry (a uretprobe at return)", "good", tuple(notes), params, Choice("retval", "retval  (rax)", ""))


def _usdt_detail(path: str, sites: list[UsdtProbe]) -> PlaceDetail:
    first = sites[0]
    odd = set(differing(sites)) if len(sites) > 1 else set()
    params = []
    for i, arg in enumerate(first.args, 1):
        why = f"not read: {arg.problem}" if arg.expr is None else ""
        if not why and f"a{i}" in odd:
            why = f"in a different place at its {len(sites)} sites: not read"
        params.append(Choice(f"a{i}", arg_words(arg), why, register=f"a{i}"))
    notes = []
    if len(sites) > 1:
        notes.append(f"inlined at {len(sites)} sites: a breakpoint at each")
    if first.semaphore:
        notes.append("a semaphore: arguments computed only while probed")
    if not first.args:
        notes.append("no arguments")
    return PlaceDetail(f"{path}:{first.full_name}", ("usdt",), first.full_name,
                       "USDT probe: arguments where its note puts them", "good", tuple(notes),
                       tuple(params))


# ---------------------------------------------------------------- a path being typed


def _is_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _stamp(path: str) -> tuple[int, int, int]:
    info = os.stat(path)
    return info.st_ino, info.st_size, info.st_mtime_ns


def _path_rows(query: Query, cap: int) -> Found:
    """The files and folders that complete a path typed so far: a folder
    (`/usr/bin/`) lists what it holds, `/usr/bin/ba` what begins so."""
    folder, begins = os.path.split(query.path)
    what = f"files in {folder or '/'}"
    try:
        with os.scandir(folder or "/") as entries:
            found = sorted((e.name, e.is_dir()) for e in entries
                           if e.name.startswith(begins) and (begins or not e.name.startswith(".")))
    except OSError as err:
        return Found((), 0, 0, what, f"{folder}: {err.strerror}", paths=True)
    if not found:
        return Found((), 0, 0, what, f"nothing in {folder or '/'} begins with {begins!r}", paths=True)
    rows = tuple(Row(os.path.join(folder, name), name + ("/" if is_dir else ""), "folder" if is_dir else "",
                     "dim") for name, is_dir in found[:cap])
    return Found(rows, len(found), len(found), what, paths=True)


def _path_detail(query: Query, path: str) -> PlaceDetail:
    what = "its USDT probes" if query.place == "usdt" else "its functions"
    line = "a folder: enter opens it" if os.path.isdir(path) else f"enter lists {what}"
    return PlaceDetail(path, (), path, line, "dim", (), ())


def completed(query: Query, path: str) -> str:
    """The query once the row `path` is picked: into a folder, or on to
    the file's names (`PATH:` for its functions)."""
    head = USDT_WORD if query.place == "usdt" else ""
    if os.path.isdir(path):
        return f"{head}{path.rstrip('/')}/"
    return f"{head}{path}" if query.place == "usdt" else f"{path}:"


class Places:
    """Everything the browser lists beside the kernel's functions, kept
    for the run (shared, like FunctionIndex, by every opening of it)."""

    def __init__(self, tracefs: str | os.PathLike[str] | None = None) -> None:
        self.tracepoints = Tracepoints(tracefs)
        self.files = Files()

    def search(self, query: Query, cap: int = DEFAULT_CAP) -> Found:
        if query.place == "tracepoint":
            return self.tracepoints.search(query.pattern, cap)
        return self.files.search(query, cap)

    def detail(self, query: Query, id_: str) -> PlaceDetail:
        if query.place == "tracepoint":
            return self.tracepoints.detail(id_)
        return self.files.detail(query, id_)
