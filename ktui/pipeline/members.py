"""A wildcard probe's hits by member (`tcp_*:c`: by kernel function;
`syscalls/sys_enter_*:t`: by event), as the stats pane, NDJSON, a
recording and Prometheus show them. The counts are the kernel's
(ProbeStats.members: name, hits, latency_sum_ns, most hits first, only
the members hit, adding up to `hits`); `member_count` is how many it is
attached to (0: not a wildcard). Nothing here counts: it shapes."""

from __future__ import annotations

from dataclasses import dataclass

from ktui.record.feed import ProbeStats


@dataclass(frozen=True)
class MemberRow:
    name: str
    hits: int
    share: float  # of the probe's hits, 0..1
    avg_ns: int | None  # a return probe's mean latency (None for a call probe or a tracepoint)


def is_breakdown(stats: ProbeStats) -> bool:
    """Whether `stats` are a wildcard's, with members to show."""
    return stats.member_count > 0 or bool(stats.members)


def member_word(tracepoint: bool) -> str:
    """What a member is: a function, or for a tracepoint pattern an event."""
    return "event" if tracepoint else "function"


def title(stats: ProbeStats, tracepoint: bool) -> str:
    """`by function: 37 of 120 hit`."""
    return f"by {member_word(tracepoint)}: {len(stats.members):,} of {stats.member_count:,} hit"


def rows(stats: ProbeStats, is_return: bool, limit: int | None = None) -> list[MemberRow]:
    """The members hit, most hits first (the kernel's order, kept: ties
    by name so a redraw does not shuffle them), at most `limit`."""
    ordered = sorted(stats.members, key=lambda m: (-m[1], m[0]))
    total = sum(m[1] for m in ordered) or 1
    chosen = ordered if limit is None else ordered[:limit]
    return [MemberRow(name, hits, hits / total, (latency // hits if hits else 0) if is_return else None)
            for name, hits, latency in chosen]


def ndjson_fields(stats: ProbeStats, is_return: bool) -> dict:
    """A wildcard probe's stats-line keys: "member_count" and every member
    hit (all of them: a top N would not add up to "hits"), with its
    latency sum and mean for a return probe."""
    members = []
    for name, hits, latency in sorted(stats.members, key=lambda m: (-m[1], m[0])):
        entry: dict = {"name": name, "hits": hits}
        if is_return:
            entry["latency_sum_ns"] = latency
            entry["avg_ns"] = latency // hits if hits else 0
        members.append(entry)
    return {"member_count": stats.member_count, "members": members}


def from_json(v: dict) -> dict:
    """ProbeStats' member fields from a recording's stats (absent in
    recordings made before wildcards: not a wildcard)."""
    return {
        "members": tuple((str(name), int(hits), int(latency)) for name, hits, latency in v.get("members", ())),
        "member_count": int(v.get("member_count", 0)),
    }
