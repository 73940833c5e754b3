"""What the add dialog's spec field completes to, without Textual: the
kernel function's name while the target is typed, then (after `:c:` /
`:r:` and after each comma) the function's parameter names, and after
`param->` the members of the struct it points to. Case-sensitive, as kernel
names are; the first name in sorted order that extends what is typed.
"""

from __future__ import annotations

import bisect

from ktui.screens.browse_model import Functions

_TOKEN_STOPS = ",:="  # what starts a fetch's name inside the fetch list


def complete(functions: Functions, value: str) -> str | None:
    """`value` completed to the first name that extends it, or None."""
    head, colon, rest = value.partition(":")
    if not colon:
        label, eq, partial = head.rpartition("=")
        found = _first_with_prefix(functions.matcher.names, partial)
        return None if found is None else f"{label}{eq}{found}"
    target = head.rpartition("=")[2]
    kind, colon2, fetches = rest.partition(":")
    if not colon2 or kind not in ("c", "r") or target not in functions.entries:
        return None
    cut = max(fetches.rfind(c) for c in _TOKEN_STOPS)
    token = fetches[cut + 1:]
    if not token or (cut >= 0 and fetches[cut] == ":"):  # after a `:`: a type (count:u64)
        return None
    detail = functions.detail(target)
    if detail is None or detail.named:
        return None
    if "->" in token:
        root, _arrow, partial = token.partition("->")
        if "->" in partial or "." in partial:
            return None
        param = next((c for c in detail.params if c.ref == root and c.expandable), None)
        if param is None:
            return None
        names = sorted(c.ref.partition("->")[2] for c in functions.members(detail, param))
        found = _first_with_prefix(names, partial)
        return None if found is None else value + found[len(partial):]
    names = [c.ref for c in detail.params if c.tickable]
    if kind == "r" and detail.retval is not None:
        names.insert(0, "retval")
    found = next((n for n in names if n.startswith(token) and n != token), None)
    return None if found is None else value + found[len(token):]


def _first_with_prefix(names: list[str], prefix: str) -> str | None:
    """The first of sorted `names` that starts with `prefix` and is longer."""
    if not prefix:
        return None
    i = bisect.bisect_left(names, prefix)
    while i < len(names) and names[i].startswith(prefix):
        if names[i] != prefix:
            return names[i]
        i += 1
    return None


