"""`ktui doctor`: what this kernel has, and what ktui does with it.

Three parts, one screen at 80 columns: the kernel's features as the
kernel answered them (kernel/machine/features.py: probed once per kernel, then
cached), what follows for ktui (engine, fentry or kprobes, which losses
are counted), and what could not be checked and why (not root, lockdown,
no tracefs). `--json` gives the same for scripts. Always exit 0: a
doctor that cannot check something says so, it does not fail.
"""

from __future__ import annotations

import json
import os
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ktui.kernel.machine.features import DESCRIPTIONS, NAMES, Features

WIDTH = 80
HEIGHT = 24
COLUMN = 40  # two features a line


@dataclass
class Checkup:
    """Everything doctor says, gathered (injectable for tests)."""

    release: str
    features: Features
    # preflight findings (kernel/machine/preflight.Problem): key, message, fatal
    environment: list = field(default_factory=list)
    tracefs: bool = True  # kprobe_events can be written (kretprobe_events.find_root)
    root: bool = True
    # where events' context (task, softirq, hardirq, NMI) is read from
    # (kernel/symbols/interrupt_context): "__preempt_count", "pcpu_hot"; "": not found
    context: str = ""


def gather(*, use_cache: bool = True) -> Checkup:
    """The running kernel's checkup: features (cached or probed now), the
    preflight's findings, tracefs."""
    from ktui.kernel.machine.features import kernel_features
    from ktui.kernel.attach.kretprobe_events import find_root
    from ktui.kernel.machine.preflight import check_environment

    return Checkup(release=os.uname().release, features=kernel_features(use_cache=use_cache),
                   environment=check_environment(), tracefs=find_root() is not None,
                   root=os.geteuid() == 0, context=_context_source())


def _context_source() -> str:
    from ktui.btf.index import KernelBtf
    from ktui.kernel.symbols.interrupt_context import context_addresses

    try:
        return context_addresses(btf=KernelBtf().vmlinux).source
    except Exception:  # noqa: BLE001 - doctor says it, it does not fail
        return ""


def consequences(c: Checkup) -> list[tuple[str, str]]:
    """(what, how) of ktui on this kernel, from the features."""
    f = c.features
    out = []
    cookies = f.has("kprobe_cookie")
    if cookies:
        out.append(("engine", "generic: one prebuilt program runs every probe"))
    else:
        why = "no cookies on kprobe links" if cookies is False else "cookies not checked"
        out.append(("engine", f"compiled by bcc, per probe set ({why})"))
    fentry = f.has("fentry")
    args = f.trace_args or 6
    if not cookies:
        out.append(("attach", "kprobes (fentry/fexit go through the generic engine)"))
    elif fentry is False:
        out.append(("attach", "kprobes: this kernel's fentry/fexit do not work"))
    else:
        unsure = "" if fentry else "; not checked"
        out.append(("attach", f"fentry/fexit if the function allows (<= {args} args{unsure}), else kprobe"))
    if c.tracefs:
        out.append(("returns", "kretprobe misses counted (tracefs events); fexit misses none"))
    else:
        out.append(("returns", "kretprobe misses NOT counted: no writable tracefs"))
    kprobe_nested = {True: "counted", False: "NOT counted (kernels before 6.7)", None: "not checked"}
    tracing_nested = {True: "counted", False: "NOT counted", None: "not checked"}
    out.append(("nested hits", f"kprobe {kprobe_nested[f.has('kprobe_recursion_misses')]}, "
                               f"fentry/fexit {tracing_nested[f.has('tracing_recursion_misses')]}"))
    ring = f.has("ringbuf")
    out.append(("events", "BPF ring buffer, drained on a timer" if ring is not False
                else "perf buffers (no BPF ring buffer)"))
    if c.context:
        out.append(("context", f"events say task/softirq/hardirq/nmi (from {c.context})"))
    else:
        why = "not root" if not c.root else "preempt count not found"
        out.append(("context", f"events do NOT say softirq/hardirq/nmi ({why})"))
    stats = f.has("run_stats")
    out.append(("--cost", {True: "each probe's run time (BPF run-time statistics)",
                           False: "not available (no BPF run-time statistics)",
                           None: "not checked"}[stats]))
    return out


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _feature_cells(f: Features) -> list[str]:
    cells = []
    for name in NAMES:
        finding = f[name]
        cells.append(f"{finding.word:>3}  {DESCRIPTIONS[name]}")
    return cells


