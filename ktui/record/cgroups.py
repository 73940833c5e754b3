"""A `cgroup` value: the kernel writes the task's cgroup id (8 bytes); a
reader names it through a `CgroupName` (id -> the directory's path under
the cgroup v2 mount: kernel/symbols/cgroup_names live, a recording's own
table in a replay), and the dashboard shortens what the path says.

Paths are relative to the mount (`system.slice/nginx.service`), `/` for
the root. An id nobody can name (a cgroup created after the last walk of
the tree, or removed before it) is `cgroup:<id>`, never another name.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

CgroupName = Callable[[int], str]

# a container's scope as its runtime names it: systemd's driver makes
# `<runtime>-<64 hex>.scope`, cgroupfs' driver `docker/<64 hex>`
_SCOPE = re.compile(r"(?:^|/)(docker|cri-containerd|crio|libpod)-([0-9a-f]{64})\.scope$")
_CGROUPFS = re.compile(r"(?:^|/)(docker)/([0-9a-f]{64})$")
_RUNTIMES = {"docker": "docker", "cri-containerd": "containerd", "crio": "crio", "libpod": "podman"}


def unknown(cgid: int) -> str:
    return f"cgroup:{cgid}"


def names_of(name: CgroupName | None, ids: Iterable[int]) -> list[str]:
    """`ids` named (each distinct id asked once: a batch's events mostly
    share a few cgroups); without a namer, every one unknown."""
    seen: dict[int, str] = {}
    out = []
    for cgid in ids:
        if cgid not in seen:
            seen[cgid] = name(cgid) if name is not None else unknown(cgid)
        out.append(seen[cgid])
    return out


def short(path: str) -> str:
    """What the dashboard shows of a cgroup's path: a container's scope as
    `runtime:<first 12 hex of its id>` (a container's name needs its
    runtime, which ktui does not ask), anything else as it is."""
    found = _SCOPE.search(path) or _CGROUPFS.search(path)
    if found is None:
        return path
    return f"{_RUNTIMES[found.group(1)]}:{found.group(2)[:12]}"
