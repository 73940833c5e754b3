"""The one rule for what ktui trusts in its cache directory.

ktui caches what is slow to rebuild (the kernel's function table from BTF,
the compiled generic BPF program) under $XDG_CACHE_HOME/ktui
(~/.cache/ktui). A cache runs as root more often than not, so a file there
is read only if it is a regular file, owned by the user running ktui and
not writable by anyone else; the directory is the user's alone (mode 0700,
made so if it was looser). Every cache of ktui asks this module, and
reads and writes its files through it.
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


class NotTrusted(Exception):
    """A cache file that is there but is not read; str() says why."""


def read_trusted(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of a cache file, None when there is none. Raises
    NotTrusted for one that must not be read (see untrusted; larger than
    `max_bytes`; a symlink, which O_NOFOLLOW refuses) or cannot be. The
    checks are made on the open file, so it cannot be swapped between."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise NotTrusted(exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        why = untrusted(info) or (f"larger than {max_bytes} bytes" if info.st_size > max_bytes else "")
        if why:
            raise NotTrusted(why)
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(max_bytes + 1)
    except OSError as exc:
        raise NotTrusted(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes, prefix: str = ".tmp-") -> None:
    """Write `path` whole or not at all (a temporary file, mode 0600, renamed
    over it), in a directory already made private (private_dir). Raises
    OSError; nothing is left behind then."""
    import tempfile  # only when writing: its import is not free in the VM

    fd, temp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(data)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
