"""A private cache of the kernel's function table, keyed by its build id.

Walking vmlinux's BTF and rendering 50,000 prototypes costs seconds under
emulation; the result changes only when the kernel does. Entries live in
$XDG_CACHE_HOME/ktui (~/.cache/ktui), a directory only its owner may use:

- the directory is created 0700 and used only if it is a real directory
  owned by us (a wider mode is narrowed); otherwise there is no cache;
- an entry is read only if it is a regular file owned by us that neither
  group nor others can write, and not larger than MAX_ENTRY;
- an entry is plain text (never pickle): a header naming the format and
  the kernel, then the names and the prototypes, one per line. It is
  checked whole, in C: only printable ASCII, as many names as prototypes
  as the header says. Anything odd is a miss and one log line, and the
  entry is rebuilt. (JSON was tried first: loading and checking 56,000
  pairs took 3 s in the emulated VM);
- writes go to a temporary file in the same directory, renamed over the
  entry: a reader sees the old entry or the new one. No fsync: a torn entry
  after a crash is only a miss;
- at most MAX_ENTRIES kernels are kept, the least recently written go.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from ktui.cachefiles import NotTrusted, cache_dir, private_dir, read_trusted, write_private

log = logging.getLogger(__name__)

FORMAT = 3
MAGIC = b"ktui btf functions %d\n" % FORMAT
KINDS = ("vmlinux", "modules")
_ALLOWED = bytes(range(0x20, 0x7F)) + b"\n\0"
MAX_ENTRY = 32 << 20
MAX_ENTRIES = 4
PREFIX = "btf-"
_KEY = re.compile(r"[0-9a-f]{8,128}-[0-9]{1,12}")


class FunctionCache:
    """name -> prototype tables, per kernel build: "vmlinux" keyed by the
    build id, "modules" (names as `module:name`) by a hash of the loaded
    modules' BTF. Each kind keeps its own MAX_ENTRIES."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else cache_dir()

    def path(self, kind: str, key: str) -> Path:
        if kind not in KINDS or not _KEY.fullmatch(key):
            raise ValueError(f"bad cache entry {kind!r} {key!r}")
        return self.directory / f"{PREFIX}{kind}-{key}.txt"

    # ------------------------------------------------------------ reading
    def load(self, kind: str, key: str) -> tuple[dict[str, str], set[str]] | None:
        """(table, ambiguous names), or None on a miss."""
        path = self.path(kind, key)
        if not self._private_dir(create=False):
            return None
        try:
            raw = read_trusted(path, MAX_ENTRY)
        except NotTrusted as exc:
            log.warning("btf cache: %s: %s; not used", path, exc)
            return None
        if raw is None:
            return None
        try:
            return _parse(raw, key)
        except ValueError as exc:
            log.warning("btf cache: %s: corrupt (%s); rebuilding it", path, exc)
            return None

    # ------------------------------------------------------------ writing
    def store(self, kind: str, key: str, functions: dict[str, str],
              ambiguous: set[str] | frozenset[str] = frozenset()) -> bool:
        """Write the entry; False (and a log line) when the cache cannot be used."""
        path = self.path(kind, key)
        if not self._private_dir(create=True):
            return False
        names = "\n".join(functions)
        protos = "\n".join(functions.values())
        body = b"%s%s\n%d\n%s\0%s\0%s" % (MAGIC, key.encode(), len(functions), names.encode(),
                                           protos.encode(), "\n".join(sorted(ambiguous)).encode())
        if body[len(MAGIC):].translate(None, _ALLOWED) or body.count(b"\0") != 2:
            log.info("btf cache: a name or prototype is not printable ASCII; not cached")
            return False
        if len(body) > MAX_ENTRY:
            log.info("btf cache: %d bytes is over the %d-byte limit; not cached", len(body), MAX_ENTRY)
            return False
        try:
            write_private(path, body, prefix=f".{PREFIX}")
        except OSError as exc:
            log.info("btf cache: %s: %s; not cached", path, exc.strerror or exc)
            return False
        self._prune(kind, keep=path)
        return True

    def _private_dir(self, create: bool) -> bool:
        """Is the directory ours alone (made so when `create`)?"""
        try:
            why = private_dir(self.directory, create)
        except FileNotFoundError:
            return False
        if why:
            log.warning("btf cache: %s: %s; not cached", self.directory, why)
            return False
        return True

    def _prune(self, kind: str, keep: Path) -> None:
        try:
            entries = [e for e in os.scandir(self.directory)
                       if e.name.startswith(f"{PREFIX}{kind}-") and e.name.endswith(".txt")
                       and e.is_file(follow_symlinks=False)]
        except OSError:
            return
        entries.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime, reverse=True)
        for e in entries[MAX_ENTRIES:]:
            if e.path != str(keep):
                try:
                    os.unlink(e.path)
                except OSError:
                    pass


def _parse(raw: bytes, key: str) -> tuple[dict[str, str], set[str]]:
    """The table and ambiguous names of an entry; ValueError says what is
    wrong with it."""
    if len(raw) > MAX_ENTRY:
        raise ValueError("too large")
    if not raw.startswith(MAGIC):
        raise ValueError("not an entry of this format")
    head_key, _, rest = raw[len(MAGIC):].partition(b"\n")
    count_text, _, body = rest.partition(b"\n")
    if head_key != key.encode():
        raise ValueError("an entry for another kernel")
    if body.translate(None, _ALLOWED):
        raise ValueError("bytes other than printable ASCII")
    if not count_text.isdigit() or body.count(b"\0") != 2:
        raise ValueError("no count, or not three parts")
    names_text, protos_text, ambiguous_text = body.decode("ascii").split("\0")
    names = names_text.split("\n") if names_text else []
    protos = protos_text.split("\n") if protos_text else []
    count = int(count_text)
    if not len(names) == len(protos) == count:
        raise ValueError(f"{len(names)} names, {len(protos)} prototypes, count {count}")
    if "" in names:
        raise ValueError("an empty name")
    table = dict(zip(names, protos))
    if len(table) != count:
        raise ValueError("a name given twice")
    return table, set(ambiguous_text.split("\n")) if ambiguous_text else set()
