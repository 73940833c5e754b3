"""What a consumer (dashboard, stream, record) sees of a running probe set.

A `Feed` is the one interface between the pipeline and its consumers: the
live kernel session and a replayed recording both provide it, and UI tests
use a fake one. It is polled: `drain()` returns every event since the last
call as one batch (never one call per event), and `stats()` reads the
in-kernel counters. Nothing here imports Textual or Rich.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from ktui.lang.model import Probe, ProbeSet


class ProbeState(enum.Enum):
    PENDING = "pending"  # not yet compiled / attached
    LOADING = "loading"  # attached and counting; its program is still compiling or loading
    ATTACHED = "attached"
    OFF = "off"  # switched off by the user: detached from the kernel
    FAILED = "failed"  # could not attach; `ProbeStatus.reason` says why


@dataclass(frozen=True)
class ProbeStatus:
    probe_id: int
    probe: Probe
    state: ProbeState
    reason: str = ""  # why it failed, one line (a replay: why it is off)
    # the mechanism it runs on once attached: "kprobe", "kretprobe",
    # "fentry", "fexit" ("" while pending, off or failed)
    via: str = ""

    @property
    def counting(self) -> bool:
        """In the kernel and counting its hits: attached, or loading on a
        kprobe (its dispatcher counts while the program loads). A loading
        fentry/fexit probe waits for its program: it counts nothing yet."""
        if self.state is ProbeState.LOADING:
            return self.via not in ("fentry", "fexit")
        return self.state is ProbeState.ATTACHED


# The context a hit ran in (the top 8 bits of its record's cpu field,
# kernel/codegen/interrupt_context.c), by its number: "" where the kernel
# did not let the program tell (and in recordings made before it did).
CONTEXTS = ("", "task", "softirq", "hardirq", "nmi")
CONTEXT_SHIFT = 24
CPU_MASK = (1 << CONTEXT_SHIFT) - 1


def context_name(number: int) -> str:
    return CONTEXTS[number] if 0 <= number < len(CONTEXTS) else ""


@dataclass(frozen=True)
class Event:
    """One kernel event, built only for events that are shown or written."""

    probe_id: int
    ts_ns: int  # CLOCK_MONOTONIC (bpf_ktime_get_ns)
    cpu: int
    pid: int
    tid: int
    comm: str
    latency_ns: int | None  # return probes: time since the matching entry
    values: tuple  # one per fetch of the probe, typed (int or str)
    # where it ran (CONTEXTS): a hit in an interrupt shows the task it
    # interrupted as pid and comm; "" where the kernel does not say
    context: str = ""
    # the cgroup v2 directory of its task (a span's end: its start's), as
    # its path under the mount (record.cgroups: `cgroup:<id>` when it could
    # not be named); "" where the record does not carry it (a recording
    # made before events did)
    cgroup: str = ""

    @property
    def in_interrupt(self) -> bool:
        return self.context in ("softirq", "hardirq", "nmi")


class EventBatch(Protocol):
    """Events that arrived together. Decoding into `Event`s is lazy."""

    def __len__(self) -> int: ...

    def probe_counts(self) -> dict[int, int]:
        """Events per probe id in this batch."""
        ...

    def events(self, start: int = 0, stop: int | None = None) -> list[Event]:
        """Build `Event` objects for a slice of the batch only."""
        ...


@dataclass(frozen=True)
class ListBatch:
    """An `EventBatch` over ready-made events (tests, small replays)."""

    items: Sequence[Event] = ()

    def __len__(self) -> int:
        return len(self.items)

    def probe_counts(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for e in self.items:
            counts[e.probe_id] = counts.get(e.probe_id, 0) + 1
        return counts

    def events(self, start: int = 0, stop: int | None = None) -> list[Event]:
        return list(self.items[start:stop])


@dataclass(frozen=True)
class ProbeStats:
    """Cumulative in-kernel counters of one probe, read from BPF maps."""

    probe_id: int
    hits: int = 0  # calls (or returns) that passed the filter
    lost: int = 0  # events the kernel could not put in the buffer
    emitted: int = 0  # events put in the buffer
    # hits while the probe could only count: attached to the dispatcher while
    # its program was still compiling or loading, so no event was possible.
    # For a probe that emits, hits == emitted + lost + counted_only.
    counted_only: int = 0
    hist: tuple[int, ...] = ()  # log2 latency slots in ns, record.histogram (return probes)
    # exact sum of the latencies `hist` counts, in ns (return probes): what a
    # Prometheus histogram's _sum needs, which log2 slots cannot give
    latency_sum_ns: int = 0
    errnos: tuple[tuple[int, int], ...] = ()  # (errno, count), most first
    top_comms: tuple[tuple[str, int], ...] = ()  # (comm, count), most first
    # the same sampled hits by the cgroup v2 directory they ran in, as
    # (path under the mount, count), most first: counted in the kernel in
    # the same key as the comm (generic/who.py), so as exact as top_comms
    top_cgroups: tuple[tuple[str, int], ...] = ()
    # False where hits by cgroup are not counted: a compiled probe's
    # program, or a recording made before they were
    top_cgroups_kept: bool = True
    # returns the kernel dropped (a kretprobe out of instances: maxactive);
    # for a return probe, entries == returns seen + missed_returns + in flight
    missed_returns: int = 0
    # the kretprobe's instances (calls it follows at once) when its misses
    # are counted; 0: not counted (a call probe, or no tracefs to count them)
    maxactive: int = 0
    # runs the kernel skipped because a BPF program was already running on
    # that CPU (recursion), where the kernel reports it (fentry; kprobes 6.7+)
    recursion_misses: int = 0
    # returns seen that could not be paired with their own entry: the call
    # was entered before the probe attached, its entry could not be stored,
    # it was nested deeper than the entry stack, or its thread's entry stack
    # was busy. Not in `hits`, not in the latency histogram. For a return
    # probe over a quiet period: entries == hits + unpaired + missed_returns
    # + in flight (+ filtered out)
    unpaired: int = 0
    # entries of a return probe that could not be kept (entry map full or
    # busy, nested deeper than the entry stack); each usually shows up
    # later as an unpaired return
    entries_unstored: int = 0
    # hits dropped because other hits on the same CPU held every scratch
    # level (fentry/fexit programs nest and, under preempt=full,
    # interleave), or held the thread's entry stack
    nest_dropped: int = 0
    # A span's end (`since:`): its starts (hits of the START that passed the
    # set-wide filters), those not kept (the kernel's map of waiting starts
    # full), those that replaced a start still waiting under the same key
    # (a requeue: the one replaced never ends), and ends that took their
    # start (before the end's own filter), and ends with no start waiting
    # (a return end's own unpaired returns are `unpaired`, as a return
    # probe's); starts still waiting are `span_waiting`.
    span_starts: int = 0
    span_unkept: int = 0
    span_replaced: int = 0
    span_matched: int = 0
    span_unmatched: int = 0
    # error returns whose errno falls outside the probe's errno table (so
    # not in `errnos`)
    errnos_other: int = 0
    # how a return probe's errnos are counted: "" (a call probe), "int",
    # "long", "pointer" (ERR_PTR), "guessed" (asked for without BTF: the
    # int-sized guess), or "off: <why>" ("off: void", "off: unsigned",
    # "off: not an integer", "off: by the probe set", "off: no BTF")
    errno_check: str = ""
    # False once any CPU counted past its exact first hits (a probe that only
    # counts, generic/counter.py: once the probe did): `top_comms` is then an
    # estimate (a 1-in-64 sample, each weighted 64). The same for top_cgroups
    top_comms_exact: bool = True
    # BPF run-time statistics (BPF_ENABLE_STATS), only while asked for:
    # time in the probe's programs (both halves of a return probe) and how
    # many runs it was measured over (a return probe's: its returns).
    # Cumulative while the statistics are on; 0 in a snapshot not `timed`
    run_ns: int = 0
    run_count: int = 0
    # In-kernel aggregations (a probe's hist/count/sum, lang.aggregate):
    # log2 slots of its `hist` fetch (record.histogram; () without one) ...
    value_hist: tuple[int, ...] = ()
    value_hist_sum: int = 0  # the exact sum of the values `value_hist` counts (a Prometheus _sum)
    # ... its top keys as (key values, count, sum), most first: by sum when
    # the probe sums, else by count; a key's values in `count:` order
    # (ints, comm and a wildcard's func as str); () as the key of a sum without keys
    top_values: tuple[tuple[tuple, int, int], ...] = ()
    # hist(VALUE, KEY...): the top keys' histograms by hits, most first, as
    # (key values, log2 slots, the exact sum of the values); how many keys
    key_hists: tuple[tuple[tuple, tuple[int, ...], int], ...] = ()
    hist_keys: int = 0
    value_keys: int = 0  # distinct keys in the count map (shown or not)
    value_sum: int = 0  # with sum: the sum over every key (shown or not): a key's share of it
    # hits not counted under their key because the count map was full ...
    values_dropped: int = 0
    # ... the distinct keys they had (a lower bound when keys_dropped_unknown:
    # hits whose key could not be remembered either, that map full too)
    keys_dropped: int = 0
    keys_dropped_unknown: int = 0
    # `stack:`: the most frequent stacks, (frames innermost first, count),
    # most first (at most aggmaps.STACKS_KEPT). A kernel frame is its
    # return address, symbolized by the consumer (Feed.symbolize,
    # pipeline.stacks); a user frame (`stack: user`/`both`, after the kernel
    # frames) is text, named when read (kernel/symbols/usyms.py)
    stacks: tuple[tuple[tuple[int | str, ...], int], ...] = ()
    stack_count: int = 0  # distinct stacks counted
    stacks_dropped: int = 0  # hits whose stack could not be taken or stored (map full)
    # A wildcard probe (`tcp_*:c`): its hits by function (by event, for a
    # tracepoint pattern) as (name, hits, latency_sum_ns), most hits first,
    # only those hit; they add up to `hits`. member_count: how many
    # functions (events) it is attached to; 0: not a wildcard.
    members: tuple[tuple[str, int, int], ...] = ()
    member_count: int = 0
    # `within: FUNC`: calls of FUNC whose thread found no room to be kept
    # inside (hits inside them were not counted), and returns of FUNC with
    # no entry seen (a call in progress when the gate attached, or not kept)
    gate_unkept: int = 0
    gate_unpaired: int = 0

    @property
    def span_waiting(self) -> int:
        """A span's starts still waiting for their end (the counters are
        read one after another: never below 0)."""
        return max(0, self.span_starts - self.span_unkept - self.span_replaced - self.span_matched)


@dataclass(frozen=True)
class StatsSnapshot:
    time: float  # time.monotonic() when read
    probes: dict[int, ProbeStats] = field(default_factory=dict)
    # the BPF run-time statistics were on (run_ns/run_count hold something):
    # a cost needs two timed snapshots (pipeline.rates.probe_cost)
    timed: bool = False


@dataclass(frozen=True)
class SystemInfo:
    kernel: str = ""
    kprobes: bool = False
    btf: bool = False
    root: bool = False
    buffer: str = ""  # "ringbuf" / "perf" / "replay"
    notes: tuple[str, ...] = ()  # preflight warnings, one line each
    source: str = ""  # a replay: the recording, and when it was made


class FeedError(Exception):
    """An action the feed cannot do (e.g. adding a probe to a replay)."""


class Feed(Protocol):
    probeset: ProbeSet

    def statuses(self) -> dict[int, ProbeStatus]: ...

    def drain(self) -> EventBatch:
        """Every event since the last call; never blocks."""
        ...

    def stats(self, detail: bool = True) -> StatsSnapshot:
        """Every probe's counters. `detail=False`: without what only a
        person looks at and each read would walk a shared map for (the
        distinct keys lost, the stacks): what `ktui export` reads."""
        ...

    def system_info(self) -> SystemInfo: ...

    async def set_enabled(self, probe_id: int, enabled: bool) -> ProbeStatus:
        """Attach or detach a probe (the kernel cost goes away when off)."""
        ...

    async def add_probe(self, probe: Probe) -> ProbeStatus:
        """Compile and attach a new probe; raises FeedError if not possible."""
        ...

    async def remove_probe(self, probe_id: int) -> None: ...

    def set_timing(self, on: bool) -> None:
        """The kernel's BPF run-time statistics on or off (each probe's own
        cost; they slow every BPF program while on). FeedError where there
        are none to switch: a replay, a kernel before 5.8, no privilege."""
        ...

    @property
    def timing(self) -> bool:
        """The run-time statistics are on (set_timing)."""
        ...

    def detach_all(self) -> None:
        """Detach every probe, keeping what they wrote: once this returns no
        probe program runs, so drain() until empty and then stats() see
        every event and count exactly (the way out of stream and record)."""
        ...

    def close(self) -> None:
        """Detach everything and free it. Safe to call twice."""
        ...
