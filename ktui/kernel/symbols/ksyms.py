"""Kernel symbols: does a function exist, in which module, what is close to
a typo, and which function holds an address. Read from /proc/kallsyms once,
on demand.

/proc/kallsyms is 100,000+ lines, and Python's per-line loop over it took
seconds in the emulated VM. Names and modules are therefore pulled out with
one regular expression over the whole text and turned into a dict in C
(`dict(pairs)`); addresses are parsed only when an address is asked about
(symbolising a fetched pointer), in a second pass.

Names are readable by every user; addresses only by root (others see
zeros, kptr_restrict), which is why `has_addresses` is separate.

Compiler copies of a function (`vfs_read.constprop.0`, `.isra.N`,
`.part.N`, `.cold`, clang's `.llvm.N`) are their own symbols: `copy_of()`
names the function they were made from.
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections import Counter
from operator import itemgetter
from pathlib import Path

KALLSYMS = Path("/proc/kallsyms")
BLACKLIST = Path("/sys/kernel/debug/kprobes/blacklist")

# Symbols that are not functions one would probe: ftrace/CFI padding in
# front of every function (6.2+), static-call trampolines.
NOT_FUNCTIONS = ("__pfx_", "__cfi_", "__SCT__")
# Unanchored: a type letter between spaces occurs only after the address,
# and scanning for it is 2.5 times faster than matching every line. The
# name is matched possessively so that the lookahead after it can leave out
# the pseudo-modules kallsyms also shows: BPF programs ([bpf]), ftrace and
# kprobe trampolines and insn slots ([__builtin__ftrace], ...).
_TEXT_NAMES = re.compile(r" [tTwW] (?!__pfx_|__cfi_|__SCT__)([^\t\n]++)"
                         r"(?!\t\[(?:bpf|__builtin__[^\]\n]*)\])(?:\t\[([^\]\n]+)\])?")
_TEXT_ADDRS = re.compile(r"^([0-9a-fA-F]+) [tTwW] (\S+)", re.M)
# The suffixes GCC and clang give to a function's specialised or split copies.
_COPY = re.compile(r"^(.+?)((?:\.(?:constprop|isra|part|cold|llvm)(?:\.\d+)?)+)$")


def copy_of(name: str) -> tuple[str, str] | None:
    """(original, suffix) for a compiler copy's name, else None."""
    m = _COPY.match(name)
    return (m.group(1), m.group(2)) if m else None


