"""`ktui stream` output: one JSON object per line (NDJSON).

Schema, version 2 (every object has "v": 2 and a "type"):
  event:   {"v":2,"type":"event","probe":NAME,"probe_id":N,"ts_ns":N,"cpu":N,
            "pid":N,"tid":N,"comm":S,"cgroup":S|null,"latency_ns":N|null,
            "values":{FETCH: VALUE}}
           VALUE is an integer (signed for s* types and retval), a string for
           string/ustring fetches, and "name+0xoff" for symbol fetches.
           "context": "task"|"softirq"|"hardirq"|"nmi" where the kernel lets
           the program tell (absent where not): in an interrupt, pid and
           comm are the task it interrupted.
           "cgroup": the cgroup v2 directory of the event's task, its whole
           path under the mount ("system.slice/nginx.service", "/" for the
           root, "cgroup:<id>" for one ktui could not name), as a `cgroup`
           fetch's value is; for a span's end, its start's task's (as pid
           and comm); null for an event of a recording made before events
           carried it (recording format 4).
  stats:   {"v":2,"type":"stats","probes":[{"probe_id","probe","hits","emitted",
            "lost","recursion_misses","counted_only","missed_returns","maxactive",
            "unpaired","entries_unstored","nest_dropped","errnos":{"EBADF":N},
            "errnos_other","errno_check","top_comms":{"comm":N},
            "top_cgroups":{"path":N}|null,"top_comms_exact","hist":[...]}]}
           (cumulative, read from the kernel's maps every --interval seconds)
           With --cost each probe also has "cost": {"run_ns":N,"run_count":N,
           "ns_per_hit":X|null,"cpu_percent":X|null}: run_ns/run_count
           cumulative while the statistics were on, the other two over the
           last interval (null on the first line, or when it did not run).
           "hist": [] for a call probe; for a return probe 65 counts of
           latencies in ns, slot 0 holding 0 and slot k >= 1 holding
           2^(k-1) .. 2^k - 1 (record.histogram).
  via (stats and summary): what the probe runs on: "kprobe", "kretprobe",
  "fentry", "fexit" or "tracepoint" ("" while it is not attached: off, failed, pending);
  see the probe set key `attach:`. An fexit probe has no maxactive and
  misses no return: its missed_returns is 0.
  state (stats and summary): "attached", "loading", "off", "failed" or
  "pending". "loading": the probe's program is still being compiled or
  loaded; a kprobe/kretprobe probe counts meanwhile (counted_only, no
  events), an fentry/fexit one ("via" says which it will be) is not in the
  kernel yet and counts nothing until its state is "attached".
  summary: {"v":2,"type":"summary","events":N,"probes":[{"probe_id","probe","via","state",
            "hits","emitted","lost","counted_only","missed_returns","maxactive",
            "recursion_misses","unpaired","entries_unstored","nest_dropped",
            "errnos_other"}]}   (last line, on exit; with --cost also "run_ns" and "run_count")
  missed_returns, maxactive, recursion_misses (stats and summary): returns a
  return probe's kretprobe dropped because more than maxactive calls were in
  flight (the kernel's count; maxactive 0: not counted), and runs the kernel
  skipped because a BPF program was already running on that CPU (counted by
  kernels 6.7+ for kprobes; 0 before).
  unpaired, entries_unstored, nest_dropped (stats and summary): returns seen
  that could not be paired with their own entry (entered before the probe
  attached, entry not stored, nested deeper than the entry stack, or the
  thread's entry stack busy): in neither hits nor "hist"; entries of a
  return probe that could not be kept (entry map full or busy, too deep):
  each usually comes back as an unpaired return, so do not add the two;
  hits dropped because other hits on the same CPU held every scratch level
  (fentry/fexit programs nest). For a return probe over a quiet period,
  entries == hits + unpaired + missed_returns (+ calls still in flight).
  errnos_other (stats and summary): error returns whose errno is outside
  the probe's errno table (1..199 and 512..567): not in "errnos".
  errno_check (stats): how the return probe's errnos are counted: "int",
  "long", "pointer" (ERR_PTR), "guessed" (asked for without BTF: read as an
  int), "off: <why>" ("off: void", "off: unsigned", "off: not an integer",
  "off: by the probe set", "off: no BTF": "errnos" is then {} because
  nothing was checked, not because nothing failed); "" for a call probe.
  top_cgroups (stats): the same hits as "top_comms" (at most 5, most
  first) by the cgroup v2 directory their task ran in, keyed by its whole
  path under the cgroup v2 mount ("system.slice/nginx.service", "/" for
  the root; "cgroup:<id>" for one ktui could not name). The kernel counts
  comm and cgroup in one key, so both come from the same sample. null
  where they are not counted: a probe of a compiled program, or a
  recording made before they were (not {}: that would say none was hit).
  top_comms_exact (stats): false once any CPU counted past its first 1024
  hits: "top_comms" and "top_cgroups" are then estimates (a random 1 in 64
  sample, each weighted 64).
  counted_only: hits while the probe could only count (its program was still
  loading: no event was possible). For a probe with fetches,
  hits == emitted + lost + counted_only, exactly.
  errnos keys are errno names, as the dashboard shows them (format.errno_name):
  "EBADF"; a number the C library has no name for is "E" and the number, "E200".

  A probe with aggregations (hist/count/sum, docs/probe-language.md) also has, in stats: "values_dropped" (hits not counted under
  their key: the count map was full, max_keys), with count: or sum:
  "keys_dropped" (the distinct keys of those hits) and
  "keys_dropped_unknown" (hits whose key could not be remembered either:
  keys_dropped is then a lower bound), "value_hist" (with hist:
  65 log2 slots of the fetched value, as "hist", and "value_hist_sum",
  the exact sum of the values it counts), "value_keys" (distinct
  keys counted) and "top_values" (with count: or sum:, at most 10, most
  first: by sum when the probe sums, else by count), each
  {"key":{FETCH: VALUE},"count":N,"sum":N} ("key" is {} for a sum without
  keys; "sum" is 0 without sum:; with sum(latency) it is nanoseconds,
  and the stats also say "sum_unit":"ns"). With hist(VALUE, KEY...),
  in place of "value_hist": "hist_keys" (distinct keys) and "key_hists"
  (at most 10, most hits first), each {"key":{FETCH: VALUE},"count":N,
  "hist":[65 slots],"sum":N} ("sum": the exact sum of the key's values;
  with hist(latency, ...) nanoseconds, and "hist_unit":"ns"). With stack: kernel, "stack_count"
  (distinct stacks), "stacks_dropped" (hits whose stack was not counted:
  the map was full or the kernel could not take it) and "stacks" (at most
  10, most first: {"frames":["vfs_read+0x5","ksys_read+0x6b",...],"count":N},
  innermost frame first, from the probed function down). With stack: user
  or both, each stack also has "user_frames" (innermost first:
  "func+0xoff", "binary+0xaddr", "0x..." outside any file, "0x...[gone]"
  when the process had exited before the stacks were read) and "partial"
  (true when the user frames do not reach the thread's start: frame
  pointers missing, as in most of Debian's userland); "frames" holds the
  kernel frames (empty for stack: user).

  A wildcard probe (`tcp_*:c`, `syscalls/sys_enter_*:t`) also has, in stats:
  "member_count" (the functions, or events, it is attached to) and
  "members": every one hit, most hits first, {"name":"tcp_sendmsg","hits":N}
  ("name" is CATEGORY/NAME for a tracepoint pattern); a return probe's
  also have "latency_sum_ns" (exact) and "avg_ns" (its mean, rounded
  down). Their hits add up to the probe's "hits".

"counted_only", "missed_returns", "maxactive", "recursion_misses", "cost", "via", "state", the aggregation keys,
"member_count", "members",
"unpaired", "entries_unstored", "nest_dropped", "errnos_other", "errno_check", "top_comms_exact", "top_cgroups",
"sum_unit" and the event's "cgroup" were added
within version 2 (readers that ignore unknown keys are unaffected). Version 2 changed "hist" from 64 slots to 65 (the same meaning for slots
1..63; 0 ns moved from slot 1 to slot 0, and nothing spills past slot 64).
"""

