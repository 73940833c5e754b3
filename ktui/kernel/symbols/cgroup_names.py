"""Cgroup ids -> their paths under the cgroup v2 mount.

The kernel's cgroup id (bpf_get_current_cgroup_id) is the inode number of
the cgroup's directory in cgroupfs (kernfs: 64-bit ids, never reused
while the machine runs; a v2 cgroup cannot be renamed), so walking the tree by inode names every cgroup
there is. The table is kept; an id not in it (a cgroup made since the
last walk) walks the tree again, at most once a second (a container
starting or stopping should not make every batch walk thousands of
directories); one still unknown (removed before it was seen, or in
another cgroup namespace) is `cgroup:<id>` (record.cgroups).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable

from ktui.record.cgroups import unknown

WALK_EVERY = 1.0  # seconds between two walks for unknown ids
WALK_MAX = 100_000  # directories one walk visits at most (a runaway tree is cut, not followed)


def walk(root: str) -> dict[int, str]:
    """Every directory under `root` by its inode: the path relative to it,
    `/` for the root itself; nothing where `root` cannot be read. Symlinks
    are not followed (cgroupfs has none; a test tree could loop)."""
    try:
        out = {os.stat(root).st_ino: "/"}
    except OSError:
        return {}
    stack = [(root, "")]
    while stack and len(out) < WALK_MAX:
        where, rel = stack.pop()
        try:
            entries = list(os.scandir(where))
        except OSError:  # removed while we walked, or not ours to read
            continue
        for entry in entries:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                ino = entry.inode()
            except OSError:
                continue
            path = f"{rel}/{entry.name}" if rel else entry.name
            out[ino] = path
            stack.append((entry.path, path))
    return out


class CgroupNames:
    """id -> path (`__call__`), thread-safe: the event decoder and the
    stats reader both ask. `root`: the cgroup v2 mount (None: there is
    none here, and every id is unknown)."""

    def __init__(self, root: str | None, *, clock: Callable[[], float] = time.monotonic,
                 every: float = WALK_EVERY) -> None:
        self.root = root
        self._clock = clock
        self._every = every
        self._paths: dict[int, str] = {}
        self._walked: float | None = None
        self.walks = 0
        self._lock = threading.Lock()

    def __call__(self, cgid: int) -> str:
        with self._lock:
            path = self._paths.get(cgid)
            if path is None and self.root is not None and self._may_walk():
                self._walk()
                path = self._paths.get(cgid)
            return path if path is not None else unknown(cgid)

    def _may_walk(self) -> bool:
        return self._walked is None or self._clock() - self._walked >= self._every

    def _walk(self) -> None:
        # ids are never reused, so a removed cgroup's name stays right: kept
        # (its last events may still be in the ring)
        self._paths.update(walk(self.root))
        self._walked = self._clock()
        self.walks += 1
