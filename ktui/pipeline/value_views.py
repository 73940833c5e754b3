"""The stats pane's views of one probe, as plain lines: its counters (the
pane as it always was), the histogram of its `hist:` value, its top
`count:`/`sum:` keys, and its top kernel stacks. Which views a probe has,
which comes next (`v`), and the text of each; the widget only draws it.

A line is (text, style): style is a Rich style name or "" (nothing here
imports Rich: the widget turns lines into Text)."""

from __future__ import annotations

from ktui.lang.model import Probe
from ktui.pipeline.format import format_count, printable
from ktui.pipeline.rates import hist_lines
from ktui.pipeline.stacks import Symbolize, merged
from ktui.record.feed import ProbeStats

COUNTERS, VALUES, TOP, STACKS = "counters", "values", "top", "stacks"
TITLES = {COUNTERS: "counters", VALUES: "value histogram", TOP: "top values", STACKS: "top stacks"}
STACK_FRAMES_SHOWN = 12  # frames of one stack in the pane (the file output has all)
TOP_STACKS = 5

Line = tuple[str, str]


def views_of(probe: Probe) -> tuple[str, ...]:
    """The views this probe has: counters always, then one per aggregation."""
    views = [COUNTERS]
    agg = probe.agg
    if agg is not None and agg.hist is not None:
        views.append(VALUES)
    if agg is not None and agg.counts:
        views.append(TOP)
    if agg is not None and agg.stack is not None:
        views.append(STACKS)
    return tuple(views)


def next_view(current: str, probe: Probe) -> str:
    """The view after `current` for this probe (wrapping; counters when
    `current` is not one of its views)."""
    views = views_of(probe)
    if current not in views:
        return views[0]
    return views[(views.index(current) + 1) % len(views)]


def shown_view(wanted: str, probe: Probe) -> str:
    """`wanted` if this probe has it, else counters (the cursor moved to a
    probe without that aggregation)."""
    return wanted if wanted in views_of(probe) else COUNTERS


def view_tabs(current: str, probe: Probe) -> list[Line]:
    """`counters | value histogram | top values` with the current one marked."""
    out: list[Line] = []
    for i, view in enumerate(views_of(probe)):
        if i:
            out.append((" | ", "dim"))
        out.append((TITLES[view], "bold reverse" if view == current else "dim"))
    return out


def view_lines(view: str, probe: Probe, stats: ProbeStats | None, bar_width: int = 30,
               symbolize: Symbolize | None = None) -> list[Line]:
    """The body of a view other than counters."""
    if stats is None:
        return [("no counts yet", "dim")]
    if view == VALUES:
        return value_hist_lines(probe, stats, bar_width)
    if view == TOP:
        return top_value_lines(probe, stats)
    if view == STACKS:
        return stack_lines(probe, stats, symbolize)
    return []


def value_hist_lines(probe: Probe, stats: ProbeStats, bar_width: int) -> list[Line]:
    agg = probe.agg
    title = f"hist({agg.hist})" if agg is not None and agg.hist is not None else "hist"
    out: list[Line] = [(f"{title}: {format_count(sum(stats.value_hist))} values", "bold")]
    lines = hist_lines(stats.value_hist, bar_width=bar_width, unit="value")
    if not lines:
        return out + [("no values yet", "dim")]
    out += [(line, "") for line in lines]
    if agg is not None and agg.hist is not None and agg.hist.effective_type.startswith("s"):
        out.append(("negative values (errors) are not in the histogram", "dim"))
    return out


def key_text(key: tuple) -> str:
    return ", ".join(printable(v) if isinstance(v, str) else str(v) for v in key) or "all"


def top_value_lines(probe: Probe, stats: ProbeStats) -> list[Line]:
    agg = probe.agg
    if agg is None:
        return []
    keys = ", ".join(str(k) for k in agg.keys) or "total"
    sums = agg.sum is not None
    head = f"by {keys}: count" + (f", sum({agg.sum})" if sums else "")
    out: list[Line] = [(head, "bold")]
    total = sum(c for _, c, _ in stats.top_values)
    for key, count, summed in stats.top_values:
        share = f"{100 * count / stats.hits:5.1f}%" if stats.hits else "     -"
        text = f"  {key_text(key)[:24]:<24} {format_count(count):>8} {share}"
        if sums:
            text += f"  {format_count(summed):>10}"
        out.append((text, ""))
    if not stats.top_values:
        out.append(("  none yet", "dim"))
    if stats.value_keys > len(stats.top_values):
        out.append((f"  {stats.value_keys - len(stats.top_values)} more keys "
                    f"({format_count(stats.hits - total)} hits)", "dim"))
    if stats.values_dropped:
        out.append((f"{format_count(stats.values_dropped)} hits not counted: the map is full "
                    f"(max_keys {agg.max_keys})", "yellow bold"))
        more = "at least " if stats.keys_dropped_unknown else ""
        out.append((f"  {more}{format_count(stats.keys_dropped)} distinct "
                    f"{'key' if stats.keys_dropped == 1 and not more else 'keys'} not counted", "yellow"))
    return out


def stack_lines(probe: Probe, stats: ProbeStats, symbolize: Symbolize | None) -> list[Line]:
    out: list[Line] = [(f"top kernel stacks: {stats.stack_count} distinct (innermost frame first)", "bold")]
    stacks = merged(probe, stats.stacks, symbolize)[:TOP_STACKS]
    if not stacks:
        return out + [("  none yet", "dim")]
    total = sum(count for _, count in stats.stacks) or 1
    for frames, count in stacks:
        out.append((f"{format_count(count)} ({100 * count / total:.1f}%)", "bold"))
        for frame in frames[:STACK_FRAMES_SHOWN]:
            out.append((f"  {frame}", ""))
        if len(frames) > STACK_FRAMES_SHOWN:
            out.append((f"  ... {len(frames) - STACK_FRAMES_SHOWN} more", "dim"))
    if stats.stacks_dropped:
        out.append((f"{format_count(stats.stacks_dropped)} stacks not counted (the map is full, "
                    "or the kernel could not take them)", "yellow bold"))
    return out
