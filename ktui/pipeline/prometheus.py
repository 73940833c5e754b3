"""Probe stats as Prometheus metrics, for `ktui export`.

A prometheus_client collector: every scrape reads the kernel's maps once
(through `read`, which returns the probes and their ProbeStats) and turns
them into metric families. Nothing is counted here: the numbers are the
in-kernel counters, so a scrape costs one map read whatever the event rate,
and the probes never wait for it.

Metrics (labels `set` and `probe` on every one):
  ktui_probe_hits_total                  counter  calls (returns) that passed the filter
  ktui_probe_events_emitted_total        counter  events put in the buffer
  ktui_probe_events_lost_total           counter  events the buffer had no room for
  ktui_probe_missed_returns_total        counter  returns a kretprobe dropped (maxactive)  [return probes]
  ktui_probe_recursion_misses_total      counter  runs the kernel skipped (recursion)
  ktui_probe_unpaired_returns_total      counter  returns not paired with their entry   [return probes]
  ktui_probe_entries_unstored_total      counter  entries that could not be kept         [return probes]
  ktui_probe_nested_hits_dropped_total   counter  hits dropped: every scratch level busy
  ktui_probe_errno_other_total           counter  errnos outside the errno table        [return probes]
  ktui_probe_errno_total{errno}          counter  returns with that negative errno        [return probes]
  ktui_probe_latency_seconds             histogram  call-to-return time                   [return probes]
  ktui_probe_comm_hits_total{comm}       counter  hits by the top `top_comms` task names
  ktui_probe_comm_hits_omitted           gauge    hits by task names left out of that top
  ktui_probe_comm_hits_exact             gauge    1 while those are exact counts, 0 once an estimate
                                                  (the cgroup series' too: the same sample)
  ktui_probe_cgroup_hits_total{cgroup}   counter  the same hits by cgroup v2 path, the top `top_comms`
                                                  (no series for a compiled probe: not counted there)
  ktui_probe_cgroup_hits_omitted         gauge    hits by cgroups left out of that top
  ktui_probe_errno_checked               gauge    1 if errnos are counted, 0 if not (void...) [return probes]
  ktui_probe_attached                    gauge    1 while the probe is attached
  ktui_probe_state{state}                gauge    1 for the probe's state, 0 for the others: pending,
                                                  loading (its program not in: counts nothing yet),
                                                  counting (counts hits; events and latencies once its
                                                  program is in), attached, off, failed

The exporter's own health (no `set` or `probe` label):
  ktui_exporter_scrape_success           gauge    1 if this scrape read the maps, 0 if the read failed
  ktui_exporter_scrape_duration_seconds  gauge    how long this scrape's map read took
  ktui_exporter_map_read_errors_total    counter  scrapes whose map read failed (the probes' metrics are
                                                  then left out of that scrape; stderr says why, once)
  ktui_exporter_reloads_total{result}    counter  SIGHUP reloads: result success or failure (a file that
                                                  did not load; the running set and web config stay)
  ktui_exporter_last_reload_successful   gauge    0 after a reload that failed, until one succeeds
  ktui_exporter_connections_open         gauge    connections open now, idle or busy (the exporter's
                                                  MAX_CONNECTIONS at most)
  ktui_exporter_connections_refused_total  counter  connections closed at once: at the cap, none idle
  ktui_exporter_connections_closed_idle_total  counter  idle connections closed to make room at the cap
  (these three only with a server's counts: ExporterHealth.connections)

A probe's in-kernel aggregations (lang.aggregate), for the probes that have
them:
  ktui_probe_value                       histogram  `hist(FETCH)`: log2 buckets, the exact in-kernel sum
  ktui_probe_key_hits_total{KEYS}        counter  `count(KEYS)`: hits by key, the top TOP_VALUES keys
  ktui_probe_key_sum_total{KEYS}         counter  `sum(FETCH)` by key (a signed FETCH's negative values,
                                                  errnos, are counted but not summed: it never goes down)
  ktui_probe_key_latency_seconds_total{KEYS}  counter  `sum(latency)` by key, in seconds (exact
                                                  nanoseconds / 1e9) in place of the above
  ktui_probe_keys                        gauge    distinct keys counted, exported or not
  ktui_probe_keys_omitted                gauge    keys past the cap of TOP_VALUES series a probe exports
  ktui_probe_key_hits_dropped_total      counter  hits not counted under a key: the count map was full

A wildcard probe's hits by member (`tcp_*:c`), one series per function
hit (at most the functions it matches: the probe's caps bound them; a
series appears with its first hit and, a counter, stays):
  ktui_probe_function_hits_total{function}      counter  hits in that function (for a tracepoint
                                                          pattern `function` is the event, CATEGORY/NAME)
  ktui_probe_function_latency_seconds_total{function}  counter  its call-to-return time, summed (exact)
                                                          [return probes]: rate() of it over rate() of
                                                          the hits is the function's mean latency
  ktui_probe_functions                           gauge    the functions (events) it is attached to

KEYS are the `count` keys as labels, each named as the probe names the
fetch (`comm`, `a3`, `size`) where that is a label name Prometheus takes,
else `key1`, `key2`... in order; a comm is its text, an integer its
decimal value. A value histogram's bucket `le` is the largest value its
log2 slot counts (2^k - 1: "0", "1", "3", "7"...; exact integers); its
`_sum` is the kernel's exact sum of the values counted (a signed fetch's
negative values are in neither: see the probe's hits).

The latency histogram's buckets are the kernel's log2 slots
(record.histogram): slot k counts 2^(k-1) .. 2^k - 1 ns, so its upper
bound `le` is (2^k - 1) ns, written as an exact decimal number of seconds
(slot 0: le="0"). All 65 slots are always exposed, so the bucket set never
changes between scrapes; `_sum` is the kernel's exact nanosecond sum.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ktui.lang.latency import is_latency, sums_latency
from ktui.pipeline.format import errno_name
from ktui.record.feed import ProbeStats
from ktui.record.histogram import HIST_SLOTS, fit, slot_bounds

TOP_COMMS = 5  # comm series per probe: the label cardinality stays bounded
TOP_VALUES = 10  # count/sum series per probe (what a stats read keeps: kernel.maps.aggmaps.TOP_VALUES)
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_RESERVED = {"set", "probe", "le", "quantile", "job", "instance"}


@dataclass(frozen=True)
class ProbeView:
    """What one probe shows on a scrape."""

    name: str
    set: str
    is_return: bool
    stats: ProbeStats
    # its aggregations (value_shape): a `hist`; the label names of its
    # `count` keys (None: no count or sum); a `sum`
    value_hist: bool = False
    value_keys: tuple[str, ...] | None = None
    value_sum: bool = False
    value_sum_latency: bool = False  # its `sum` is sum(latency): seconds (lang.latency)
    # hist(VALUE, KEY...): the label names of its histogram's keys (None:
    # no keyed histogram), and whether its value is latency (seconds)
    hist_keys: tuple[str, ...] | None = None
    hist_latency: bool = False
    # what it is doing (ProbeStatus: probe_state): one of PROBE_STATES
    state: str = "attached"
    # its hits have a latency: a return probe's, or a span's (since its start)
    timed: bool = False
    span: bool = False  # a span's end (`since:`): its own counters too

    @property
    def attached(self) -> bool:
        """In the kernel and counting its hits (ktui_probe_attached): what
        ProbeStatus.counting says, read from the state, not kept beside it."""
        return self.state in ("counting", "attached")


# A probe's states, as ktui_probe_state's `state` label: every one is
# exported for every probe (1 for its state), so a query never misses a
# series that is 0.
PROBE_STATES = ("pending", "loading", "counting", "attached", "off", "failed")


def probe_state(status) -> str:
    """The state label of a record.feed.ProbeStatus: a loading probe that
    already counts (a kprobe: its dispatcher counts while the program
    loads) is `counting`; one that waits for its program (fentry) is
    `loading`."""
    state = status.state.value
    if state == "loading" and status.counting:
        return "counting"
    return state


def value_shape(probe) -> dict:
    """ProbeView's aggregation fields for a lang.model.Probe."""
    agg = probe.agg
    if agg is None:
        return {}
    out: dict = {"value_hist": agg.hist is not None and not agg.hist_keys}
    if agg.hist is not None and agg.hist_keys:
        out["hist_keys"] = key_labels([k.name for k in agg.hist_keys])
        out["hist_latency"] = is_latency(agg.hist.expr)
    if agg.counts:
        out["value_keys"] = key_labels([k.name for k in agg.keys])
        out["value_sum"] = agg.sum is not None
        out["value_sum_latency"] = sums_latency(probe)
    return out


