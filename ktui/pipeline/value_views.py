"""The stats pane's views of one probe, as plain lines: its counters (the
pane as it always was), the histogram of its `hist:` value, its top
`count:`/`sum:` keys, and its top stacks (kernel, user or both). Which views a probe has,
which comes next (`v`), and the text of each; the widget only draws it.

A line is (text, style) or (text, style, pick): style is a Rich style name
or "" (nothing here imports Rich: the widget turns lines into Text); a
pick (pipeline.drilldown) says what choosing the line drills down to: an
errno, a top comm, a top value, a histogram bucket."""

from __future__ import annotations

from ktui.lang.bind import labelled_fetch
from ktui.lang.cgroups import is_cgroup
from ktui.lang.latency import is_latency, sums_latency
from ktui.lang.model import Kind, Probe
from ktui.pipeline import members
from ktui.pipeline.accounting import comms_heading, errno_guessed, errno_unchecked
from ktui.pipeline.drilldown import BUCKET, COMM, ERRNO, LATENCY, VALUE, Pick
from ktui.pipeline.format import dev_text, errno_name, format_count, format_latency, is_dev_t, printable
from ktui.pipeline.rates import error_count, hist_lines, percentile
from ktui.pipeline.stacks import Symbolize, is_partial, merged, split_merged, wants_user
from ktui.pipeline.top_cgroups import cgroup_lines
from ktui.record.cgroups import short as cgroup_short
from ktui.record.feed import ProbeStats

COUNTERS, VALUES, TOP, STACKS, MEMBERS = "counters", "values", "top", "stacks", "members"
TITLES = {COUNTERS: "counters", VALUES: "value histogram", TOP: "top values", STACKS: "top stacks",
          MEMBERS: "by function"}
STACK_FRAMES_SHOWN = 12  # frames of one stack in the pane (the file output has all)
TOP_STACKS = 5
TOP_N = 6  # errnos and comms in the counters view
TOP_MEMBERS = 5  # a wildcard's functions in the counters view (its own view has MEMBERS_SHOWN)
MEMBERS_SHOWN = 50

Line = tuple  # (text, style) or (text, style, Pick)


def pick_of(line: Line) -> Pick | None:
    """What choosing this line drills down to, if anything."""
    return line[2] if len(line) > 2 else None


def views_of(probe: Probe) -> tuple[str, ...]:
    """The views this probe has: counters always, then one per aggregation."""
    views = [COUNTERS]
    if probe.target.is_wildcard:
        views.append(MEMBERS)
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
        out.append((view_title(view, probe), "bold reverse" if view == current else "dim"))
    return out


def view_lines(view: str, probe: Probe, stats: ProbeStats | None, bar_width: int = 30,
               symbolize: Symbolize | None = None, room: int | None = None) -> list[Line]:
    """The body of a view other than counters; `room`: the pane's width in
    cells, where a view's rows must fit (None: unknown)."""
    if stats is None:
        return [("no counts yet", "dim")]
    if view == VALUES:
        return value_hist_lines(probe, stats, bar_width, room)
    if view == TOP:
        return top_value_lines(probe, stats, room)
    if view == STACKS:
        return stack_lines(probe, stats, symbolize)
    if view == MEMBERS:
        return member_lines(probe, stats, MEMBERS_SHOWN, room)
    return []


def view_title(view: str, probe: Probe) -> str:
    """A view's name in the view bar: a tracepoint pattern's members are events."""
    if view == MEMBERS:
        return f"by {members.member_word(probe.kind is Kind.TRACEPOINT)}"
    if view == VALUES and probe.agg is not None and probe.agg.hist_keys:
        return "hist by key"
    return TITLES[view]


MEMBER_NAME_MIN = 8


