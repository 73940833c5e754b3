"""What this kernel can do, as the kernel itself answered, once per kernel.

A kernel's version says little: distributions backport BPF features into
old releases and build new ones without some (Debian's 6.1 has no
kprobe_multi: CONFIG_FPROBE is off). So ktui asks: feature_probes.py
loads, attaches and runs a few tiny programs, the way retsnoop
calibrates, and each answer is a `Finding`: yes, no, or unknown (the
probe could not run: no privilege, lockdown, a missing test function;
never taken for a no).

The answers are kept per kernel in ktui's private cache directory
(cachefiles: 0700, files the user's own and not writable by others), so
later starts probe nothing. The key is the kernel's release and its
/proc/version line (which names the build) and the probes' own format;
a new kernel, or a ktui whose probes changed, is probed afresh. Only
known answers are kept: an unknown one is asked again on the next start
(the next start may have the privilege).

Who uses what: buffer_choice (ringbuf), the generic engine (kprobe_cookie),
attach_choice (fentry, trace_args), the generic loader (func_arg:
KTUI_FUNC_ARG_HELPERS), `ktui doctor` (all of it).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ktui.cachefiles import NotTrusted, cache_dir, private_dir, read_trusted, write_private

# Bumped whenever a probe changes what it asks: older answers are then stale.
PROBES_FORMAT = 1
PREFIX = "features-"
SUFFIX = ".json"
MAX_FILES = 8  # kernels remembered
MAX_BYTES = 64 << 10

# name -> what it means, as `ktui doctor` says it (in its order; at most 32 characters)
DESCRIPTIONS = {
    "ringbuf": "BPF ring buffer",
    "ringbuf_no_wakeup": "ring writes without a wakeup",
    "kprobe_cookie": "cookies on kprobe links",
    "fentry": "fentry/fexit",
    "tracing_cookie": "cookies on fentry/fexit links",
    "func_arg": "bpf_get_func_arg/ret",
    "trace_args": "arguments a trampoline takes",
    "task_storage": "task storage in kprobes",
    "kprobe_multi": "kprobe_multi links",
    "kprobe_recursion_misses": "nested kprobe hits counted",
    "tracing_recursion_misses": "nested fentry/fexit hits counted",
    "run_stats": "BPF run-time statistics",
    "batch_lookup": "batched map reads",
}
NAMES = tuple(DESCRIPTIONS)


@dataclass(frozen=True)
class Finding:
    """`have`: True, False, or None (could not be checked). `detail`: what
    the kernel did (yes/no), or why it could not be asked (unknown).
    `value`: a number where the feature is one (trace_args: 6 or 12)."""

    have: bool | None
    detail: str = ""
    value: int | None = None

    @property
    def word(self) -> str:
        if self.value is not None and self.have is not None:
            return str(self.value)
        return {True: "yes", False: "no", None: "?"}[self.have]


NOT_PROBED = Finding(None, "not probed")


class Features:
    """This kernel's findings by name (NAMES), and where they came from."""

    def __init__(self, findings: dict[str, Finding], *, source: str = "probed",
                 path: Path | None = None, probe_seconds: float = 0.0) -> None:
        self.findings = dict(findings)
        self.source = source  # "probed", "cache", "cache+probed", "given"
        self.path = path  # the cache file, where there is one
        self.probe_seconds = probe_seconds

    def __getitem__(self, name: str) -> Finding:
        return self.findings.get(name, NOT_PROBED)

    def has(self, name: str) -> bool | None:
        return self[name].have

    @property
    def trace_args(self) -> int | None:
        """Arguments a trampoline takes (6 or 12), None if unknown."""
        return self["trace_args"].value if self["trace_args"].have is not None else None

    @property
    def func_arg_helpers(self) -> bool:
        """The tracing variant reads arguments with bpf_get_func_arg/ret:
        only where the kernel said yes (the other way works everywhere)."""
        return self.has("func_arg") is True

    def unknown(self) -> dict[str, Finding]:
        return {n: f for n, f in self.findings.items() if f.have is None}

    def to_json(self) -> dict:
        return {name: {"have": f.have, "detail": f.detail, **({"value": f.value} if f.value is not None else {})}
                for name, f in self.findings.items()}


def given(**values) -> Features:
    """Features from plain values (tests, fakes): name=True/False/None, or
    trace_args=6/12."""
    findings = {}
    for name, value in values.items():
        if name not in DESCRIPTIONS:
            raise KeyError(name)
        if name == "trace_args":
            findings[name] = Finding(None if value is None else value > 6, "given", value)
        else:
            findings[name] = Finding(value, "given")
    return Features(findings, source="given")


# ------------------------------------------------------------------ the cache


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(4096)
    except OSError:
        return ""


