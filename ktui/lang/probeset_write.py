"""Writing a probe set back to YAML: the compact form, defaults left
out, atomically (a temporary file renamed over the target), never through
a symlink. What is written loads back equal."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import yaml

from ktui.lang.model import AGG_MAX_KEYS_DEFAULT, ProbeSet, ProbeSetError
from ktui.lang.save_place import why_not_kept


HEADER = "# ktui probe set\n"
MAX_CHECK = 1 << 20  # a probe set file is at most 1 MiB (lang.limits)


def dumps_probeset(ps: ProbeSet) -> str:
    """The probe set as YAML that `loads_probeset` reads back equal.

    Probes are written in the compact form; defaults are left out."""
    document: dict[str, object] = {"name": ps.name}
    if ps.description:
        document["description"] = ps.description
    set_filter = {key: value for key, value in (("pid", ps.pid), ("comm", ps.comm)) if value is not None}
    if set_filter:
        document["filter"] = set_filter
    if ps.maxactive:
        document["maxactive"] = ps.maxactive
    if ps.attach:
        document["attach"] = ps.attach
    probes = []
    for probe in ps.probes:
        entry: dict[str, object] = {"spec": probe.spec_text}
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
        entry.update(aggregate_keys(probe))
        probes.append(entry)
    document["probes"] = probes
    body = yaml.safe_dump(document, sort_keys=False, allow_unicode=True,
                          default_flow_style=False, width=1_000_000)
    return HEADER + body


def aggregate_keys(probe) -> dict[str, object]:
    """A probe's hist/count/sum as the YAML keys that load back equal."""
    agg = probe.agg
    if agg is None:
        return {}
    out: dict[str, object] = {}
    if agg.hist is not None:
        out["hist"] = str(agg.hist)
    if agg.keys:
        out["count"] = [str(k) for k in agg.keys]
    if agg.sum is not None:
        out["sum"] = str(agg.sum)
    if agg.max_keys != AGG_MAX_KEYS_DEFAULT:
        out["max_keys"] = agg.max_keys
    if agg.stack is not None:
        out["stack"] = agg.stack
    return out


def save_probeset(ps: ProbeSet, path: str | os.PathLike[str]) -> None:
    """Write the probe set to `path` (mode 0600), atomically.

    The text goes to a new file created exclusively in the same directory
    and is then renamed over `path`, so a reader never sees half a file and
    no symlink is followed. A `path` that is itself a symlink is refused:
    replacing it would silently turn the link into a file."""
    target = os.fspath(path)
    text = dumps_probeset(ps)
    if os.path.islink(target):
        raise ProbeSetError("refusing to save: the path is a symbolic link", source=target)
    if os.path.isdir(target):
        raise ProbeSetError("cannot save: the path is a directory", source=target)
    why = why_not_kept(target) or why_not_replace(target)
    if why is not None:
        raise ProbeSetError(f"refusing to save: {why}; write to another path", source=target)
    directory = os.path.dirname(target) or "."
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{Path(target).name}.", suffix=".tmp", dir=directory)
    except OSError as err:
        raise ProbeSetError(f"cannot save: {err.strerror}", source=target) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            os.fchmod(out.fileno(), 0o600)  # mkstemp's mode, whatever the umask
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        # rename() never follows a symlink at `target`: even one planted
        # after the check above is replaced, not written through.
        os.replace(temp, target)
    except OSError as err:
        _remove_quietly(temp)
        raise ProbeSetError(f"cannot save: {err.strerror}", source=target) from None


def why_not_replace(target: str) -> str | None:
    """Why the existing file `target` must not be replaced by a probe set,
    or None (no such file, or a probe set a user wrote). Saving replaces
    probe sets only: a recording, a log or any other file is never lost to
    a `w` with the wrong path, and the sets shipped with ktui stay as shipped
    (with their comments)."""
    from ktui.lang.probeset import checks_probeset
    from ktui.lang.shipped import shipped_dir

    if not os.path.lexists(target):
        return None
    if not os.path.isfile(target):
        return "it is not a regular file"
    try:
        if Path(target).resolve().parent == shipped_dir().resolve():
            return "it is a probe set shipped with ktui"
    except OSError:
        pass
    try:
        with open(target, "rb") as f:
            head = f.read(MAX_CHECK + 1)
    except OSError as err:
        return f"it cannot be read to check what it is ({err.strerror})"
    if len(head) > MAX_CHECK:
        return "it is larger than any probe set"
    if head.startswith(HEADER.encode()):
        return None  # written by ktui
    _ps, errors = checks_probeset(head, source=target)
    if errors:
        return f"it is not a probe set ({errors[0].message})"
    return None


def _remove_quietly(path: str) -> None:
    """Clean up a temp file after a failed save; the save error is what matters."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