def member_lines(probe: Probe, stats: ProbeStats, limit: int, room: int | None = None) -> list[Line]:
    """A wildcard's hits by function (event): `by function: 37 of 120
    hit`, then its top `limit` members, each with its hits, its share of
    the probe's hits and, for a return probe, its mean latency; each row
    within `room` cells (a long name is cut, the numbers never wrap)."""
    tracepoint = probe.kind is Kind.TRACEPOINT
    is_return = probe.kind is Kind.RETURN
    if not members.is_breakdown(stats):
        return [(f"by {members.member_word(tracepoint)}: not attached yet", "dim")]
    out: list[Line] = [(members.title(stats, tracepoint), "bold")]
    rows = members.rows(stats, is_return, limit)
    if not rows:
        return out + [("  none hit yet", "dim")]
    cells = [(r.name, format_count(r.hits), f"{100 * r.share:.1f}%",
              format_latency(r.avg_ns) if r.avg_ns is not None else "") for r in rows]
    hits_w = max([len("hits")] + [len(c[1]) for c in cells])
    avg_w = max([len("avg")] + [len(c[3]) for c in cells]) if is_return else 0
    fixed = 2 + 1 + hits_w + 2 + 6 + (2 + avg_w if is_return else 0)
    wanted = max(len(c[0]) for c in cells)
    name_w = wanted if room is None else max(MEMBER_NAME_MIN, min(wanted, room - fixed))

    def row(name: str, hits: str, share: str, avg: str) -> str:
        return f"  {_cut(name, name_w):<{name_w}} {hits:>{hits_w}}  {share:>6}" + (
            f"  {avg:>{avg_w}}" if is_return else "")

    out.append((row(members.member_word(tracepoint), "hits", "%", "avg"), "dim"))
    out += [(row(*c), "") for c in cells]
    more = len(stats.members) - len(rows)
    if more > 0:
        rest = stats.hits - sum(r.hits for r in rows)
        out.append((f"  {more:,} more ({format_count(rest)} hits)", "dim"))
    return out


KEY_HISTS_SHOWN = 5  # keys whose histogram the pane shows (NDJSON and the exporter have 10)


def key_hist_lines(probe: Probe, stats: ProbeStats, bar_width: int, room: int | None = None) -> list[Line]:
    """hist(VALUE, KEY...): the top keys by hits, each a line `KEY  hits
    p50 p99` (a duration for latency) choosing which drills down to that
    key's events, then its histogram's used slots (bcc's log2 text,
    indented, a narrower bar: several fit on a 24-line screen)."""
    agg = probe.agg
    keys = ", ".join(str(k) for k in agg.hist_keys)
    durations = is_latency(agg.hist.expr)
    shown = format_latency if durations else (lambda v: format_count(int(v)))
    total = sum(sum(slots) for _, slots, _ in stats.key_hists)
    out: list[Line] = [(f"hist({agg.hist}) by {keys}: {format_count(stats.hist_keys)} "
                        f"{'key' if stats.hist_keys == 1 else 'keys'}" + (", slots in ns" if durations else ""),
                        "bold")]
    if not stats.key_hists:
        return out + [("  none yet", "dim")]
    fetches = key_fetches(probe, agg.hist_keys)
    rows = [(key_text(key, fetches), format_count(sum(slots)), shown(percentile(slots, 50)),
             shown(percentile(slots, 99)), key, slots) for key, slots, _ in stats.key_hists[:KEY_HISTS_SHOWN]]
    hits_w = max(len(r[1]) for r in rows)
    fixed = 2 + 1 + hits_w + len(" hits  p50 ") + max(len(r[2]) for r in rows) + len("  p99 ") + max(
        len(r[3]) for r in rows)
    wanted = max(KEY_WIDTH_MIN, min(KEY_WIDTH_MAX, max(len(r[0]) for r in rows)))
    key_w = wanted if room is None else max(KEY_WIDTH_MIN, min(wanted, room - fixed))
    for text, hits, p50, p99, key, slots in rows:
        out.append((f"{_cut(text, key_w):<{key_w}} {hits:>{hits_w}} hits  p50 {p50}  p99 {p99}", "bold",
                    Pick(VALUE, tuple(key))))
        bar = bar_width
        if room is not None:  # the slot text of this key's bounds, then the bar in what is left
            bar = max(4, min(bar_width, room - 2 - (len(hist_lines(slots, bar_width=1)[1]) - 1)))
        out += _compact(slots, hist_lines(slots, bar_width=bar)[1:])
    more = stats.hist_keys - len(rows)
    if more > 0:
        out.append((f"{format_count(more)} more {'key' if more == 1 else 'keys'}", "dim"))
    if agg.hist.effective_type.startswith("s"):
        out.append(("negative values (errors) are not in the histograms", "dim"))
    out += _dropped_lines(agg, stats)
    return out


