"""--cgroup: the probes count only the tasks of one cgroup v2 directory and
its descendants (a container's, a systemd unit's).

The kernel answers "is this task under that cgroup?" with
bpf_current_task_under_cgroup over a cgroup array holding the directory's
fd: the whole hierarchy below it, where bpf_get_current_cgroup_id would
give only the task's leaf. A path is the directory under /sys/fs/cgroup
(absolute, or relative to the cgroup v2 mount: `system.slice/ssh.service`;
on a hybrid machine that mount is /sys/fs/cgroup/unified). Only cgroup v2:
a v1 hierarchy's directory is refused in one line, as is a path that is
not a directory of the cgroup file system.
"""

from __future__ import annotations

import ctypes
import os

from ktui.lang.model import KtuiError

ROOT = "/sys/fs/cgroup"
CGROUP2_SUPER_MAGIC = 0x63677270  # include/uapi/linux/magic.h
MOUNTS = "/proc/self/mounts"


class CgroupError(KtuiError):
    """A --cgroup that cannot scope the probes (one line)."""


def cgroup2_root(mounts: str = MOUNTS) -> str | None:
    """Where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup where it is
    (the unified layout), else the first cgroup2 mount (a hybrid machine's
    /sys/fs/cgroup/unified); None where none is."""
    try:
        with open(mounts, encoding="utf-8", errors="replace") as f:
            points = [line.split()[1] for line in f if len(line.split()) > 2 and line.split()[2] == "cgroup2"]
    except OSError:
        return None
    points = [p.replace("\\040", " ") for p in points]
    return ROOT if ROOT in points else (points[0] if points else None)


def cgroup_path(path: str, root: str | None = None, what: str | None = None) -> str:
    """The directory `path` names: itself when absolute, else under the
    cgroup v2 mount (`root`, else the machine's); CgroupError when none is."""
    if os.path.isabs(path):
        return path
    root = root or cgroup2_root()
    if root is None:
        raise CgroupError(f"{what or f'--cgroup {path}'}: no cgroup v2 hierarchy is mounted here (cgroup v1 only): "
                          "ktui scopes by cgroup v2 only")
    return os.path.join(root, path)


def open_cgroup(path: str, root: str | None = None, what: str | None = None) -> int:
    """An fd of the cgroup v2 directory `path` names (close it when done);
    CgroupError saying why it cannot be one, each message starting with
    `what` (default: `--cgroup PATH`)."""
    what = what or f"--cgroup {path}"
    where = cgroup_path(path, root, what)
    try:
        fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CgroupError(f"{what}: no such cgroup ({where} does not exist)") from None
    except NotADirectoryError:
        raise CgroupError(f"{what}: {where} is not a directory: a cgroup is one") from None
    except OSError as exc:
        raise CgroupError(f"{what}: {where}: {exc.strerror}") from None
    magic = fs_magic(fd)
    if magic != CGROUP2_SUPER_MAGIC:
        os.close(fd)
        raise CgroupError(f"{what}: {where} is not in a cgroup v2 hierarchy (ktui scopes by cgroup v2 "
                          "only; a machine with cgroup v1 alone cannot)")
    return fd


def cgroup_id(path: str, root: str | None = None) -> int:
    """The id the kernel gives tasks of the cgroup v2 directory `path`
    names (bpf_get_current_cgroup_id: the directory's inode), for a filter's
    `cgroup == "PATH"`; `/` is the root cgroup (as events show it), not
    the file system's root. CgroupError (one line) where it is no cgroup."""
    what = f'filter: cgroup "{path}"'
    if path == "/":
        root = root or cgroup2_root()
        path = root if root is not None else path
    fd = open_cgroup(path, root, what=what)
    try:
        return os.fstat(fd).st_ino
    finally:
        os.close(fd)


class _Statfs(ctypes.Structure):
    # struct statfs on 64-bit Linux: f_type first; the rest is room
    _fields_ = [("f_type", ctypes.c_long), ("rest", ctypes.c_byte * 112)]


def fs_magic(fd: int) -> int:
    """The file system type of what `fd` is open on (fstatfs's f_type)."""
    libc = ctypes.CDLL(None, use_errno=True)
    buf = _Statfs()
    if libc.fstatfs(fd, ctypes.byref(buf)) != 0:
        err = ctypes.get_errno()
        raise CgroupError(f"fstatfs: {os.strerror(err)}")
    return buf.f_type & 0xFFFFFFFF
