"""A wildcard's matches on the running kernel: the functions a pattern
(`tcp_*`) is attached to (a tracepoint pattern's events: KernelNames).

Kernel functions are matched against available_filter_functions, not
kallsyms: one name a kprobe_multi link cannot attach fails the whole link
(libbpf and bpftrace match there for that reason), and a name listed there
has an ftrace site, so a perf kprobe takes it too. Left out: ftrace's
placeholders for functions it lost (`__ftrace_invalid_address___N`, a
weak function overridden), the `[module]` words of the file, and the
kprobe blacklist where debugfs shows it (a kprobe there is refused, and
one refusal would fail the probe).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ktui.kernel.symbols.ftrace import read_filter_functions
from ktui.lang.model import SpecError
from ktui.lang.wildcards import FUNCTIONS, close_patterns, expand, matches_nothing

BLACKLISTS = (Path("/sys/kernel/debug/kprobes/blacklist"),)
_NOT_FUNCTIONS = ("__ftrace_invalid_address__", "[")


def function_matches(pattern: str, names: frozenset[str] | None = None,
                     blacklist: frozenset[str] | None = None) -> tuple[str, ...]:
    """The kernel functions `pattern` matches, sorted; SpecError (one line,
    column 1: the target) when it matches none or the list cannot be read.
    `names`, `blacklist`: the machine's, unless given (tests)."""
    if names is None:
        names, why = read_filter_functions()
        if names is None:
            raise SpecError(f"{pattern}: a wildcard is matched against available_filter_functions, "
                            f"which cannot be read ({why}): run as root", col=1)
    if blacklist is None:
        blacklist = read_blacklist()
    names = attachable(names, blacklist)
    found = expand(pattern, names)
    if not found:
        raise SpecError(matches_nothing(pattern, FUNCTIONS, close_patterns(pattern, names)), col=1)
    return found


def attachable(names: Iterable[str], blacklist: frozenset[str]) -> list[str]:
    """The names a kprobe can take: not ftrace's placeholders or its file's
    `[module]` words, not on the kprobe blacklist."""
    return [n for n in names if not n.startswith(_NOT_FUNCTIONS) and n not in blacklist]


def read_blacklist(paths: tuple[Path, ...] = BLACKLISTS) -> frozenset[str]:
    """Functions the kprobe blacklist refuses (`0xSTART-0xEND\\tNAME` lines);
    empty where debugfs is not there to say."""
    for path in paths:
        try:
            text = path.read_text("ascii", "replace")
        except OSError:
            continue
        return frozenset(line.split()[-1] for line in text.splitlines() if len(line.split()) >= 2)
    return frozenset()

