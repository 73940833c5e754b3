"""Where a saved file ends up, said before it is written.

In `ktui vm` the dashboard runs in a guest whose root filesystem is the
host's, read-only, under a throwaway overlay: a probe set saved under /tmp
or the home folder was written, said so, and was gone when the VM
stopped. Only the folders the launcher shares with the guest (the current
directory) reach the host; it names them in KTUI_VM_SHARED (os.pathsep
between them). Outside a VM the variable is unset and every path is kept.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SHARED_ENV = "KTUI_VM_SHARED"


def shared_dirs(env: Mapping[str, str] = os.environ) -> tuple[Path, ...] | None:
    """The folders a file must be under to outlive the VM; None outside one."""
    value = env.get(SHARED_ENV)
    if value is None:
        return None
    return tuple(Path(p) for p in value.split(os.pathsep) if p)


def landing(path: str) -> Path:
    """The file PATH names, absolute, its folder's symlinks resolved (the
    file itself is never written through a link: probeset_write)."""
    full = Path(os.path.abspath(os.path.expanduser(path)))
    return Path(os.path.realpath(full.parent)) / full.name


def why_not_kept(path: str, env: Mapping[str, str] = os.environ) -> str | None:
    """Why a file written at PATH would be lost, or None (it is kept)."""
    dirs = shared_dirs(env)
    if dirs is None:
        return None
    target = landing(path)
    if any(target.is_relative_to(os.path.realpath(d)) for d in dirs):
        return None
    where = ", ".join(str(d) for d in dirs) or "nothing"
    return f"it would stay inside the VM and be lost when it stops (shared with the host: {where})"


def where_it_lands(path: str, env: Mapping[str, str] = os.environ) -> str:
    """One line for the dialog: the absolute path, and in a VM whether the
    host keeps it."""
    target = landing(path)
    if shared_dirs(env) is None:
        return f"written to {target}"
    if why_not_kept(path, env) is None:
        return f"written to {target}, on the host too (shared with the VM)"
    return f"{target} is inside the VM only"