def _unchecked(c: Checkup) -> list[str]:
    """Why what could not be checked was not: features grouped by reason,
    then the environment's findings."""
    by_reason: dict[str, list[str]] = {}
    for name in NAMES:
        finding = c.features[name]
        if finding.have is None:
            by_reason.setdefault(finding.detail, []).append(name)
    lines = []
    for reason, names in by_reason.items():
        which = "every feature" if len(names) == len(NAMES) else ", ".join(DESCRIPTIONS[n] for n in names)
        lines.append(f"{which}: {reason}")
    for problem in c.environment:
        lines.append(problem.message)
    if not c.root and not any("root" in line for line in lines):
        lines.append("not root: some checks may be incomplete")
    return lines


def render(c: Checkup) -> str:
    f = c.features
    source = {"cache": "from the cache", "probed": "probed now", "cache+probed": "cached, some probed now",
              "given": "given"}.get(f.source, f.source)
    lines = [_cut(f"ktui doctor: Linux {c.release}, {'root' if c.root else 'not root'}; "
                  f"kernel features {source}", WIDTH)]
    if f.path is not None:
        lines.append(_cut(f"  (cached for this kernel in {_home(f.path)})", WIDTH))
    lines.append("What the kernel has (tiny BPF programs loaded, attached and run):")
    cells = _feature_cells(f)
    for i in range(0, len(cells), 2):
        pair = cells[i:i + 2]
        lines.append(("  " + pair[0].ljust(COLUMN - 2) + (pair[1] if len(pair) > 1 else "")).rstrip())
    # how each no was found (a number, trace_args, is its own answer)
    nos = [_cut(f"  no: {DESCRIPTIONS[n]}: {f[n].detail}", WIDTH) for n in NAMES
           if f[n].have is False and f[n].value is None]
    rest = ["What ktui does here:"]
    for what, how in consequences(c):
        rest.append(_cut(f"  {what:<12}{how}", WIDTH))
    unchecked = _unchecked(c)
    if not unchecked:
        rest.append("Could not check: nothing (everything above was asked of this kernel)")
    else:
        rest.append("Could not check:")
        for line in unchecked:
            rest += textwrap.wrap(line, WIDTH, initial_indent="  ", subsequent_indent="    ")
    if len(lines) + len(nos) + len(rest) > HEIGHT:  # one screen: the details are in --json
        nos = ["  (how each no was found: ktui doctor --json)"] if nos else []
    return "\n".join(lines + nos + rest) + "\n"


def to_json(c: Checkup) -> str:
    f = c.features
    body = {
        "kernel": c.release,
        "root": c.root,
        "source": f.source,
        "cache": str(f.path) if f.path is not None else None,
        "features": {name: {"description": DESCRIPTIONS[name], **f.to_json().get(name, {"have": None})}
                     for name in NAMES},
        "ktui": {what: how for what, how in consequences(c)},
        "tracefs": c.tracefs,
        "environment": [{"key": p.key, "message": p.message, "fatal": p.fatal} for p in c.environment],
        "unchecked": _unchecked(c),
    }
    return json.dumps(body, indent=2) + "\n"


def _home(path: Path) -> str:
    home = os.path.expanduser("~")
    text = str(path)
    return "~" + text[len(home):] if home not in ("", "/") and text.startswith(home + "/") else text


def run_doctor(*, as_json: bool = False, use_cache: bool = True, out: TextIO | None = None,
               checkup: Checkup | None = None) -> int:
    import sys

    out = out or sys.stdout
    c = checkup or gather(use_cache=use_cache)
    out.write(to_json(c) if as_json else render(c))
    return 0