def _compact(slots, lines: list[str]) -> list[Line]:
    """A key's slot lines (from its first used slot), a run of empty
    slots between used ones as one `...` line: a latency's spread of a few
    slots apart must not push the other keys off the screen."""
    first = next(k for k, count in enumerate(slots) if count)
    out: list[Line] = []
    for i, line in enumerate(lines):
        if slots[first + i]:
            out.append((f"  {line}", ""))
        elif not out or out[-1][0] != "  ...":
            out.append(("  ...", "dim"))
    return out


def _dropped_lines(agg, stats: ProbeStats) -> list[Line]:
    """Hits a full count map did not take, and their distinct keys."""
    if not stats.values_dropped:
        return []
    more = "at least " if stats.keys_dropped_unknown else ""
    return [(f"{format_count(stats.values_dropped)} hits not counted: the map is full "
             f"(max_keys {agg.max_keys})", "yellow bold"),
            (f"  {more}{format_count(stats.keys_dropped)} distinct "
             f"{'key' if stats.keys_dropped == 1 and not more else 'keys'} not counted", "yellow")]


def value_hist_lines(probe: Probe, stats: ProbeStats, bar_width: int, room: int | None = None) -> list[Line]:
    agg = probe.agg
    if agg is not None and agg.hist is not None and agg.hist_keys:
        return key_hist_lines(probe, stats, bar_width, room)
    title = f"hist({agg.hist})" if agg is not None and agg.hist is not None else "hist"
    out: list[Line] = [(f"{title}: {format_count(sum(stats.value_hist))} values", "bold")]
    lines = hist_lines(stats.value_hist, bar_width=bar_width, unit="value")
    if not lines:
        return out + [("no values yet", "dim")]
    out += slot_lines(stats.value_hist, lines, BUCKET)
    if agg is not None and agg.hist is not None and agg.hist.effective_type.startswith("s"):
        out.append(("negative values (errors) are not in the histogram", "dim"))
    return out


def key_text(key: tuple, fetches: tuple = ()) -> str:
    """A count key's values as the pane shows them (`fetches`: the keys'
    fetches, in order, as key_fetches gives them: a cgroup's path shortened
    as in the event pane, a dev_t as MAJOR:MINOR)."""
    def shown(i: int, v) -> str:
        fetch = fetches[i] if i < len(fetches) else None
        if isinstance(v, str):
            return printable(cgroup_short(v) if fetch is not None and is_cgroup(fetch.expr) else v)
        return dev_text(v) if fetch is not None and is_dev_t(fetch) else str(v)

    return ", ".join(shown(i, v) for i, v in enumerate(key)) or "all"


def key_fetches(probe: Probe, keys: tuple) -> tuple:
    """The fetch each key reads: a key naming one of the probe's fetch
    labels (`dev` in `count(dev)` of `dev=rq->part->bd_dev`) reads that
    fetch, and is shown as its type says."""
    return tuple(labelled_fetch(probe, k) or k for k in keys)


KEY_WIDTH_MAX = 24  # a key column no wider, however wide the pane
KEY_WIDTH_MIN = 6