class KernelSymbols:
    def __init__(self, kallsyms: Path = KALLSYMS, blacklist: Path = BLACKLIST) -> None:
        self._kallsyms = kallsyms
        self._blacklist_path = blacklist
        self._text: str | None = None
        self._modules: dict[str, str] | None = None  # function -> module ("" for vmlinux)
        self._shared: dict[str, int] = {}  # names several symbols share -> how many
        self._in_modules: dict[str, str] = {}
        self._addrs: list[int] | None = None
        self._names: list[str] = []
        self._by_name: dict[str, int] = {}
        self._blacklist: set[str] | None = None
        self.error: str | None = None  # why kallsyms could not be read

    # ------------------------------------------------------------ loading
    def _read(self) -> str:
        if self._text is None:
            try:
                self._text = self._kallsyms.read_bytes().decode("ascii", "replace")
            except OSError as exc:
                self.error = f"{self._kallsyms}: {exc.strerror}"
                self._text = ""
        return self._text

    def _load(self) -> dict[str, str]:
        if self._modules is None:
            pairs = _TEXT_NAMES.findall(self._read())
            self._modules = dict(pairs)
            self._in_modules = dict(filter(itemgetter(1), pairs))  # in C: no per-name Python
            counts = Counter(map(itemgetter(0), pairs)) if len(self._modules) != len(pairs) else {}
            self._shared = {n: c for n, c in counts.items() if c > 1}
        return self._modules

    def _load_addresses(self) -> None:
        if self._addrs is not None:
            return
        pairs = sorted((int(a, 16), n) for a, n in _TEXT_ADDRS.findall(self._read()))
        self._addrs = [a for a, _ in pairs]
        self._names = [n for _, n in pairs]
        by_name: dict[str, int] = {}
        for a, n in pairs:
            by_name.setdefault(n, a)
        self._by_name = by_name

    # ------------------------------------------------------------ names
    @property
    def available(self) -> bool:
        return bool(self._load())

    def names(self) -> dict[str, str]:
        """Every function symbol -> its module ("" for vmlinux)."""
        return self._load()

    def exists(self, name: str) -> bool:
        return name in self._load()

    def module(self, name: str) -> str | None:
        """The module holding `name` ("" = vmlinux), or None if no such symbol."""
        return self._load().get(name)

    def count(self, name: str) -> int:
        """How many function symbols are called `name` (static functions of
        different files may share one)."""
        mods = self._load()
        if name not in mods:
            return 0
        return self._shared.get(name, 1)

    def module_functions(self) -> dict[str, str]:
        """Function symbols of loaded modules -> their module."""
        self._load()
        return self._in_modules

    def shared(self) -> dict[str, int]:
        """Names that several function symbols share -> how many."""
        self._load()
        return self._shared

    def close_names(self, name: str, limit: int = 3, extra: set[str] | frozenset[str] = frozenset()) -> list[str]:
        """Names close to a typo, from kallsyms (and `extra`, e.g. BTF's).
        Compiler copies are offered as the function they were made from."""
        return close_names(name, set(self._load()) | set(extra), limit)


    # ------------------------------------------------------------ addresses
    @property
    def has_addresses(self) -> bool:
        self._load_addresses()
        return any(self._addrs or ())

    def address(self, name: str) -> int | None:
        self._load_addresses()
        return self._by_name.get(name)

    def resolve(self, addr: int) -> tuple[str, int] | None:
        """(function, offset) holding `addr`, or None."""
        self._load_addresses()
        assert self._addrs is not None
        i = bisect.bisect_right(self._addrs, addr) - 1
        if i < 0 or not self._addrs[i]:
            return None
        return self._names[i], addr - self._addrs[i]

    def symbolize(self, addr: int) -> str:
        found = self.resolve(addr)
        if found is None:
            return f"0x{addr:x}"
        name, off = found
        return f"{name}+0x{off:x}" if off else name

    # ------------------------------------------------------------ blacklist
    @property
    def blacklist_path(self) -> Path:
        return self._blacklist_path

    def blacklist(self) -> set[str] | None:
        """Functions the kprobe blacklist refuses; None if it cannot be read
        (debugfs not mounted, or not root)."""
        if self._blacklist is None:
            names: set[str] = set()
            try:
                text = self._blacklist_path.read_text(errors="replace")
            except OSError:
                return None
            for line in text.splitlines():
                parts = line.split()
                if len(parts) >= 2:
                    names.add(parts[1].split("+", 1)[0])
            self._blacklist = names
        return self._blacklist

    def blacklisted(self, name: str) -> bool:
        return name in (self.blacklist() or ())


def close_names(name: str, universe: set[str], limit: int = 3, cutoff: float = 0.75) -> list[str]:
    """Up to `limit` names of `universe` close to `name`, best first.

    difflib over 100,000+ kernel symbols at full would take seconds, so the
    candidates are first cut to names of similar length that share the first
    letter or the ending (short module names: xsf -> xfs). Renamed functions usually keep the old name as a prefix
    (kmalloc_trace -> kmalloc_trace_noprof in 6.10+): those come first.
    Copies (`x.isra.0`) count as their original, `x`. Short names need a
    lower `cutoff` (xsf -> xfs scores 0.67)."""
    bases: set[str] = set()
    for n in universe:
        c = copy_of(n) if "." in n else None
        bases.add(c[0] if c else n)
    bases.discard(name)
    renamed = sorted((n for n in bases if n.startswith(name + "_")), key=len)[:limit]
    candidates = [
        n for n in bases
        if abs(len(n) - len(name)) <= 3 and (n[:1] == name[:1] or n[-3:] == name[-3:])
    ]
    close = difflib.get_close_matches(name, candidates, n=limit, cutoff=cutoff)
    return (renamed + [n for n in close if n not in renamed])[:limit]