from __future__ import annotations

import json
from typing import Callable, TextIO

from ktui.lang.latency import is_latency, sums_latency
from ktui.lang.model import Kind
from ktui.pipeline import members
from ktui.pipeline.format import errno_name
from ktui.pipeline.rates import ProbeCost, probe_cost
from ktui.pipeline.stacks import is_partial, merged, split_merged, wants_user

TOP_STACKS = 10
from ktui.record.feed import EventBatch, Feed, ProbeStats, StatsSnapshot

SCHEMA_VERSION = 2


class NdjsonSink:
    CHUNK = 2048  # events formatted and written at a time

    def __init__(self, out: TextIO, feed: Feed, symbolize: Callable[[int], str] | None = None,
                 with_stats: bool = True) -> None:
        self.out = out
        self.feed = feed
        self.symbolize = symbolize
        self.with_stats = with_stats
        self.events = 0
        # events taken from the buffer but not written, once asked to stop
        # writing (a second interrupt): counted, so written + unwritten is
        # still what the kernel emitted
        self.unwritten = 0
        self.skip = False  # set from a signal handler: checked before each chunk
        self._last_stats: StatsSnapshot | None = None

    def stop_writing(self) -> None:
        """Count the events still to come instead of writing them."""
        self.skip = True

    def _probe_info(self):
        info = {}
        for pid_, st in self.feed.statuses().items():
            fetches = st.probe.fetches
            names = [f.name for f in fetches]
            symbols = [f.effective_type == "symbol" for f in fetches]
            info[pid_] = (st.probe.name, names, symbols)
        return info

    def on_batch(self, batch: EventBatch) -> None:
        # A flood can hand over tens of thousands of events at once: format
        # them in chunks so memory stays small. All of them, even when asked
        # to stop: the summary's `emitted` counts every one (Collector.finish).
        info = self._probe_info()
        for start in range(0, len(batch), self.CHUNK):
            if self.skip:
                self.unwritten += len(batch) - start
                return
            self._write(batch.events(start, start + self.CHUNK), info)

    def _write(self, events, info) -> None:
        lines = []
        for e in events:
            name, names, symbols = info.get(e.probe_id, (str(e.probe_id), [], []))
            values = {}
            for i, v in enumerate(e.values):
                key = names[i] if i < len(names) else f"v{i}"
                if i < len(symbols) and symbols[i] and self.symbolize and isinstance(v, int):
                    v = self.symbolize(v)
                values[key] = v
            lines.append(json.dumps({
                "v": SCHEMA_VERSION, "type": "event", "probe": name, "probe_id": e.probe_id,
                "ts_ns": e.ts_ns, "cpu": e.cpu, "pid": e.pid, "tid": e.tid, "comm": e.comm,
                "cgroup": e.cgroup or None, "latency_ns": e.latency_ns, "values": values,
                **({"context": e.context} if e.context else {}),
            }, ensure_ascii=False))
        self.events += len(lines)
        if lines:
            self.out.write("\n".join(lines) + "\n")
            self.out.flush()

    def on_stats(self, stats: StatsSnapshot) -> None:
        prev, self._last_stats = self._last_stats, stats
        if not self.with_stats:
            return
        statuses = self.feed.statuses()
        names = {k: st.probe.name for k, st in statuses.items()}
        probes = []
        for pid_, s in sorted(stats.probes.items()):
            line = {
                "probe_id": pid_, "probe": names.get(pid_, str(pid_)), "via": _via(statuses, pid_),
                "state": _state(statuses, pid_), "hits": s.hits,
                "emitted": s.emitted, "lost": s.lost, "counted_only": s.counted_only,
                "missed_returns": s.missed_returns, "maxactive": s.maxactive,
                "recursion_misses": s.recursion_misses, **uncounted_fields(s),
                "errnos": {errno_name(k): v for k, v in s.errnos}, "errnos_other": s.errnos_other,
                "errno_check": s.errno_check,
                "top_comms": dict(s.top_comms),
                "top_cgroups": dict(s.top_cgroups) if s.top_cgroups_kept else None,
                "top_comms_exact": s.top_comms_exact, "hist": list(s.hist),
            }
            if stats.timed:
                line["cost"] = cost_fields(s, probe_cost(prev, stats, pid_))
            status = statuses.get(pid_)
            if status is not None and status.probe.agg is not None:
                line.update(aggregate_fields(status.probe, s, self.symbolize))
            if members.is_breakdown(s) or (status is not None and status.probe.target.is_wildcard):
                line.update(members.ndjson_fields(s, status is not None and status.probe.kind is Kind.RETURN))
            probes.append(line)
        self.out.write(json.dumps({"v": SCHEMA_VERSION, "type": "stats", "probes": probes}) + "\n")
        self.out.flush()

    @property
    def last_stats(self) -> StatsSnapshot | None:
        return self._last_stats

    def summary(self) -> dict:
        return summary_of(self.feed, self._last_stats, self.events, self.unwritten)