def key_labels(names: Sequence[str]) -> tuple[str, ...]:
    """Label names for `count` keys named `names`: each as it is named
    where Prometheus takes it as a label name, else key1, key2... by its
    place (`+0(a4):s64` has no name a label can carry)."""
    out: list[str] = []
    for i, name in enumerate(names, 1):
        ok = _LABEL_NAME.match(name) and not name.startswith("__") and name not in _RESERVED
        out.append(name if ok and name not in out else f"key{i}")
    return tuple(out)


def seconds_text(ns: int) -> str:
    """`ns` nanoseconds as an exact decimal number of seconds: 1023 ->
    "0.000001023" (a float would round the large bounds)."""
    whole, frac = divmod(ns, 10**9)
    frac_text = f"{frac:09d}".rstrip("0")
    return f"{whole}.{frac_text}" if frac_text else str(whole)


# le of each slot: the largest latency it counts
BUCKET_BOUNDS = tuple(seconds_text(slot_bounds(k)[1]) for k in range(HIST_SLOTS))
# ... and the largest value, for a `hist` of a fetched value
VALUE_BOUNDS = tuple(str(slot_bounds(k)[1]) for k in range(HIST_SLOTS))


def latency_buckets(hist: Sequence[int], bounds: Sequence[str] = BUCKET_BOUNDS) -> list[tuple[str, int]]:
    """Cumulative (le, count) pairs from log2 slots, ending with +Inf."""
    counts = fit(hist) or (0,) * HIST_SLOTS
    out, running = [], 0
    for le, n in zip(bounds, counts):
        running += n
        out.append((le, running))
    out.append(("+Inf", running))
    return out


