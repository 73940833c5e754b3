"""`cgroup`: the cgroup v2 directory a hit's task is in, as a fetch, a
count key and a filter operand.

The kernel gives the task's cgroup id (bpf_get_current_cgroup_id), which
is the inode number of its directory under the cgroup v2 mount: 8 bytes
of payload, shown by the directory's path (kernel/symbols/cgroup_names).
A filter compares that id with the inode of the directory its quoted path
names, resolved where the plan is built: exactly that cgroup, not its
descendants (`--cgroup` takes a whole hierarchy). Only the generic
program reads it: a probe that uses it is never compiled.
"""

from __future__ import annotations

from ktui.lang import filters, names
from ktui.lang.model import Builtin, Field, Probe, SpecError, StrLit

CGROUP = Builtin("cgroup")


def is_cgroup(expr: object) -> bool:
    return isinstance(expr, Builtin) and expr.name == "cgroup"


def uses_cgroup(probe: Probe) -> bool:
    """Whether `probe` fetches, counts by or filters on its task's cgroup."""
    if any(is_cgroup(f.expr) for f in probe.fetches):
        return True
    if probe.agg is not None and any(is_cgroup(k.expr) for k in probe.agg.key_fetches):
        return True
    return bool(filter_paths(probe))


def filter_paths(probe: Probe) -> list[str]:
    """The paths `probe`'s filter compares its cgroup with, in order."""
    if probe.filter is None:
        return []
    out = []
    for compare in filters.comparisons(probe.filter):
        for field, lit in ((compare.left, compare.right), (compare.right, compare.left)):
            if isinstance(field, Field) and isinstance(lit, StrLit) and _names_cgroup(probe, field.name):
                out.append(lit.value)
    return out


def _names_cgroup(probe: Probe, name: str) -> bool:
    try:
        return is_cgroup(names.resolve(probe, name).expr)
    except SpecError:
        return False
