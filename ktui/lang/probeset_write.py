"""Writing a probe set back to YAML: the compact form, defaults left
out, atomically (a temporary file renamed over the target), never through
a symlink. What is written loads back equal."""

from __future__ import annotations

import bisect
import errno
import os
import stat
import tempfile
from pathlib import Path

import yaml

from ktui.lang.model import AGG_MAX_KEYS_DEFAULT, GateSpan, Kind, ProbeSet, ProbeSetError
from ktui.lang.save_place import why_not_kept


HEADER = "# ktui probe set\n"
MAX_CHECK = 1 << 20  # a probe set file is at most 1 MiB (lang.limits)


def dumps_probeset(ps: ProbeSet) -> str:
    """The probe set as YAML that `loads_probeset` reads back equal.

    Probes are written in the compact form (those with alternatives in
    the long form, `target_keys`); defaults are left out."""
    document: dict[str, object] = {"name": ps.name}
    if ps.description:
        document["description"] = ps.description
    set_filter = {key: value for key, value in (("pid", ps.pid), ("comm", ps.comm), ("cgroup", ps.cgroup)) if value is not None}
    if set_filter:
        document["filter"] = set_filter
    if ps.maxactive:
        document["maxactive"] = ps.maxactive
    if ps.attach:
        document["attach"] = ps.attach
    probes = []
    for probe in ps.probes:
        entry = target_keys(probe)
        if probe.label is not None:
            entry["label"] = probe.label
        if probe.filter is not None:
            entry["filter"] = str(probe.filter)
        if not probe.enabled:
            entry["enabled"] = False
        if probe.sample != 1:
            entry["sample"] = probe.sample
        if probe.rate_limit is not None:
            entry["rate_limit"] = probe.rate_limit
        # a return probe's 0 under a set's maxactive means the set's (as
        # the session runs it): written as nothing, it loads as the set's
        if probe.maxactive and probe.maxactive != ps.maxactive:
            entry["maxactive"] = probe.maxactive
        if probe.attach:  # its own, even when the set says the same: loads back equal
            entry["attach"] = probe.attach
        if probe.errno:
            entry["errno"] = _Plain(probe.errno)
        entry.update(aggregate_keys(probe))
        if isinstance(probe.within, GateSpan):  # between two events: each end's spec
            entry["within"] = {"from": probe.within.start.spec_text, "to": probe.within.end.spec_text}
        elif probe.within is not None:
            entry["within"] = probe.within
        if probe.since is not None:
            entry["since"] = probe.since.spec_text
        probes.append(entry)
    document["probes"] = probes
    body = yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=False, width=1_000_000)
    return HEADER + body


def target_keys(probe) -> dict[str, object]:
    """`spec:` (the compact form), or for a probe with alternatives the
    long form's list (`function: [a, b]`, as users write it), its kind
    and fetches beside it."""
    if not probe.target.alternatives:
        return {"spec": probe.spec_text}
    entry: dict[str, object] = {"function": _Flow(probe.target.alternatives)}
    if probe.kind is not Kind.CALL:
        entry["kind"] = probe.kind.value
    if probe.fetches:
        entry["fetch"] = _Flow(str(f) for f in probe.fetches)
    return entry


class _Flow(list):
    """A list written on one line, `[a, b]`."""


class _Plain(str):
    """`on` / `off` written as a user writes them (YAML reads them as
    booleans, which the loader takes), not quoted as strings."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Flow, lambda dumper, items: dumper.represent_sequence(
    "tag:yaml.org,2002:seq", list(items), flow_style=True))
_Dumper.add_representer(_Plain, lambda dumper, word: dumper.represent_scalar("tag:yaml.org,2002:bool", str(word)))


def aggregate_keys(probe) -> dict[str, object]:
    """A probe's hist/count/sum as the YAML keys that load back equal."""
    agg = probe.agg
    if agg is None:
        return {}
    out: dict[str, object] = {}
    if agg.hist is not None:
        # keyed: the value, then its keys, as count's list (unkeyed: as always)
        out["hist"] = [str(f) for f in (agg.hist,) + agg.hist_keys] if agg.hist_keys else str(agg.hist)
    if agg.keys:
        out["count"] = [str(k) for k in agg.keys]
    if agg.sum is not None:
        out["sum"] = str(agg.sum)
    if agg.max_keys != AGG_MAX_KEYS_DEFAULT:
        out["max_keys"] = agg.max_keys
    if agg.stack is not None:
        out["stack"] = agg.stack
    return out


