"""`ktui list` output: one line per function, or one JSON document.

    traceable   vfs_read(struct file *file, char *buf, size_t count, loff_t *pos) -> ssize_t
    kprobe-only xfs:xfs_file_open(struct inode *inode, struct file *file) -> int
    traceable   foo.isra.0(int a) -> int  # copy of foo: BTF shows its arguments; ...

The verdict comes first and has a fixed width (11 columns and a space), so
it is never what a narrow terminal cuts off; the prototype begins with the
name (`MODULE:name` for a module's function, as kprobe_events spells it).
On a terminal, lines are cut at its width; into a pipe they are whole.
"""

from __future__ import annotations

import json
from collections import Counter

from ktui.kernel.symbols.catalog import VERDICTS, Entry

VERDICT_WIDTH = max(len(v) for v in VERDICTS)
JSON_VERSION = 1


def entry_line(e: Entry) -> str:
    name = f"{e.module}:{e.name}" if e.module else e.name
    paren = e.prototype.find("(")
    body = name + e.prototype[paren:] if paren >= 0 else name
    if e.note:
        body += f"  # {e.note}"
    return f"{e.verdict:<{VERDICT_WIDTH}} {body}"


def cut(lines: list[str], width: int) -> str:
    """Lines joined, each cut at `width` (0: never)."""
    if width:
        lines = [fit(line, width) if len(line) > width else line for line in lines]
    return "\n".join(lines) + "\n" if lines else ""


def entry_lines(entries: list[Entry], width: int = 0) -> str:
    """Every entry's line, newline-terminated, cut at `width` (0: never).
    One pass with the fields unpacked: 56,000 calls of entry_line() were a
    second of the listing's time in the VM."""
    pads = {v: f"{v:<{VERDICT_WIDTH}} " for v in VERDICTS}
    lines = []
    for name, verdict, module, proto, _copy, note, _n in entries:
        paren = proto.find("(")
        line = pads[verdict] + (module + ":" if module else "") + name + (proto[paren:] if paren >= 0 else "")
        if note:
            line += "  # " + note
        if width and len(line) > width:
            line = fit(line, width)
        lines.append(line)
    return "\n".join(lines) + "\n" if lines else ""


def fit(line: str, width: int) -> str:
    """Cut a line to `width` columns, marking the cut."""
    if width <= 0 or len(line) <= width:
        return line
    return line[:max(width - 3, 0)] + "..."


def summary(entries: list[Entry] | Counter) -> str:
    """`N functions: a traceable, b notrace, ...` from entries or verdict counts."""
    counts = entries if isinstance(entries, Counter) else Counter(e.verdict for e in entries)
    parts = [f"{counts[v]} {v}" for v in VERDICTS if counts[v]]
    n = sum(counts.values())
    return f"{n} function{'s' if n != 1 else ''}" + (f": {', '.join(parts)}" if parts else "")


def entries_json(entries: list[Entry], not_checked: list[str], btf: bool) -> str:
    return json.dumps(entries_doc(entries, not_checked, btf), indent=None, separators=(",", ":")) + "\n"


def entries_doc(entries: list[Entry], not_checked: list[str], btf: bool) -> dict:
    """`--json`'s document, before it is text (tracepoints join it: `ktui list`)."""
    return {
        "version": JSON_VERSION,
        "btf": btf,
        "not_checked": not_checked,
        "functions": [
            {"name": e.name, "verdict": e.verdict, "module": e.module or None,
             "prototype": e.prototype or None, "copy_of": e.copy_of or None,
             "note": e.note or None, "symbols": e.symbols}
            for e in entries
        ],
    }