def families(probes: Sequence[ProbeView], top_comms: int = TOP_COMMS) -> list:
    labels = ["set", "probe"]
    hits = CounterMetricFamily("ktui_probe_hits", "Calls (or returns) that passed the probe's filter.",
                               labels=labels)
    emitted = CounterMetricFamily("ktui_probe_events_emitted", "Events the probe put in the buffer.",
                                  labels=labels)
    lost = CounterMetricFamily("ktui_probe_events_lost", "Events the buffer had no room for.", labels=labels)
    missed = CounterMetricFamily("ktui_probe_missed_returns",
                                 "Returns the kretprobe dropped: more calls in flight than maxactive.",
                                 labels=labels)
    recursion = CounterMetricFamily("ktui_probe_recursion_misses",
                                    "Runs the kernel skipped: a BPF program already ran on that CPU.",
                                    labels=labels)
    unpaired = CounterMetricFamily("ktui_probe_unpaired_returns",
                                   "Returns not paired with their own entry: in neither hits nor latency.",
                                   labels=labels)
    unstored = CounterMetricFamily("ktui_probe_entries_unstored",
                                   "Entries that could not be kept (map full or busy, too deep); most come "
                                   "back as unpaired returns.", labels=labels)
    nested = CounterMetricFamily("ktui_probe_nested_hits_dropped",
                                 "Hits dropped: other hits on the same CPU held every scratch level.",
                                 labels=labels)
    errnos = CounterMetricFamily("ktui_probe_errno", "Returns with a negative errno, by name.",
                                 labels=labels + ["errno"])
    errno_other = CounterMetricFamily("ktui_probe_errno_other",
                                      "Returns with a negative errno outside the probe's errno table.",
                                      labels=labels)
    latency = HistogramMetricFamily("ktui_probe_latency_seconds",
                                    "Time from call to return, or from a span's start to its end (log2 buckets, exact sum).",
                                    labels=labels)
    comms = CounterMetricFamily("ktui_probe_comm_hits",
                                f"Hits by task name: the top {top_comms} per probe (sampled past the first hits).",
                                labels=labels + ["comm"])
    omitted = GaugeMetricFamily("ktui_probe_comm_hits_omitted",
                                "Hits by the task names left out of ktui_probe_comm_hits.", labels=labels)
    comms_exact = GaugeMetricFamily("ktui_probe_comm_hits_exact",
                                    "1 while ktui_probe_comm_hits counts every hit; 0 once any CPU passed the "
                                    "exact first hits (then a random sample, weighted).", labels=labels)
    cgroups = CounterMetricFamily("ktui_probe_cgroup_hits",
                                  f"Hits by cgroup v2 path: the top {top_comms} per probe (the same sample as "
                                  "ktui_probe_comm_hits).", labels=labels + ["cgroup"])
    cgroups_omitted = GaugeMetricFamily("ktui_probe_cgroup_hits_omitted",
                                        "Hits by the cgroups left out of ktui_probe_cgroup_hits.", labels=labels)
    errno_checked = GaugeMetricFamily("ktui_probe_errno_checked",
                                      "1 if the return probe's errnos are counted; 0 if not (a void or unsigned "
                                      "function, no BTF, or off in the probe set).", labels=labels)
    attached = GaugeMetricFamily("ktui_probe_attached", "1 while the probe is attached and counting.",
                                 labels=labels)
    state = GaugeMetricFamily("ktui_probe_state", "1 for the probe's state (pending, loading: counts nothing "
                              "yet, counting: hits only until its program is in, attached, off, failed), "
                              "0 for the others.", labels=labels + ["state"])
    for p in probes:
        key = [p.set, p.name]
        s = p.stats
        hits.add_metric(key, s.hits)
        emitted.add_metric(key, s.emitted)
        lost.add_metric(key, s.lost)
        recursion.add_metric(key, s.recursion_misses)
        nested.add_metric(key, s.nest_dropped)
        attached.add_metric(key, 1 if p.attached else 0)
        for name in PROBE_STATES:
            state.add_metric(key + [name], 1 if p.state == name else 0)
        top = s.top_comms[:top_comms]
        for comm, n in top:
            comms.add_metric(key + [comm], n)
        omitted.add_metric(key, max(0, s.hits - sum(n for _, n in top)))
        comms_exact.add_metric(key, 1 if s.top_comms_exact else 0)
        if s.top_cgroups_kept:
            top_cg = s.top_cgroups[:top_comms]
            for path, n in top_cg:  # the whole path: a label is for machines
                cgroups.add_metric(key + [path], n)
            cgroups_omitted.add_metric(key, max(0, s.hits - sum(n for _, n in top_cg)))
        if p.is_return:
            missed.add_metric(key, s.missed_returns)
            unpaired.add_metric(key, s.unpaired)
            unstored.add_metric(key, s.entries_unstored)
            errno_other.add_metric(key, s.errnos_other)
            if s.errno_check:  # "": not said (a feed that predates the check)
                errno_checked.add_metric(key, 0 if s.errno_check.startswith("off") else 1)
            for err, n in sorted(s.errnos):
                errnos.add_metric(key + [errno_name(err)], n)
        if p.is_return or p.timed:
            latency.add_metric(key, latency_buckets(s.hist), s.latency_sum_ns / 1e9)
    return [hits, emitted, lost, missed, unpaired, unstored, recursion, nested, errnos, errno_other, latency,
            comms, omitted, comms_exact, cgroups, cgroups_omitted, errno_checked, attached, state,
            *value_families(probes), *member_families(probes), *span_families(probes)]


