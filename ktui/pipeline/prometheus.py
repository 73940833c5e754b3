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
  ktui_probe_errno_checked               gauge    1 if errnos are counted, 0 if not (void...) [return probes]
  ktui_probe_attached                    gauge    1 while the probe is attached

The latency histogram's buckets are the kernel's log2 slots
(record.histogram): slot k counts 2^(k-1) .. 2^k - 1 ns, so its upper
bound `le` is (2^k - 1) ns, written as an exact decimal number of seconds
(slot 0: le="0"). All 65 slots are always exposed, so the bucket set never
changes between scrapes; `_sum` is the kernel's exact nanosecond sum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from ktui.pipeline.format import errno_name
from ktui.record.feed import ProbeStats
from ktui.record.histogram import HIST_SLOTS, fit, slot_bounds

TOP_COMMS = 5  # comm series per probe: the label cardinality stays bounded


@dataclass(frozen=True)
class ProbeView:
    """What one probe shows on a scrape."""

    name: str
    set: str
    is_return: bool
    attached: bool
    stats: ProbeStats


def seconds_text(ns: int) -> str:
    """`ns` nanoseconds as an exact decimal number of seconds: 1023 ->
    "0.000001023" (a float would round the large bounds)."""
    whole, frac = divmod(ns, 10**9)
    frac_text = f"{frac:09d}".rstrip("0")
    return f"{whole}.{frac_text}" if frac_text else str(whole)


# le of each slot: the largest latency it counts
BUCKET_BOUNDS = tuple(seconds_text(slot_bounds(k)[1]) for k in range(HIST_SLOTS))


def latency_buckets(hist: Sequence[int]) -> list[tuple[str, int]]:
    """Cumulative (le, count) pairs from log2 slots, ending with +Inf."""
    counts = fit(hist) or (0,) * HIST_SLOTS
    out, running = [], 0
    for le, n in zip(BUCKET_BOUNDS, counts):
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
                                    "Time from call to return (log2 buckets, exact sum).", labels=labels)
    comms = CounterMetricFamily("ktui_probe_comm_hits",
                                f"Hits by task name: the top {top_comms} per probe (sampled past the first hits).",
                                labels=labels + ["comm"])
    omitted = GaugeMetricFamily("ktui_probe_comm_hits_omitted",
                                "Hits by the task names left out of ktui_probe_comm_hits.", labels=labels)
    comms_exact = GaugeMetricFamily("ktui_probe_comm_hits_exact",
                                    "1 while ktui_probe_comm_hits counts every hit; 0 once any CPU passed the "
                                    "exact first hits (then a random sample, weighted).", labels=labels)
    errno_checked = GaugeMetricFamily("ktui_probe_errno_checked",
                                      "1 if the return probe's errnos are counted; 0 if not (a void or unsigned "
                                      "function, no BTF, or off in the probe set).", labels=labels)
    attached = GaugeMetricFamily("ktui_probe_attached", "1 while the probe is attached and counting.",
                                 labels=labels)
    for p in probes:
        key = [p.set, p.name]
        s = p.stats
        hits.add_metric(key, s.hits)
        emitted.add_metric(key, s.emitted)
        lost.add_metric(key, s.lost)
        recursion.add_metric(key, s.recursion_misses)
        nested.add_metric(key, s.nest_dropped)
        attached.add_metric(key, 1 if p.attached else 0)
        top = s.top_comms[:top_comms]
        for comm, n in top:
            comms.add_metric(key + [comm], n)
        omitted.add_metric(key, max(0, s.hits - sum(n for _, n in top)))
        comms_exact.add_metric(key, 1 if s.top_comms_exact else 0)
        if p.is_return:
            missed.add_metric(key, s.missed_returns)
            unpaired.add_metric(key, s.unpaired)
            unstored.add_metric(key, s.entries_unstored)
            errno_other.add_metric(key, s.errnos_other)
            if s.errno_check:  # "": not said (a feed that predates the check)
                errno_checked.add_metric(key, 0 if s.errno_check.startswith("off") else 1)
            for err, n in sorted(s.errnos):
                errnos.add_metric(key + [errno_name(err)], n)
            latency.add_metric(key, latency_buckets(s.hist), s.latency_sum_ns / 1e9)
    return [hits, emitted, lost, missed, unpaired, unstored, recursion, nested, errnos, errno_other, latency,
            comms, omitted, comms_exact, errno_checked, attached]


class ProbeCollector(Collector):
    """Registered once; each scrape calls `read()` for the current probes."""

    def __init__(self, read: Callable[[], Sequence[ProbeView]], top_comms: int = TOP_COMMS) -> None:
        self.read = read
        self.top_comms = top_comms

    def collect(self) -> Iterator:
        yield from families(self.read(), self.top_comms)