def top_value_lines(probe: Probe, stats: ProbeStats, room: int | None = None) -> list[Line]:
    """`count(comm) sum(retval)`: one row per key, `comm hits sum %`,
    under a line that names the columns, each row within `room` cells
    (a narrow pane cuts the key, never wraps the sum onto a line of its
    own). Ranked by the sum when the probe sums, else by hits; the
    percentage is the share of that same quantity. A sum of latency
    (lang.latency) is a duration, with its mean per hit after it."""
    agg = probe.agg
    if agg is None:
        return []
    keys = ", ".join(str(k) for k in agg.keys) or "total"
    sums = agg.sum is not None
    durations = sums_latency(probe)
    out: list[Line] = [(f"by {keys}: hits" + (f", sum({agg.sum})" if sums else "")
                        + (", its mean" if durations else ""), "bold")]
    out.append((f"ranked by sum({agg.sum}); % of the sum" if sums else "ranked by hits; % of the hits", "dim"))
    total = sum(c for _, c, _ in stats.top_values)
    fetches = key_fetches(probe, agg.keys)
    rows = [(key_text(key, fetches), format_count(count), _sum_text(summed, count, durations) if sums else "",
             _share(count, summed, stats, sums), key) for key, count, summed in stats.top_values]
    calls_w = max([len("hits")] + [len(r[1]) for r in rows])
    sum_head = f"sum({agg.sum})" if sums else ""
    sum_w = max([len(sum_head)] + [len(r[2]) for r in rows]) if sums else 0
    wanted = max(KEY_WIDTH_MIN, min(KEY_WIDTH_MAX, max([len(keys)] + [len(r[0]) for r in rows])))
    if sums and room is not None and _fixed(calls_w, sum_w) + wanted > room:
        sum_head = "sum"  # the keys need the room more; the title line says what is summed
        sum_w = max([len(sum_head)] + [len(r[2]) for r in rows])
    fixed = _fixed(calls_w, sum_w)
    key_w = wanted if room is None else max(KEY_WIDTH_MIN, min(wanted, room - fixed))

    def row(key: str, calls: str, summed: str, share: str) -> str:
        text = f"  {_cut(key, key_w):<{key_w}} {calls:>{calls_w}}"
        if sums:
            text += f"  {summed:>{sum_w}}"
        return text + f"  {share:>6}"

    if rows:
        out.append((row(keys, "hits", sum_head, "%"), "dim"))
    for key, calls, summed, share, values in rows:
        out.append((row(key, calls, summed, share), "", Pick(VALUE, tuple(values))))
    if not stats.top_values:
        out.append(("  none yet", "dim"))
    if stats.value_keys > len(stats.top_values):
        out.append((f"  {stats.value_keys - len(stats.top_values)} more keys "
                    f"({format_count(stats.hits - total)} hits)", "dim"))
    return out + _dropped_lines(agg, stats)


def _sum_text(summed: int, count: int, durations: bool) -> str:
    """A key's sum as the pane shows it: a count, or for a sum of latency
    (ns) a duration and the mean per hit (`1.52s avg 507ms`)."""
    if not durations:
        return format_count(summed)
    return f"{format_latency(summed)} avg {format_latency(summed / count) if count else '-'}"


def _fixed(calls_w: int, sum_w: int) -> int:
    """The cells of a top values row besides its key: the indent, the
    hits, the sum (when there is one) and the share, with their gaps."""
    return 2 + 1 + calls_w + (2 + sum_w if sum_w else 0) + 2 + 6


def _share(count: int, summed: int, stats: ProbeStats, sums: bool) -> str:
    """A key's share of what the rows are ranked by: the sum over every key,
    or the hits. A sum whose total is not known (a recording made before
    it was kept) is the shown keys' only when they are every key."""
    if not sums:
        whole = stats.hits
        part = count
    else:
        whole = stats.value_sum
        if not whole and stats.value_keys <= len(stats.top_values):
            whole = sum(s for _, _, s in stats.top_values)
        part = summed
    if whole <= 0:
        return "-"
    return f"{100 * part / whole:.1f}%"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


STACK_TITLES = {"kernel": "kernel stacks", "user": "user stacks", "both": "kernel + user stacks"}
USER_STACK_CAVEAT = ("user frames follow frame pointers: Debian's userland has none, so most "
                     "user stacks stop after a frame or two, or go astray (marked partial)")


def _frame_lines(frames, room: int, style: str) -> list[Line]:
    out: list[Line] = [(f"  {frame}", style) for frame in frames[:room]]
    if len(frames) > room:
        out.append((f"  ... {len(frames) - room} more", "dim"))
    return out