def span_families(probes: Sequence[ProbeView]) -> list:
    """A span's own counters (`since:`; its latency is ktui_probe_latency_seconds,
    its hits are the ends that took their start and passed its filter);
    none for a set without spans."""
    labels = ["set", "probe"]
    starts = CounterMetricFamily("ktui_probe_span_starts", "A span's starts (its START's hits that passed the "
                                 "set-wide filters).", labels=labels)
    unmatched = CounterMetricFamily("ktui_probe_span_unmatched_ends", "A span's ends that found no start "
                                    "waiting under their key.", labels=labels)
    unkept = CounterMetricFamily("ktui_probe_span_unkept_starts", "A span's starts not kept: the kernel's map "
                                 "of waiting starts was full.", labels=labels)
    replaced = CounterMetricFamily("ktui_probe_span_replaced_starts", "A span's starts replaced by another of "
                                   "the same key before their end.", labels=labels)
    waiting = GaugeMetricFamily("ktui_probe_span_waiting", "A span's starts waiting for their end now.",
                                labels=labels)
    for p in probes:
        s = p.stats
        if not p.span:
            continue
        key = [p.set, p.name]
        starts.add_metric(key, s.span_starts)
        unmatched.add_metric(key, s.span_unmatched)
        unkept.add_metric(key, s.span_unkept)
        replaced.add_metric(key, s.span_replaced)
        waiting.add_metric(key, s.span_waiting)
    return [f for f in (starts, unmatched, unkept, replaced, waiting) if f.samples]


