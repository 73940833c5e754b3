"""The running kernel's build configuration, where it can be read.

One question needs it: does this kernel's kprobe-event code refuse
functions ftrace does not know (notrace)? With CONFIG_KPROBES_ON_FTRACE
and without CONFIG_KPROBE_EVENTS_ON_NOTRACE, kernel/trace/trace_kprobe.c
refuses such a kprobe with EINVAL ("Could not probe notrace function"),
whether it comes from kprobe_events or the perf kprobe PMU (bcc, bpftrace,
ktui). Debian's 6.1 and 6.12 are built that way, so there a function
missing from available_filter_functions is not "kprobe only": it cannot be
probed at all (tests/kernel/test_list.py watches the kernel refuse).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path


def config_paths(release: str | None = None) -> tuple[Path, ...]:
    release = release or os.uname().release
    return (Path(f"/boot/config-{release}"), Path("/proc/config.gz"))


def read_config(paths: tuple[Path, ...] | None = None) -> tuple[dict[str, str] | None, str]:
    """(CONFIG_X -> value for the options that are set, "") from the first
    readable file, or (None, where it looked)."""
    paths = paths if paths is not None else config_paths()
    for path in paths:
        try:
            raw = path.read_bytes()
            if path.suffix == ".gz":
                raw = gzip.decompress(raw)
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
        options = {}
        for line in raw.decode("ascii", "replace").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.startswith("CONFIG_"):
                options[key] = value
        return options, ""
    return None, " or ".join(str(p) for p in paths)


def kprobe_events_refuse_notrace(config: dict[str, str] | None) -> bool | None:
    """True/False from the config, None when it is unknown."""
    if config is None:
        return None
    return (config.get("CONFIG_KPROBES_ON_FTRACE") == "y"
            and config.get("CONFIG_KPROBE_EVENTS_ON_NOTRACE") != "y")