def kernel_key() -> str:
    """This kernel's build, and the probes' format, hashed."""
    uname = os.uname()
    parts = [f"format {PROBES_FORMAT}", f"kernel {uname.release} {uname.version} {platform.machine()}",
             "kernel-build " + _read_text("/proc/version").strip()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def _decode(data: bytes, key: str) -> dict[str, Finding]:
    body = json.loads(data)
    if body.get("format") != PROBES_FORMAT or body.get("key") != key:
        raise ValueError("another format or kernel")
    out = {}
    for name, raw in body["findings"].items():
        if name not in DESCRIPTIONS:
            continue  # a probe this ktui no longer has
        have = raw["have"]
        value = raw.get("value")
        if have not in (True, False) or not isinstance(raw.get("detail", ""), str) \
                or not (value is None or isinstance(value, int)):
            raise ValueError(f"{name}: not a finding")
        out[name] = Finding(have, raw.get("detail", ""), value)
    return out


def read_cache(directory: Path, key: str, log: Callable[[str], None] = lambda text: None) -> dict[str, Finding]:
    """The known findings cached for `key`, or {} (missing, untrusted or
    corrupt: then logged, and probed again)."""
    path = directory / f"{PREFIX}{key}{SUFFIX}"
    try:
        data = read_trusted(path, MAX_BYTES)
    except NotTrusted as exc:
        log(f"ktui: feature cache: ignoring {path}: {exc}")
        return {}
    if data is None:
        return {}
    try:
        return _decode(data, key)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log(f"ktui: feature cache: {path} is corrupt ({exc}); probing again")
        return {}


def write_cache(directory: Path, key: str, findings: dict[str, Finding],
                log: Callable[[str], None] = lambda text: None) -> Path | None:
    """Keep the known findings (never an unknown one); a cache that cannot
    be written is only logged."""
    known = {n: f for n, f in findings.items() if f.have is not None}
    body = {"format": PROBES_FORMAT, "key": key, "kernel": os.uname().release,
            "findings": {n: {"have": f.have, "detail": f.detail, "value": f.value} for n, f in known.items()}}
    path = directory / f"{PREFIX}{key}{SUFFIX}"
    try:
        why = private_dir(directory, create=True)
        if why:
            raise OSError(f"{directory}: {why}")
        write_private(path, json.dumps(body, indent=1, sort_keys=True).encode())
    except OSError as exc:
        log(f"ktui: feature cache: cannot write to {directory}: {exc}")
        return None
    _trim(directory)
    return path


def _trim(directory: Path) -> None:
    """The newest MAX_FILES kernels' files stay."""
    files = []
    for path in directory.glob(f"{PREFIX}*{SUFFIX}"):
        try:
            files.append((path.lstat().st_mtime, path))
        except OSError:
            continue
    for _, path in sorted(files, reverse=True)[MAX_FILES:]:
        try:
            path.unlink()
        except OSError:
            pass


# ------------------------------------------------------------------ asking


def detect(*, directory: Path | None = None, use_cache: bool = True,
           probe: Callable[[set[str]], dict[str, Finding]] | None = None,
           log: Callable[[str], None] = lambda text: None) -> Features:
    """This kernel's features: the cached findings, and a probe of the rest
    (all of them with `use_cache` False: then nothing is written).
    `probe(names) -> findings`: feature_probes.probe_all by default."""
    if probe is None:
        from ktui.kernel.machine.feature_probes import probe_all as probe
    # a SessionOptions.cache_dir may be a str (an embedding script, the kernel tests)
    directory = Path(directory) if directory else cache_dir()
    key = kernel_key()
    cached = read_cache(directory, key, log) if use_cache else {}
    missing = {n for n in NAMES if n not in cached}
    if not missing:
        return Features(cached, source="cache", path=directory / f"{PREFIX}{key}{SUFFIX}")
    started = time.monotonic()
    fresh = probe(missing)
    seconds = time.monotonic() - started
    findings = {**cached, **{n: fresh.get(n, NOT_PROBED) for n in missing}}
    findings = {n: findings[n] for n in NAMES}
    path = None
    if use_cache and any(f.have is not None for f in fresh.values()):
        path = write_cache(directory, key, findings, log)
    return Features(findings, source="cache+probed" if cached else "probed", path=path,
                    probe_seconds=seconds)


_memo: Features | None = None
_memo_lock = threading.Lock()


def kernel_features(*, directory: Path | None = None, use_cache: bool = True,
                    log: Callable[[str], None] = lambda text: None) -> Features:
    """`detect()` once per process: every later caller gets the same answers."""
    global _memo
    with _memo_lock:
        if _memo is None:
            _memo = detect(directory=directory, use_cache=use_cache, log=log)
        return _memo