def member_families(probes: Sequence[ProbeView]) -> list:
    """The wildcard probes' hits (and a return probe's latency) by member;
    none for a set without wildcards."""
    labels = ["set", "probe", "function"]
    hits = CounterMetricFamily("ktui_probe_function_hits", "A wildcard probe's hits by function (by event, "
                               "CATEGORY/NAME, for a tracepoint pattern).", labels=labels)
    latency = CounterMetricFamily("ktui_probe_function_latency_seconds", "A wildcard return probe's "
                                  "call-to-return time by function, summed.", labels=labels)
    count = GaugeMetricFamily("ktui_probe_functions", "The functions (events) a wildcard probe is attached to.",
                              labels=labels[:2])
    for p in probes:
        s = p.stats
        if not s.member_count and not s.members:
            continue
        count.add_metric([p.set, p.name], s.member_count)
        for name, n, latency_ns in s.members:
            hits.add_metric([p.set, p.name, name], n)
            if p.is_return:
                latency.add_metric([p.set, p.name, name], latency_ns / 1e9)
    return [f for f in (hits, latency, count) if f.samples]


def value_families(probes: Sequence[ProbeView], top_values: int = TOP_VALUES) -> list:
    """The probes' aggregations. A count family's series carry the labels
    of their own probe's keys (probes differ in them), so its samples are
    added one by one, each with its own label set."""
    labels = ["set", "probe"]
    hist = HistogramMetricFamily("ktui_probe_value", "A probe's hist(FETCH): log2 buckets of the value, the "
                                 "exact in-kernel sum; hist(FETCH, KEYS): one per top key, with its keys' "
                                 "labels.", labels=labels)
    count = Metric("ktui_probe_key_hits", "A probe's count(KEYS): hits by key, its top keys.", "counter")
    sums = Metric("ktui_probe_key_sum", "A probe's sum(FETCH) by key (negative values, errnos, are not "
                  "summed).", "counter")
    seconds = Metric("ktui_probe_key_latency_seconds", "A probe's sum(latency) by key: the time of its "
                     "hits (returns since their calls, or spans since their starts).", "counter")
    latency = Metric("ktui_probe_latency_by_key_seconds", "A probe's hist(latency, KEYS): the time of its "
                     "hits by key (log2 buckets, exact sum), its top keys.", "histogram")
    keys = GaugeMetricFamily("ktui_probe_keys", "Distinct keys a probe's count(KEYS) counted.", labels=labels)
    omitted = GaugeMetricFamily("ktui_probe_keys_omitted", f"Keys past the {top_values} series a probe exports.",
                                labels=labels)
    dropped = CounterMetricFamily("ktui_probe_key_hits_dropped",
                                  "Hits not counted under a key: the probe's count map was full.", labels=labels)
    for p in probes:
        key = [p.set, p.name]
        s = p.stats
        base = {"set": p.set, "probe": p.name}
        if p.value_hist:
            hist.add_metric(key, latency_buckets(s.value_hist, VALUE_BOUNDS), s.value_hist_sum)
        if p.hist_keys is not None:
            # a keyed hist(VALUE, KEYS): hist(VALUE)'s family and buckets, one series per
            # top key (a latency's in seconds, as ktui_probe_latency_seconds)
            family = latency if p.hist_latency else hist
            for values, slots, total in s.key_hists[:top_values]:
                series = {**base, **{name: str(v) for name, v in zip(p.hist_keys, values)}}
                _add_histogram(family, series, slots, total,
                               BUCKET_BOUNDS if p.hist_latency else VALUE_BOUNDS, 1e9 if p.hist_latency else 1)
            if p.value_keys is None:  # its keys' numbers, when no count gives them
                keys.add_metric(key, s.hist_keys)
                omitted.add_metric(key, max(0, s.hist_keys - len(s.key_hists[:top_values])))
                dropped.add_metric(key, s.values_dropped)
        if p.value_keys is None:
            continue
        top = s.top_values[:top_values]
        for values, n, total in top:
            series = {**base, **{name: str(v) for name, v in zip(p.value_keys, values)}}
            count.add_sample("ktui_probe_key_hits_total", series, n)
            if p.value_sum_latency:
                seconds.add_sample("ktui_probe_key_latency_seconds_total", series, total / 1e9)
            elif p.value_sum:
                sums.add_sample("ktui_probe_key_sum_total", series, total)
        keys.add_metric(key, s.value_keys)
        omitted.add_metric(key, max(0, s.value_keys - len(top)))
        dropped.add_metric(key, s.values_dropped)
    # only those some probe has: a set without aggregations exposes none of them
    return [f for f in (hist, latency, count, sums, seconds, keys, omitted, dropped) if f.samples]