def summary_of(feed: Feed, stats: StatsSnapshot | None, events: int, unwritten: int = 0) -> dict:
    statuses = feed.statuses()
    names = {k: st.probe.name for k, st in statuses.items()}
    probes = []
    for pid_, s in sorted((stats.probes if stats else {}).items()):
        line = {"probe_id": pid_, "probe": names.get(pid_, str(pid_)), "via": _via(statuses, pid_),
                "state": _state(statuses, pid_), "hits": s.hits, "emitted": s.emitted, "lost": s.lost,
                "counted_only": s.counted_only, "missed_returns": s.missed_returns,
                "maxactive": s.maxactive, "recursion_misses": s.recursion_misses, **uncounted_fields(s),
                "errnos_other": s.errnos_other}
        if stats.timed:
            line.update(run_ns=s.run_ns, run_count=s.run_count)
        probes.append(line)
    out = {"v": SCHEMA_VERSION, "type": "summary", "events": events, "probes": probes}
    if unwritten:
        out["unwritten"] = unwritten  # a second interrupt: taken from the buffer, not written
    return out


def uncounted_fields(s: ProbeStats) -> dict:
    """What the kernel saw and could not count (issue 28), beside
    missed_returns and recursion_misses in stats and summary lines."""
    out = {"unpaired": s.unpaired, "entries_unstored": s.entries_unstored, "nest_dropped": s.nest_dropped}
    if s.gate_unkept or s.gate_unpaired:  # a `within:` gate's (only where it missed something)
        out.update(gate_unkept=s.gate_unkept, gate_unpaired=s.gate_unpaired)
    if s.span_starts or s.span_matched or s.span_unmatched:  # a span's (`since:`)
        out.update(span_starts=s.span_starts, span_matched=s.span_matched, span_unmatched=s.span_unmatched,
                   span_unkept=s.span_unkept, span_replaced=s.span_replaced, span_waiting=s.span_waiting)
    return out


