"""Every bound the probe language puts on what a user writes, in one place.

A limit written twice drifts: the add/edit dialog once accepted an
80-character label, saved it, and the saved file then failed to load with
"label: too long" (the loader allowed 64). So the YAML loader, `-e` on the
command line, the dialog (through `validate_probe`) and codegen all read
their bounds from here, and the checks that several of them make on a name
(`check_probe_label`, `check_comm`, `check_set_name`) live here too.

Bounds that only one reader has stay with it: the YAML file's size, depth
and node count are in `yamlnodes`, because nothing else reads YAML.

The kernel's own sizes are named after the kernel constant they mirror.
"""

from __future__ import annotations

from ktui.lang import chars
from ktui.lang.model import SpecError

# ---------------------------------------------------------------- text sizes

SPEC_MAX = 4096  # characters of a spec (or a fetch, or a target) as typed
FILTER_MAX = 4096  # characters of filter text
SET_NAME_MAX = 128  # characters of a probe set's name
PROBE_LABEL_MAX = 64  # characters of a probe's label (its name in the table and in files)
FETCH_LABEL_MAX = 32  # characters of a fetch label (a name filters can use)
SYMBOL_MAX = 511  # the kernel's KSYM_NAME_LEN is 512, NUL included
CGROUP_PATH_MAX = 4096  # characters of a --cgroup path (PATH_MAX)
USER_PATH_MAX = 1024  # characters of a user probe's file path (PATH:SYMBOL)
USER_SYMBOL_MAX = 2048  # characters of a user function's name (C++ and Rust mangle long names)

# ---------------------------------------------------------------- probe shape

MAX_FETCHES = 8  # fetches in one probe
MAX_DEREF = 8  # nested +OFFSET(...) levels
MAX_STEPS = 16  # `->x` / `.y` steps in one member chain (each `->` is a read: MAX_DEREF bounds those)
ARG_COUNT = 6  # a1..a6: the x86-64 SysV argument registers
FILTER_MAX_DEPTH = 32  # nested parentheses and `!` in a filter
# A wildcard's matches: attached one perf probe each (no kprobe_multi:
# Debian's 6.1, every tracepoint pattern), or all in one kprobe_multi link
# (5.18+). bpftrace's BPFTRACE_MAX_PROBES was 512 too.
WILDCARD_MAX_SINGLE = 512
WILDCARD_MAX_MULTI = 4096
FILTER_MAX_COMPARES = 64  # comparisons in one filter: keeps the generated C small

# ---------------------------------------------------------------- numbers

U64_MAX = 2**64 - 1  # addresses and symbol offsets
DEREF_MAX = 2**63 - 1  # a dereference offset is a signed 64-bit value
FILTER_INT_MIN = -(2**63)  # an integer in a filter: s64 ...
FILTER_INT_MAX = 2**64 - 1  # ... or u64, compared as such
PID_MIN, PID_MAX = 1, 4 * 1024 * 1024  # PID_MAX_LIMIT on 64-bit kernels
COUNT_MIN, COUNT_MAX = 1, 2**32 - 1  # sample and rate_limit end up as u32 in the kernel
MAXACTIVE_MIN, MAXACTIVE_MAX = 1, 4096  # a kretprobe's instances: KRETPROBE_MAXACTIVE_MAX (trace_kprobe.c)
MAX_ERRNO = 4095  # the kernel returns errors as -errno in [-MAX_ERRNO, -1] (include/linux/err.h)

# ---------------------------------------------------------------- kernel buffers

TASK_COMM_LEN = 16  # bytes of a task's comm in the kernel, NUL included
COMM_MAX_BYTES = TASK_COMM_LEN - 1  # what a comm can hold
STRING_MAX = 64  # bytes kept of a string fetch, NUL included
STRING_LITERAL_MAX = STRING_MAX - 1  # characters of a string in a filter (ASCII: bytes too)


# ---------------------------------------------------------------- names


def check_name(value: str, limit: int, *, in_bytes: bool = False, why: str = "") -> None:
    """A one-line name that shows as what it is: no control, bidi or
    invisible character (SpecError at its 1-based column), not empty, at
    most `limit` characters (bytes, UTF-8, with `in_bytes`). `why` is added
    to the "too long" message."""
    chars.refuse(value)
    if not value.strip():
        raise SpecError("must not be empty")
    size = len(value.encode("utf-8", "surrogateescape")) if in_bytes else len(value)
    if size > limit:
        unit = "bytes" if in_bytes else "characters"
        raise SpecError(f"too long ({size} {unit}, at most {limit}{why})")


def check_set_name(name: str) -> None:
    check_name(name, SET_NAME_MAX)


def check_probe_label(label: str) -> None:
    """A probe's label: any printable text, at most PROBE_LABEL_MAX characters."""
    check_name(label, PROBE_LABEL_MAX)


def check_comm(comm: str) -> None:
    """A command name to filter on (`filter: {comm: ...}`, `--comm`)."""
    check_name(comm, COMM_MAX_BYTES, in_bytes=True,
               why=": the kernel keeps only 15 bytes of a command name")


def check_cgroup(path: str) -> None:
    """A cgroup v2 directory to scope the probes to (`filter: {cgroup: ...}`,
    `--cgroup`): under /sys/fs/cgroup, absolute or relative to it; a
    relative one may not climb out of it with `..`."""
    if not path or len(path) > CGROUP_PATH_MAX:
        raise SpecError(f"a cgroup path has 1 to {CGROUP_PATH_MAX} characters, got {len(path)}")
    if any(c in path for c in "\0\n\r"):
        raise SpecError("a cgroup path is one line of text")
    if not path.startswith("/") and ".." in path.split("/"):
        raise SpecError(f"cgroup {path!r}: a relative path is under /sys/fs/cgroup and may not go above it (..)")


def check_within(function: str) -> None:
    """A gate's function (`within: FUNC`, `within(FUNC)`): one kernel
    function by name, as a target's symbol is written (no pattern, no
    offset, no file)."""
    from ktui.lang.names import IDENT_CHARS, IDENT_START

    if not function or len(function) > SYMBOL_MAX:
        raise SpecError(f"within: a kernel function's name has 1 to {SYMBOL_MAX} characters")
    if function[0] not in IDENT_START or any(c not in IDENT_CHARS and c != "." for c in function):
        raise SpecError(f"within: {function!r} is not a kernel function's name (letters, digits, _ and .: "
                        "one function, no pattern or offset)")


def check_count(what: str, value: object, *, optional: bool = False) -> None:
    """`sample` / `rate_limit`: a whole number in COUNT_MIN..COUNT_MAX (None
    too when `optional`)."""
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise SpecError(f"{what} must be a whole number, got {value!r}")
    if not COUNT_MIN <= value <= COUNT_MAX:
        raise SpecError(out_of_range(what, value, COUNT_MIN, COUNT_MAX))


def out_of_range(what: str, value: object, low: object, high: object) -> str:
    """`sample: 0 is out of range (1..4294967295)`: the one wording of a
    number outside its bounds, in files and on the command line alike."""
    return f"{what}: {value} is out of range ({low}..{high})"
