"""How one event line is laid out in a pane of a given width.

The probe and its values are what a reader looks for, so they get the width
first (issue 15: at 80 columns the event pane showed only timestamps and
process names, never a value). When the pane is narrow the less useful
columns give way, in order: the cpu, then the timestamp's precision
(microseconds to milliseconds), then long comms and probe names narrow.
Whatever still does not fit is cut at the pane's edge with an ellipsis.

The task's cgroup (after comm[pid]) is shown where it says something at
the price it costs. When every row so far came from one cgroup, it tells
one row from another nothing: it is shown only in a pane wide enough for
the whole line (at 80 columns the values keep its cells). Once rows come
from several cgroups it is what tells them apart, as comm does: it is kept
before the cpu and the timestamp's precision, and like comm it narrows
(to NARROW_CGROUP) but does not go.

Plain Python (no Textual), so the choice can be tested on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# The values get this many cells (or as many as the longest values seen
# need, if fewer) before anything else is kept.
MIN_DETAILS = 36
NARROW_TASK, NARROW_NAME = 14, 16
NARROW_CGROUP = 12  # `docker:01234…`, `…session-3.scope`: enough to tell a few apart
MID_CGROUP = 24  # a path's last parts (`…user-1000.slice/session-3.scope` wants more)


@dataclass(frozen=True)
class LineLayout:
    cpu: bool = True  # show the cpu column
    time_cut: int = 0  # digits cut from the end of the timestamp (3: ms)
    task_width: int = 0
    name_width: int = 0
    cgroup_width: int = 0  # 0: no cgroup column

    def prefix_width(self, time_width: int) -> int:
        """Cells before the values: time, cpu, task, cgroup, probe and their spaces."""
        return ((time_width - self.time_cut + 1) + (4 if self.cpu else 0) + self.task_width + 1
                + (self.cgroup_width + 1 if self.cgroup_width else 0) + self.name_width + 1)


def choose_layout(time_width: int, task_width: int, name_width: int, available: int,
                  details_width: int = MIN_DETAILS, cgroup_width: int = 0,
                  cgroups_differ: bool = False) -> LineLayout:
    """The widest layout that leaves the values `details_width` cells (at
    most MIN_DETAILS) in a pane `available` cells wide; the narrowest one
    when none does. `cgroup_width`: the cgroup column's (0: no event
    carries one); `cgroups_differ`: the rows came from several cgroups."""
    wanted = min(details_width, MIN_DETAILS)
    full = LineLayout(True, 0, task_width, name_width)
    steps = [
        full,
        LineLayout(False, 0, task_width, name_width),
        LineLayout(False, 3, task_width, name_width),
        LineLayout(False, 3, min(task_width, NARROW_TASK), name_width),
        LineLayout(False, 3, min(task_width, NARROW_TASK), min(name_width, NARROW_NAME)),
    ]
    if cgroup_width and cgroups_differ:
        narrowest = steps[-1]
        steps = [replace(step, cgroup_width=cgroup_width) for step in steps] + [
            replace(narrowest, cgroup_width=min(cgroup_width, MID_CGROUP)),
            replace(narrowest, cgroup_width=min(cgroup_width, NARROW_CGROUP))]
    elif cgroup_width:
        steps[:0] = [replace(full, cgroup_width=cgroup_width), replace(full, cgroup_width=min(cgroup_width, MID_CGROUP))]
    for layout in steps:
        if layout.prefix_width(time_width) + wanted <= available:
            return layout
    return steps[-1]


def cut_time(ts: str, digits: int) -> str:
    """`4242.000123` less 3 digits -> `4242.000` (milliseconds)."""
    if digits <= 0 or "." not in ts:
        return ts
    head, frac = ts.split(".", 1)
    frac = frac[: max(0, len(frac) - digits)]
    return f"{head}.{frac}" if frac else head


def fit_cgroup(text: str, width: int) -> str:
    """A cgroup padded or cut to `width` cells: a path loses its start (it
    says most at its end: `…/session-3.scope`), a container's short form
    its end (`docker:01234…` keeps the runtime)."""
    if len(text) <= width or "/" not in text:
        return fit(text, width)
    return "…" + text[len(text) - width + 1:] if width > 1 else fit(text, width)


def fit(text: str, width: int) -> str:
    """Pad or cut `text` to `width` cells (a cut ends in an ellipsis)."""
    if len(text) > width:
        return text[: width - 1] + "…" if width > 0 else ""
    return text.ljust(width)