def _via(statuses, pid_: int) -> str:
    """What the probe runs on (ProbeStatus.via): "kprobe", "kretprobe",
    "fentry", "fexit", "tracepoint"; "" while it is not attached (off, failed, pending)."""
    status = statuses.get(pid_)
    return status.via if status is not None else ""


def _state(statuses, pid_: int) -> str:
    """ProbeState's value: "attached", "loading", "off", "failed", "pending"."""
    status = statuses.get(pid_)
    return status.state.value if status is not None else ""
def aggregate_fields(probe, stats: ProbeStats, symbolize=None) -> dict:
    """A probe's hist/count/sum/stack as stats keys (only for a probe with them)."""
    agg = probe.agg
    out: dict = {"values_dropped": stats.values_dropped}
    if agg.counts or agg.hist_keys:
        out["keys_dropped"] = stats.keys_dropped
        out["keys_dropped_unknown"] = stats.keys_dropped_unknown
    if agg.stack is not None:
        out["stack_count"] = stats.stack_count
        out["stacks_dropped"] = stats.stacks_dropped
        if wants_user(probe):
            out["stacks"] = [{"frames": list(kernel), "user_frames": list(user), "count": count,
                              "partial": bool(user) and is_partial(user)}
                             for kernel, user, count in split_merged(probe, stats.stacks, symbolize)[:TOP_STACKS]]
        else:
            out["stacks"] = [{"frames": list(frames), "count": count}
                             for frames, count in merged(probe, stats.stacks, symbolize)[:TOP_STACKS]]
    names = [str(k) for k in agg.key_fetches]
    if agg.hist is not None and agg.hist_keys:
        # one histogram per key: each key's 65 slots and its values' exact sum
        out["hist_keys"] = stats.hist_keys
        out["key_hists"] = [{"key": dict(zip(names, key)), "count": sum(slots), "hist": list(slots), "sum": total}
                            for key, slots, total in stats.key_hists]
        if is_latency(agg.hist.expr):
            out["hist_unit"] = "ns"
    elif agg.hist is not None:
        out["value_hist"] = list(stats.value_hist)
        out["value_hist_sum"] = stats.value_hist_sum
    if agg.counts:
        out["value_keys"] = stats.value_keys
        out["top_values"] = [{"key": dict(zip(names, key)), "count": count, "sum": total}
                             for key, count, total in stats.top_values]
        if sums_latency(probe):
            out["sum_unit"] = "ns"  # a sum of durations (lang.latency), not of a fetched value
    return out


def cost_fields(stats: ProbeStats, cost: ProbeCost | None) -> dict:
    """A probe's "cost" object: its cumulative run counters, and what the
    last interval cost (null when unknown)."""
    return {"run_ns": stats.run_ns, "run_count": stats.run_count,
            "ns_per_hit": None if cost is None or cost.ns_per_hit is None else _digits(cost.ns_per_hit),
            "cpu_percent": None if cost is None else _digits(cost.cpu_percent)}


def _digits(x: float) -> float:
    """Four significant digits: what the clock reads mean, at any scale."""
    return float(f"{x:.4g}")
