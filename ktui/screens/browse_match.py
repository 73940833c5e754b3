"""Fuzzy search over every kernel function name, fast enough to run on each
keystroke (no Textual here: tests/unit/test_browse_match.py drives it).

A kernel has 55,000-62,000 probe-able names, and the function browser
re-ranks them on every key. Three tiers, best first:

    prefix       `vfs_r`  -> vfs_read, vfs_readv       (shorter names first)
    substring    `read`   -> vfs_read, ksys_read       (earlier match first)
    subsequence  `vfsrd`  -> vfs_read, vfs_readlink    (shorter names first)

Each tier is found by C-level work, never a Python loop per name: one
regex pass over all names joined by newlines (`findall` with MULTILINE
returns whole matching lines), `str.find` inside a list comprehension over
only the lines that matched, and sorts keyed by builtins. A query that
extends the previous one searches only the previous hits (every name that
matches `vfs_rea` also matches `vfs_re` as a subsequence), so typing gets
faster as the list narrows. On 62,222 names (a 6.18 kernel, this host) a
keystroke ranks in 1-30 ms, the worst being a first letter or a long
pasted query; benchmarks/browse_keys.py reports p50/p99 per keystroke.

Smart case, as in editors: a query in lower case matches any case; one with
a capital letter matches exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_CAP = 100  # rows shown (a tall terminal shows ~40); the count of all matches is still exact
_KEEP = 16  # recent queries whose hits are kept for narrowing and backspace


@dataclass(frozen=True, slots=True)
class Matches:
    query: str
    names: tuple[str, ...]  # the best `cap`, best first
    total: int  # how many names match at all


class Matcher:
    def __init__(self, names) -> None:
        """`names`: every name once (duplicates are dropped), any order.

        Built on the first screen of the function browser, so it must cost
        little: kernel names are almost all lower case already, and only
        the few that are not get a Python loop (a loop over all 60,000 took
        seconds in the emulated VM)."""
        unique = set(names)
        self.names: list[str] = sorted(unique)
        # Lower case: one string per name, ranked; mapped back to the
        # original spellings (a list: `Foo` and `foo` are both kernel names)
        # where they differ; a name that is its own lower case maps to itself.
        mixed = [n for n in self.names if not n.islower() and n.lower() != n]
        self._back: dict[str, list[str]] = {}
        for name in mixed:
            self._back.setdefault(name.lower(), []).append(name)
        for low, spellings in self._back.items():
            if low in unique:
                spellings.append(low)
            spellings.sort()
        self._lower = self.names
        if mixed:  # two sorted runs, merged by one sort in linear time
            gone = set(mixed)
            self._lower = sorted([n for n in self.names if n not in gone] + sorted(set(self._back) - unique))
        self._recent: dict[tuple[str, bool], list[str]] = {}

    def __len__(self) -> int:
        return len(self.names)

    def search(self, query: str, cap: int = DEFAULT_CAP) -> Matches:
        query = query.strip()
        if not query:
            # Nothing typed yet: names a user would probe first, not the
            # `.E_copy`-style local symbols and `__` internals that sort first.
            plain = [n for n in self.names if n[:1].isalpha()][:cap]
            rest = [n for n in self.names if not n[:1].isalpha()][:cap - len(plain)]
            return Matches("", tuple(plain + rest), len(self.names))
        exact = query != query.lower()
        hits = self._hits(query, exact)
        best = _rank(query, hits, cap)
        if exact:
            return Matches(query, tuple(best), len(hits))
        back = self._back
        shown = [name for low in best for name in back.get(low, (low,))][:cap]
        total = len(hits) if len(self._lower) == len(self.names) else sum(len(back[h]) if h in back else 1 for h in hits)
        return Matches(query, tuple(shown), total)

    def _hits(self, query: str, exact: bool) -> list[str]:
        """Every name (lower-cased unless `exact`) holding the query as a
        subsequence, in name order."""
        key = (query, exact)
        found = self._recent.get(key)
        if found is not None:
            return found
        pool = self.names if exact else self._lower
        for n in range(len(query) - 1, 0, -1):  # the longest earlier query this one extends
            narrower = self._recent.get((query[:n], exact))
            if narrower is not None:
                pool = narrower
                break
        found = _subsequence(query, pool)
        if len(self._recent) >= _KEEP:
            self._recent.pop(next(iter(self._recent)))
        self._recent[key] = found
        return found


def _subsequence(query: str, pool: list[str]) -> list[str]:
    """The names of `pool` that hold the characters of `query` in order:
    one regex pass over the joined pool, whole lines out. Each step is
    `[^c\\n]*c` (skip to the next c), which cannot backtrack into itself:
    a lazy `.*?c` made `tcp_send` take 180 ms on 120,000 names."""
    if not pool:
        return []
    if len(query) == 1:
        return [n for n in pool if query in n]
    steps = "".join(f"[^{re.escape(c)}\\n]*{re.escape(c)}" for c in query)
    rx = re.compile(f"^{steps}[^\\n]*$", re.M)
    return rx.findall("\n".join(pool))


def _rank(query: str, hits: list[str], cap: int) -> list[str]:
    """Prefix matches (shorter first), then substring (earlier, then
    shorter), then the rest (shorter first); the best `cap`."""
    inner = [n for n in hits if query in n]
    prefix = [n for n in inner if n.startswith(query)]
    prefix.sort(key=len)  # stable: equal lengths stay in name order
    out = prefix[:cap]
    if len(out) < cap:
        ranked = sorted((n.find(query), len(n), n) for n in inner if not n.startswith(query))
        out.extend(n for _p, _l, n in ranked[: cap - len(out)])
    if len(out) < cap and len(inner) < len(hits):
        loose = [n for n in hits if query not in n]
        loose.sort(key=len)
        out.extend(loose[: cap - len(out)])
    return out