def save_probeset(ps: ProbeSet, path: str | os.PathLike[str], *, replace: bool = False) -> None:
    """Write the probe set to `path`, atomically.

    The text goes to a new file created exclusively in the same directory,
    is synced to disk, and is then renamed over `path` (the directory is
    synced too), so neither a reader nor a crash ever sees half a file, and
    no symlink is followed. A file already at `path` is replaced only with
    `replace` (the user confirmed it, having been told what the file is:
    `describe_existing`) and only if it is a probe set (`why_not_replace`);
    it keeps its mode and owner. A new file is created with mode 0600, and
    one that appeared after the user was asked is not replaced."""
    target = os.fspath(path)
    if not ps.probes:
        raise ProbeSetError("nothing to save: a probe set needs at least one probe", source=target)
    text = dumps_probeset(ps)
    if os.path.isdir(target) and not os.path.islink(target):
        raise ProbeSetError("cannot save: the path is a directory", source=target)
    why = why_not_kept(target) or why_not_replace(target)
    if why is not None:
        raise ProbeSetError(f"refusing to save: {why}; write to another path", source=target)
    existing = _stat_or_none(target)
    if existing is not None and not replace:
        raise ProbeSetError("not saved: the file exists and replacing it was not confirmed", source=target)
    directory = os.path.dirname(target) or "."
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{Path(target).name[:200]}.", suffix=".tmp", dir=directory)
    except OSError as err:
        raise ProbeSetError(f"cannot save: {err.strerror}", source=target) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            _take_over_mode(out.fileno(), existing)
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if existing is None:
            # link() fails if a file appeared at `target` since the user
            # was asked: a new file never replaces one nobody confirmed.
            _link_new(temp, target)
        else:
            # rename() never follows a symlink at `target`: even one planted
            # after the check above is replaced, not written through.
            os.replace(temp, target)
        _sync_directory(directory)
    except FileExistsError:
        _remove_quietly(temp)
        raise ProbeSetError("not saved: a file appeared at this path meanwhile; nothing was replaced",
                            source=target) from None
    except OSError as err:
        _remove_quietly(temp)
        raise ProbeSetError(f"cannot save: {err.strerror}", source=target) from None


def _link_new(temp: str, target: str) -> None:
    """Give the written temp file its name, failing (FileExistsError) if
    something took the name meanwhile. A filesystem without hard links
    (vfat, some shares) gets a check and a rename: almost as good."""
    try:
        os.link(temp, target, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK):
            raise
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "File exists", target) from None
        os.replace(temp, target)
        return
    os.unlink(temp)


def _stat_or_none(target: str) -> os.stat_result | None:
    try:
        return os.lstat(target)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise ProbeSetError(f"cannot save: {err.strerror}", source=target) from None


def _take_over_mode(fd: int, existing: os.stat_result | None) -> None:
    """The new file's mode (and, as root, owner): the replaced file's, so a
    shared 0644 set stays readable and a user's set saved under sudo stays
    theirs; a new file gets 0600 (mkstemp's), whatever the umask."""
    if existing is None:
        os.fchmod(fd, 0o600)
        return
    if os.geteuid() == 0 and (existing.st_uid, existing.st_gid) != (os.getuid(), os.getgid()):
        os.fchown(fd, existing.st_uid, existing.st_gid)
    os.fchmod(fd, stat.S_IMODE(existing.st_mode))