def _add_histogram(family: Metric, labels: dict[str, str], slots: Sequence[int], total: int,
                   bounds: Sequence[str], per_unit: float) -> None:
    """One histogram series of log2 `slots` (its `le` bounds exact, as
    hist(FETCH)'s), its _sum (`total` / `per_unit`) and _count, into a
    family whose series differ in their labels."""
    buckets = latency_buckets(slots, bounds)
    for le, n in buckets:
        family.add_sample(f"{family.name}_bucket", {**labels, "le": le}, n)
    family.add_sample(f"{family.name}_sum", labels, total / per_unit if per_unit != 1 else total)
    family.add_sample(f"{family.name}_count", labels, buckets[-1][1])


class ExporterHealth:
    """The exporter's own numbers: map reads that failed, reloads, and its
    server's connections. Shared by the scrape threads and the main loop (a
    reload)."""

    def __init__(self, log: Callable[[str], None] | None = None) -> None:
        # The server's counts when there is one (exporter.Connections: open,
        # refused, closed_idle); it keeps them under its own lock.
        self.connections: Callable[[], Any] | None = None
        self._lock = threading.Lock()
        self.read_errors = 0
        self.reloads = {"success": 0, "failure": 0}
        self.last_reload_ok = True
        self._last_error = ""
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))

    def read_failed(self, exc: BaseException) -> None:
        """Counted; one line on stderr when the reason is new (a read that
        keeps failing, scraped every second, is not a line a second)."""
        text = f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.read_errors += 1
            new, self._last_error = text != self._last_error, text
        if new:
            self._log(f"ktui: a scrape could not read the maps: {text} (counted in "
                      "ktui_exporter_map_read_errors_total)")

    def reloaded(self, ok: bool) -> None:
        with self._lock:
            self.reloads["success" if ok else "failure"] += 1
            self.last_reload_ok = ok

    def families(self, success: bool, seconds: float) -> list:
        with self._lock:
            errors, reloads, last_ok = self.read_errors, dict(self.reloads), self.last_reload_ok
        ok = GaugeMetricFamily("ktui_exporter_scrape_success", "1 if this scrape read the maps, 0 if the "
                               "read failed (the probes' metrics are then left out).", value=1 if success else 0)
        duration = GaugeMetricFamily("ktui_exporter_scrape_duration_seconds",
                                     "How long this scrape's read of the maps took.", value=seconds)
        failed = CounterMetricFamily("ktui_exporter_map_read_errors", "Scrapes whose map read failed.",
                                     value=errors)
        reload_count = CounterMetricFamily("ktui_exporter_reloads", "SIGHUP reloads of the probe sets and "
                                           "web config, by result.", labels=["result"])
        for result in ("success", "failure"):
            reload_count.add_metric([result], reloads[result])
        last = GaugeMetricFamily("ktui_exporter_last_reload_successful", "0 after a reload whose file did not "
                                 "load (the running set stays), until one succeeds.", value=1 if last_ok else 0)
        return [ok, duration, failed, reload_count, last, *self._connection_families()]

    def _connection_families(self) -> list:
        if self.connections is None:
            return []
        conns = self.connections()
        return [
            GaugeMetricFamily("ktui_exporter_connections_open", "Connections open now, idle or not.",
                              value=conns.open),
            CounterMetricFamily("ktui_exporter_connections_refused", "Connections closed at once: the "
                                "connection cap reached and none of them idle.", value=conns.refused),
            CounterMetricFamily("ktui_exporter_connections_closed_idle", "Idle keep-alive connections "
                                "closed to make room for a new one at the connection cap.",
                                value=conns.closed_idle),
        ]


class ProbeCollector(Collector):
    """Registered once; each scrape calls `read()` for the current probes,
    then adds the exporter's health. A read that raises leaves the probes'
    metrics out of that scrape, and is counted: Prometheus still gets an
    answer that says so."""

    def __init__(self, read: Callable[[], Sequence[ProbeView]], top_comms: int = TOP_COMMS,
                 health: ExporterHealth | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.read = read
        self.top_comms = top_comms
        self.health = health or ExporterHealth()
        self.clock = clock  # tests stop it: a golden text with no duration that varies

    def collect(self) -> Iterator:
        started = self.clock()
        try:
            views = self.read()
        except Exception as exc:  # noqa: BLE001 - counted and said, never a failed scrape
            self.health.read_failed(exc)
            views = None
        seconds = self.clock() - started
        if views is not None:
            yield from families(views, self.top_comms)
        yield from self.health.families(views is not None, seconds)
