"""The stats pane's top cgroups, as plain lines (value_views' Line).

The kernel counts a probe's sampled hits under comm and cgroup in one key
(kernel/generic/who.py), so the top cgroups are the top comms' hits seen
the other way: exact or estimated together, and said so the same way. A
cgroup shows as the event pane shows it (record.cgroups.short: a
container's scope as `docker:0123456789ab`); a path too long for the pane
keeps its end, which names the cgroup, and loses its start. Each row
stands for its cgroup's events (a drill-down, as a top comm's row).
"""

from __future__ import annotations

from ktui.pipeline.drilldown import CGROUP, Pick
from ktui.pipeline.format import format_count, printable
from ktui.record.cgroups import short
from ktui.record.feed import ProbeStats

NAME_MIN = 16  # the comm column's width: the two lists line up
COUNT_W = 8
NOT_KEPT = "top cgroups: not kept (a compiled probe's program, or a recording made before them)"


def heading(s: ProbeStats) -> str:
    return "top cgroups (exact)" if s.top_comms_exact else "top cgroups ≈ estimate (the same sample)"


def cgroup_lines(s: ProbeStats, top: int, room: int | None = None) -> list[tuple]:
    """`top cgroups (exact)`, then a row per cgroup (its name and hits,
    and its Pick), each within `room` cells; or one line saying they are not kept."""
    if not s.top_cgroups_kept:
        return [(NOT_KEPT, "dim")]
    out: list[tuple] = [(heading(s), "bold")]
    names = [printable(short(path)) for path, _ in s.top_cgroups[:top]]
    wanted = max([NAME_MIN, *map(len, names)])
    width = wanted if room is None else max(NAME_MIN, min(wanted, room - 2 - 1 - COUNT_W))
    for name, (path, count) in zip(names, s.top_cgroups):
        out.append((f"  {_cut_start(name, width):<{width}} {format_count(count):>{COUNT_W}}", "", Pick(CGROUP, path)))
    if not s.top_cgroups:
        out.append(("  none yet", "dim"))
    return out


def _cut_start(text: str, width: int) -> str:
    """`text` in `width` cells, its start given up first (a path's end
    names it: `…/session-3.scope`)."""
    return text if len(text) <= width else "…" + text[len(text) - width + 1:]