def stack_lines(probe: Probe, stats: ProbeStats, symbolize: Symbolize | None) -> list[Line]:
    kind = probe.agg.stack if probe.agg is not None and probe.agg.stack else "kernel"
    out: list[Line] = [(f"top {STACK_TITLES.get(kind, 'stacks')}: {stats.stack_count} distinct "
                        "(innermost frame first)", "bold")]
    if wants_user(probe):
        out.append((USER_STACK_CAVEAT, "yellow"))
        stacks = [(k, u, n) for k, u, n in split_merged(probe, stats.stacks, symbolize)[:TOP_STACKS]]
    else:
        stacks = [(frames, (), n) for frames, n in merged(probe, stats.stacks, symbolize)[:TOP_STACKS]]
    if not stacks:
        return out + [("  none yet", "dim")]
    total = sum(count for _, count in stats.stacks) or 1
    for kernel, user, count in stacks:
        head = f"{format_count(count)} ({100 * count / total:.1f}%)"
        if wants_user(probe):
            head += ("  no user stack (a kernel thread)" if not user
                     else "  partial user stack" if is_partial(user) else "")
        out.append((head, "bold"))
        if kernel and user:  # half the room each: the user side must not scroll away
            out += _frame_lines(kernel, STACK_FRAMES_SHOWN // 2, "")
            out.append(("  --", "dim"))  # kernel above, user below, as bcc's stackcount
            out += _frame_lines(user, STACK_FRAMES_SHOWN // 2, "cyan")
        else:
            out += _frame_lines(kernel or user, STACK_FRAMES_SHOWN, "cyan" if user else "")
    if stats.stacks_dropped:
        out.append((f"{format_count(stats.stacks_dropped)} stacks not counted (the map is full, "
                    "or the kernel could not take them)", "yellow bold"))
    return out


def slot_lines(hist, lines: list[str], kind: str) -> list[Line]:
    """hist_lines' text with a pick on each slot that counted something
    (its first line is the header; then one line per slot from the first
    used one)."""
    first = next(k for k, count in enumerate(hist) if count)
    out: list[Line] = [(lines[0], "")]
    for i, line in enumerate(lines[1:]):
        slot = first + i
        out.append((line, "", Pick(kind, slot)) if hist[slot] else (line, ""))
    return out


def error_lines(stats: ProbeStats) -> list[Line]:
    """A return probe's errors and its errnos, most first; the errnos
    outside the errno table as "other"; or why errnos are not counted."""
    unchecked = errno_unchecked(stats)
    if unchecked is not None:
        return [(unchecked, "dim")]
    errors = error_count(stats)
    share = f" ({100 * errors / stats.hits:.1f}% of returns)" if stats.hits else ""
    out: list[Line] = [(f"errors {format_count(errors)}{share}", "bold")]
    guessed = errno_guessed(stats)
    if guessed is not None:
        out.append((f"  {guessed}", "yellow"))
    for code, count in stats.errnos[:TOP_N]:
        out.append((f"  {errno_name(code):<12} {-abs(code):>5}  {format_count(count):>8}", "red",
                    Pick(ERRNO, abs(code))))
    if stats.errnos_other:  # no drill-down: the errno is not known
        out.append((f"  {'other':<12} {'':>5}  {format_count(stats.errnos_other):>8}", "red"))
    return out


def counter_lines(probe: Probe, stats: ProbeStats | None, bar_width: int, room: int | None = None) -> list[Line]:
    """The counters view's body: a wildcard's top functions, a return
    probe's latency histogram, errors and errnos, then the top comms and,
    under them, the top cgroups (the same hits)."""
    if stats is None:
        return []
    out: list[Line] = []
    if probe.target.is_wildcard:
        out += member_lines(probe, stats, TOP_MEMBERS, room)
        out.append(("", ""))
    if probe.timed:  # a return probe's latency, or a span's (since its start)
        p50, p99 = percentile(stats.hist, 50), percentile(stats.hist, 99)
        what = "span" if probe.since is not None else "latency"
        out.append((f"{what}  p50 {format_latency(p50)}  p99 {format_latency(p99)}", "bold"))
        lines = hist_lines(stats.hist, bar_width=bar_width) if bar_width else []
        none_yet = "no spans yet" if probe.since is not None else "no returns yet"
        out += slot_lines(stats.hist, lines, LATENCY) if lines else [(none_yet, "dim")]
        out.append(("", ""))
    if probe.kind is Kind.RETURN:
        out += error_lines(stats)
        out.append(("", ""))
    heading, note = comms_heading(stats)
    out.append((heading, "bold"))
    if note:
        out.append((f"  {note}", "dim"))
    for comm, count in stats.top_comms[:TOP_N]:
        out.append((f"  {printable(comm):<16} {format_count(count):>8}", "", Pick(COMM, comm)))
    if not stats.top_comms:
        out.append(("  none yet", "dim"))
    out.append(("", ""))
    out += cgroup_lines(stats, TOP_N, room)
    return out
