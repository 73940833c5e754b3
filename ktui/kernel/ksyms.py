"""Kernel symbols: does a function exist, what is close to a typo, and which
function holds an address. Read from /proc/kallsyms once, on demand."""

from __future__ import annotations

import bisect
import difflib
from pathlib import Path

KALLSYMS = Path("/proc/kallsyms")
BLACKLIST = Path("/sys/kernel/debug/kprobes/blacklist")


class KernelSymbols:
    def __init__(self, kallsyms: Path = KALLSYMS, blacklist: Path = BLACKLIST) -> None:
        self._kallsyms = kallsyms
        self._blacklist_path = blacklist
        self._by_name: dict[str, int] | None = None
        self._addrs: list[int] = []
        self._names: list[str] = []
        self._blacklist: set[str] | None = None

    def _load(self) -> None:
        if self._by_name is not None:
            return
        by_name: dict[str, int] = {}
        pairs: list[tuple[int, str]] = []
        try:
            with self._kallsyms.open() as f:
                for line in f:
                    parts = line.split()
                    if len(parts) < 3 or parts[1] not in "tTwW":
                        continue
                    addr = int(parts[0], 16)
                    name = parts[2]
                    by_name.setdefault(name, addr)
                    pairs.append((addr, name))
        except OSError:
            pass
        pairs.sort()
        self._addrs = [a for a, _ in pairs]
        self._names = [n for _, n in pairs]
        self._by_name = by_name

    @property
    def available(self) -> bool:
        self._load()
        return bool(self._by_name) and any(self._addrs)

    def exists(self, name: str) -> bool:
        self._load()
        return name in self._by_name  # type: ignore[operator]

    def address(self, name: str) -> int | None:
        self._load()
        return self._by_name.get(name)  # type: ignore[union-attr]

    def resolve(self, addr: int) -> tuple[str, int] | None:
        """(function, offset) holding `addr`, or None."""
        self._load()
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

    def close_names(self, name: str, limit: int = 3) -> list[str]:
        self._load()
        # Prefilter to names sharing a prefix or of similar length: difflib over
        # 100k+ kernel symbols at full would take seconds.
        # Renamed functions usually keep the old name as a prefix
        # (kmalloc_trace -> kmalloc_trace_noprof in 6.10+): offer those first.
        renamed = sorted(
            (n for n in self._by_name if n.startswith(name + "_")),  # type: ignore[union-attr]
            key=len,
        )[:limit]
        candidates = [
            n for n in self._by_name  # type: ignore[union-attr]
            if abs(len(n) - len(name)) <= 3 and (n[:2] == name[:2] or n[-3:] == name[-3:])
        ]
        close = difflib.get_close_matches(name, candidates, n=limit, cutoff=0.75)
        return (renamed + [n for n in close if n not in renamed])[:limit]

    def blacklisted(self, name: str) -> bool:
        if self._blacklist is None:
            names: set[str] = set()
            try:
                for line in self._blacklist_path.read_text().splitlines():
                    parts = line.split()
                    if len(parts) >= 2:
                        names.add(parts[1].split("+", 1)[0])
            except OSError:
                pass
            self._blacklist = names
        return name in self._blacklist
