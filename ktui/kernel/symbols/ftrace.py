"""Which functions ftrace can attach to: available_filter_functions.

A function listed there has an fentry call site the kernel may patch
(fentry BPF programs, function tracing). One missing from it is notrace,
or was inlined away, or is in a section ftrace leaves alone: an int3 kprobe
may still work on it (unless the kprobe blacklist refuses it), so ktui says
"kprobe only", never "untraceable". The file is in tracefs, mounted at
/sys/kernel/tracing on current systems and under debugfs on older ones,
and is readable by root only unless tracefs was mounted with a group.
"""

from __future__ import annotations

from pathlib import Path

FILTER_FUNCTIONS = (
    Path("/sys/kernel/tracing/available_filter_functions"),
    Path("/sys/kernel/debug/tracing/available_filter_functions"),
)


def read_filter_functions(paths: tuple[Path, ...] = FILTER_FUNCTIONS) -> tuple[frozenset[str] | None, str]:
    """(names, "") from the first readable file, or (None, why none could be
    read: the first file that is there and refused, else "not found")."""
    refused = []
    for path in paths:
        try:
            text = path.read_bytes().decode("ascii", "replace")
        except FileNotFoundError:
            continue
        except OSError as exc:
            refused.append(f"{path}: {exc.strerror}")
            continue
        # Every word, `[module]` annotations too: they never equal a
        # function's name, and split() is far cheaper than a regex.
        return frozenset(text.split()), ""
    if refused:
        return None, refused[0]
    return None, "not found: is tracefs mounted?"