def _sync_directory(directory: str) -> None:
    """Make the rename itself durable (without it a crash may bring back
    the old file, or none, on some filesystems)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return  # the file is written and renamed; durability is best effort here
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def why_not_replace(target: str) -> str | None:
    """Why the existing file `target` must not be replaced by a probe set,
    or None (no such file, or a probe set a user wrote). Saving replaces
    probe sets only: a recording, a log or any other file is never lost to
    a `w` with the wrong path, and the sets shipped with ktui stay as shipped
    (with their comments). A symbolic link is not replaced (the user meant
    its target, or not that file at all) nor written through (it may point
    at a recording or a shipped set): the reason names its target."""
    if not os.path.lexists(target):
        return None
    if os.path.islink(target):
        return f"it is a symbolic link (to {os.path.realpath(target)}), never followed nor replaced"
    if not os.path.isfile(target):
        return "it is not a regular file"
    head, why = _read_existing(target)
    if why is None:
        why = _why_read_only(target)
    return why


def _why_read_only(target: str) -> str | None:
    """A file without write permission was made so to be kept as it is;
    rename() would replace it all the same (it needs only the folder's
    permission), and root passes every access check: the mode bits say."""
    mode = stat.S_IMODE(os.stat(target).st_mode)
    if not mode & 0o222 or not os.access(target, os.W_OK):
        return f"it is read-only (mode {mode:04o})"
    return None


def describe_existing(target: str) -> str | None:
    """What the existing file at `target` is, said in the question before
    it is replaced (None: nothing there). Names the set and says what
    replacing it loses that the dashboard cannot write back (comments)."""
    if not os.path.lexists(target):
        return None
    head, why = _read_existing(target)
    if why is not None or head is None:
        return f"{target} exists; {why or 'it cannot be read'}"
    from ktui.lang.probeset import checks_probeset

    ps, _errors = checks_probeset(head, source=target)
    count = f"{len(ps.probes)} probe{'s' if len(ps.probes) != 1 else ''}" if ps is not None else ""
    what = f"the probe set '{ps.name}' ({count})" if ps is not None else "a probe set"
    lost = ""
    if _has_comments(head.decode("utf-8", "replace")):
        lost = "; its comments and layout will be lost"
    return f"{target} exists: {what}{lost}"


def _has_comments(text: str) -> bool:
    """Whether the text has comments a user wrote (ktui's own header line
    is not one): a '#' outside every scalar (a label or filter may hold
    one), as the YAML scanner sees them."""
    body = text[len(HEADER):] if text.startswith(HEADER) else text
    inside = []
    try:
        for token in yaml.scan(body, Loader=yaml.SafeLoader):
            if isinstance(token, yaml.ScalarToken):
                inside.append((token.start_mark.index, token.end_mark.index))
    except yaml.YAMLError:
        return "#" in body  # it loaded as a probe set, so this is not reached; warn rather than not
    starts = [lo for lo, _hi in inside]  # in file order, not overlapping
    for i in (i for i, ch in enumerate(body) if ch == "#"):
        at = bisect.bisect_right(starts, i) - 1
        if at < 0 or i >= inside[at][1]:
            return True
    return False


def _read_existing(target: str) -> tuple[bytes | None, str | None]:
    """The file's bytes if it is a probe set a user may replace, else why not."""
    from ktui.lang.probeset import checks_probeset
    from ktui.lang.shipped import shipped_dir

    try:
        if Path(target).resolve().parent == shipped_dir().resolve():
            return None, "it is a probe set shipped with ktui"
    except OSError:
        pass
    try:
        with open(target, "rb") as f:
            head = f.read(MAX_CHECK + 1)
    except OSError as err:
        return None, f"it cannot be read to check what it is ({err.strerror})"
    if len(head) > MAX_CHECK:
        return None, "it is larger than any probe set"
    # Even a file that starts with ktui's header line is read through: a
    # header is easily copied onto something else.
    _ps, errors = checks_probeset(head, source=target)
    if errors:
        return None, f"it is not a probe set ({errors[0].message})"
    return head, None


def _remove_quietly(path: str) -> None:
    """Clean up a temp file after a failed save; the save error is what matters."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
