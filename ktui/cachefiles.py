"""The one rule for what ktui trusts in its cache directory.

ktui caches what is slow to rebuild (the kernel's function table from BTF,
the compiled generic BPF program) under $XDG_CACHE_HOME/ktui
(~/.cache/ktui). A cache runs as root more often than not, so a file there
is read only if it is a regular file, owned by the user running ktui and
not writable by anyone else; the directory is the user's alone (mode 0700,
made so if it was looser). Every cache of ktui asks this module.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ktui"


def untrusted(info: os.stat_result) -> str:
    """Why a cache file must not be read, or '' (from fstat of the open file)."""
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}, not {os.geteuid()}"
    if info.st_mode & 0o022:
        return "writable by group or others"
    return ""


def private_dir(path: Path, create: bool) -> str:
    """Make sure `path` is a directory for this user alone (created with
    mode 0700 when `create`; a looser mode is tightened). '' when it is,
    else why not. Raises FileNotFoundError when it is missing and not
    `create`; other OSErrors (a read-only home) come back as the reason."""
    try:
        if create:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = os.lstat(path)
    except FileNotFoundError:
        if create:
            return "cannot be created"
        raise
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISDIR(info.st_mode):
        return "not a directory"
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}, not {os.geteuid()}"
    if info.st_mode & 0o077:
        try:
            os.chmod(path, 0o700, follow_symlinks=False)
        except OSError as exc:
            return f"cannot make it private ({exc.strerror})"
    return ""
