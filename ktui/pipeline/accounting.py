"""What the kernel saw but could not count, and which numbers are estimates,
in the words every surface uses (the probe table, the stats pane, `ktui
stream`'s summary on stderr): issue 28's per-probe counters (unpaired
returns, entries not stored, nested hits dropped, errnos outside the table)
beside the older ones (missed returns, recursion misses), how a probe's
errnos are checked, and whether its top comms are exact.

Plain text; no Textual or Rich (the widgets style the lines)."""

from __future__ import annotations

from ktui.pipeline.format import format_count
from ktui.record.feed import ProbeStats

# The kernel's top comms sampling (kernel/codegen/runtime.py COMM_EXACT and
# COMM_EVERY; pipeline may not import kernel, a unit test keeps them equal):
# every hit counted for the first COMM_EXACT hits on each CPU, then 1 in
# COMM_EVERY at random, weighted COMM_EVERY.
COMM_EXACT = 1024
COMM_EVERY = 64
COMMS_SAMPLED = f"sampled 1 in {COMM_EVERY} past {COMM_EXACT} hits per CPU"

# Why a return probe's errnos are not counted (ProbeStats.errno_check
# "off: <why>"), as the user reads it after "errno not checked: "
ERRNO_OFF_REASONS = {
    "void": "void function",
    "unsigned": "unsigned return value",
    "not an integer": "returns no integer",
    "by the probe set": "off in the probe set",
    "no BTF": "no BTF",
}


def uncounted(s: ProbeStats) -> int:
    """Hits the kernel saw that are in neither `hits` nor `lost`: returns a
    kretprobe missed or could not pair, runs skipped for recursion, hits
    dropped for want of a free scratch level. The probe table shows them
    beside lost ("lost+N"). Entries not stored are left out: each comes
    back as an unpaired return, and must not count twice."""
    return s.missed_returns + s.unpaired + s.recursion_misses + s.nest_dropped + s.span_unmatched


def loss_lines(s: ProbeStats, is_return: bool, span: bool = False) -> list[tuple[str, str]]:
    """The block under a probe's hits: what the kernel saw and did not
    count, one row a counter, as (text, style). A return probe lists all
    five rows once any is nonzero (zeros dim: the whole picture at once); a
    call probe the two that apply to it. Nothing when all are zero, except
    a kretprobe's missed returns when the kernel counts them (maxactive
    known): that zero is known, and says that no long call went missing.
    A span's (`span`) rows are its own: ends with no start, starts not
    kept or replaced, then the starts still waiting, in a line of their own."""
    rows: list[tuple[int, str, str]] = []  # (count, what, advice)
    if span:
        rows.append((s.span_unmatched, "ends with no start waiting", ""))
        rows.append((s.span_unkept, "starts not kept (map full)", ""))
        rows.append((s.span_replaced, "starts replaced before their end (same key)", ""))
    if is_return:
        rows.append((s.unpaired, "returns unpaired (no entry kept)", ""))
        if s.maxactive:
            rows.append((s.missed_returns, f"returns missed (maxactive {s.maxactive})",
                         ": raise maxactive: in the probe set"))
        elif s.missed_returns:  # counted without a maxactive known: still said
            rows.append((s.missed_returns, "returns missed", ""))
        rows.append((s.entries_unstored, "entries not stored (map full/busy)", ""))
    rows.append((s.nest_dropped, "nested hits dropped (scratch busy)", ""))
    rows.append((s.recursion_misses, "runs missed (recursion)", ""))
    waiting = [(f"{format_count(s.span_starts)} starts, {format_count(s.span_waiting)} waiting for their end",
                "dim")] if span else []
    if not any(count for count, _, _ in rows):
        if is_return and s.maxactive:
            return [(f"0 returns missed (maxactive {s.maxactive})", "dim")]
        return waiting
    head = "not in hits or latency:" if is_return or span else "not in hits:"
    width = max(len(format_count(count)) for count, _, _ in rows)
    out = [(head, "yellow")]
    for count, what, advice in rows:
        style = "" if not count else ("yellow bold" if advice else "yellow")
        out.append((f"  {format_count(count):>{width}} {what}{advice if count else ''}", style or "dim"))
    return waiting + out


def errno_unchecked(s: ProbeStats) -> str | None:
    """"errno not checked: void function" when the kernel does not count this
    return probe's errnos, with the reason; None when it does (or the feed
    does not say: a call probe, a recording made before errnos were checked)."""
    if not s.errno_check.startswith("off"):
        return None
    why = s.errno_check.partition(":")[2].strip()
    return "errno not checked" + (f": {ERRNO_OFF_REASONS.get(why, why)}" if why else "")


def errno_guessed(s: ProbeStats) -> str | None:
    """A note when errnos are counted without BTF to say the return type:
    the return value is read as a 32-bit int and could be anything."""
    if s.errno_check != "guessed":
        return None
    return "errno guessed (no BTF): the return value read as an int"


def comms_heading(s: ProbeStats) -> tuple[str, str | None]:
    """The top comms title, and a note under it when they are an estimate."""
    if s.top_comms_exact:
        return "top comms (exact)", None
    return "top comms ≈ estimate", COMMS_SAMPLED
