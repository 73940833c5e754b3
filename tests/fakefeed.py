"""A deterministic `Feed` without a kernel, for UI tests and demos.

Everything it produces is a function of how many times it was drained and
read: fixed timestamps, values, latencies and counters, no wall clock unless
one is passed in. Events are built lazily, like the real collector's batches,
so a test can check that the app decodes only what it shows (`decoded`).
No Textual here.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Callable, Collection, Mapping, Sequence

from ktui.lang.model import Builtin, Kind, Probe, ProbeSet, RetVal
from ktui.lang.wildcards import expand
from ktui.record.feed import (
    Event,
    FeedError,
    ProbeState,
    ProbeStats,
    ProbeStatus,
    StatsSnapshot,
    SystemInfo,
)
from ktui.pipeline.accounting import COMM_EXACT
from ktui.record.histogram import HIST_SLOTS, slot_bounds

COMMS = ("bash", "cat", "sshd", "kworker/0:1", "systemd-journal")
# the same hits by cgroup v2 path: a container (shown docker:<12 hex>), a
# session deep enough to be cut in a narrow pane, a unit, the root
CGROUPS = ("system.slice/docker-" + "0123456789ab" + "c" * 52 + ".scope",
           "user.slice/user-1000.slice/user@1000.service/app.slice/session-3.scope",
           "system.slice/sshd.service", "/")
STRINGS = ("/etc/passwd", "/proc/self/maps", "tab\there", "bin\x01\x7fary")
ERRNOS = (9, 14, 11)  # EBADF, EFAULT, EAGAIN: every 8th return fails
# Relative frequency of latency slots 9..16 (256ns..64us): a skewed bell.
LATENCY_SHAPE = (2, 6, 10, 7, 4, 2, 1, 1)
LATENCY_FIRST_SLOT = 9
DEFAULT_INFO = SystemInfo(
    kernel="6.1.0-fake", kprobes=True, btf=True, root=True, buffer="ringbuf"
)


class FakeBatch:
    """`count` events dealt round-robin to `probes`, built only on demand."""

    def __init__(self, feed: "FakeFeed", probes: tuple[tuple[int, Probe], ...], first_seq: int, count: int):
        self._feed = feed
        self._probes = probes
        self._first = first_seq
        self._count = count if probes else 0

    def __len__(self) -> int:
        return self._count

    def probe_counts(self) -> dict[int, int]:
        n, k = self._count, len(self._probes)
        counts: dict[int, int] = {}
        for i, (probe_id, _) in enumerate(self._probes):
            share = n // k + (i < n % k)
            if share:
                counts[probe_id] = share
        return counts

    def events(self, start: int = 0, stop: int | None = None) -> list[Event]:
        stop = self._count if stop is None else min(stop, self._count)
        start = max(start, 0)
        self._feed.decoded += max(stop - start, 0)
        k = len(self._probes)
        return [self._feed.make_event(*self._probes[i % k], self._first + i) for i in range(start, stop)]


# An aggregated fetch's values in events (hist/count/sum of a3, say): the
# sizes fake_aggregates counts, in its shares (7 half, 4096 and 100 a quarter)
AGG_SIZES = (7, 4096, 7, 100)


def _aggregated(probe: Probe) -> tuple:
    """The expressions a probe's aggregations read (not comm/pid: events
    carry those anyway)."""
    agg = probe.agg
    if agg is None:
        return ()
    return tuple(f.expr for f in agg.fetches() if not isinstance(f.expr, Builtin))


def fake_aggregates(probe: Probe, hits: int) -> dict:
    """hist/count/sum values that follow the hits: sizes 7 (half), 4096
    and 100 (a quarter each), keyed by comm when a key is comm."""
    agg = probe.agg
    if agg is None:
        return {}
    sizes = spread(hits, (2, 1, 1))
    out: dict = {"values_dropped": 0}
    if agg.hist is not None and agg.hist_keys:  # each size its comm's: one histogram per key
        rows = []
        for size, comm, n in zip((7, 4096, 100), COMMS, sizes):
            key = tuple(comm if str(k) == "comm" else size for k in agg.hist_keys)
            hist = [0] * 65
            hist[size.bit_length()] += n
            hist[(size // 2).bit_length()] += n // 3  # a second slot, a third as many
            rows.append((key, tuple(hist), size * n + size // 2 * (n // 3)))
        rows.sort(key=lambda r: -sum(r[1]))
        out["key_hists"] = tuple(r for r in rows if sum(r[1]))
        out["hist_keys"] = len(out["key_hists"])
    elif agg.hist is not None:
        hist = [0] * 65
        for size, n in zip((7, 4096, 100), sizes):
            hist[size.bit_length()] += n
        out["value_hist"] = tuple(hist)
    if agg.counts:
        rows = []
        for size, comm, n in zip((7, 4096, 100), COMMS, sizes):
            key = tuple(comm if str(k) == "comm" else size for k in agg.keys)
            rows.append((key, n, size * n if agg.sum is not None else 0))
        rows.sort(key=lambda r: -(r[2] if agg.sum is not None else r[1]))
        out["top_values"] = tuple(r for r in rows if r[1])
        out["value_keys"] = len(out["top_values"])
        out["value_sum"] = sum(r[2] for r in rows)
        out["keys_dropped"] = 0
    if agg.stack is not None:  # two call paths, 3:1 (addresses the tests' symbolize names)
        paths = ((0xffffffff81000100, 0xffffffff81000200, 0xffffffff81000300),
                 (0xffffffff81000100, 0xffffffff81000400, 0xffffffff81000300))
        counts = spread(hits, (3, 1))
        if agg.stack in ("user", "both"):  # user frames come named (kernel/symbols/usyms.py)
            user = ("leaf+0x4", "main+0x10")
            paths = tuple((p if agg.stack == "both" else ()) + user for p in paths[:1]) + (
                (paths[1] if agg.stack == "both" else ()) + ("read+0x12",),)
        out["stacks"] = tuple((p, n) for p, n in zip(paths, counts) if n)
        out["stack_count"] = len(out["stacks"])
    return out


class FakeFeed:
    """A `Feed` over a ProbeSet.

    events_per_drain: events every `drain()` produces, dealt to the attached
        probes that fetch something (stats-only probes only count hits).
    clock: gives `StatsSnapshot.time`; by default a fake one that advances
        `stats_interval` seconds per `stats()` call, so rates are exact.
    fail: target symbol -> reason: such probes come up FAILED.
    lossy: probe names whose `lost` counter grows (a quarter of their events).
    replay: behave like a recording: `add_probe` raises FeedError.
    shaky: probe names whose kernel side could not count every hit (issue
        28's counters grow with their hits: unpaired returns, entries not
        stored, nested hits dropped, runs missed, errnos outside the table).
    errno_checks: probe name -> ProbeStats.errno_check ("off: void", ...);
        a return probe not named counts its errnos as a long ("long").
    names: what a wildcard probe (`tcp_*:c`) is matched against, as the
        session matches available_filter_functions (default FAKE_FUNCTIONS
        and FAKE_EVENTS): its `members` are set when it attaches, and its
        hits are spread over the first MEMBERS_HIT of them, most to the first.
    Top comms are exact until a probe's hits pass COMM_EXACT, as on a
    one-CPU machine, and an estimate after.
    """

    def __init__(
        self,
        probeset: ProbeSet,
        *,
        events_per_drain: int = 6,
        start_ns: int = 4_242_000_000_000,
        event_gap_ns: int = 1_500,
        clock: Callable[[], float] | None = None,
        stats_interval: float = 1.0,
        fail: Mapping[str, str] | None = None,
        lossy: Collection[str] = (),
        replay: bool = False,
        info: SystemInfo = DEFAULT_INFO,
        shaky: Collection[str] = (),
        errno_checks: Mapping[str, str] | None = None,
        names: Collection[str] = (),
        cgroups: Sequence[str] = (),
    ) -> None:
        # each event's task's cgroup path, by turns (none: events carry none,
        # as a recording made before they did)
        self.cgroups = tuple(cgroups)
        self.names = tuple(names) or FAKE_FUNCTIONS + FAKE_EVENTS
        self.events_per_drain = events_per_drain
        self.start_ns = start_ns
        self.event_gap_ns = event_gap_ns
        self.stats_interval = stats_interval
        self.fail = dict(fail or {})
        self.lossy = set(lossy)
        self.shaky = set(shaky)
        self.errno_checks = dict(errno_checks or {})
        self.replay = replay
        self.info = dataclasses.replace(info, buffer="replay") if replay else info
        self.calls: list[tuple] = []  # (method, args...) of every control call
        self.decoded = 0  # Event objects built so far
        self.detached = False  # detach_all(): no event or hit after it
        self.timing = False  # set_timing(True): stats carry run_ns/run_count
        self.closed = False
        self._clock = clock
        self._fake_time = 100.0
        self._seq = 0
        self._next_id = 1
        self._statuses: dict[int, ProbeStatus] = {}
        self._emitted: dict[int, int] = {}  # events put in the buffer, per probe
        self._hits: dict[int, int] = {}
        self._lost: dict[int, int] = {}
        self.probeset = dataclasses.replace(probeset, probes=())
        for probe in probeset.probes:
            self._attach(probe)

    # ------------------------------------------------------------ Feed

    def statuses(self) -> dict[int, ProbeStatus]:
        return dict(self._statuses)

    def drain(self) -> FakeBatch:
        attached = tuple(
            (pid, st.probe) for pid, st in self._statuses.items()
            if st.state is ProbeState.ATTACHED and not self.detached
        )
        emitting = tuple((pid, p) for pid, p in attached if p.emits_events)
        batch = FakeBatch(self, emitting, self._seq, self.events_per_drain)
        self._seq += len(batch)
        counts = batch.probe_counts()
        for pid, probe in attached:
            n = counts.get(pid, 0) if probe.emits_events else self.events_per_drain
            lost = n // 4 if probe.name in self.lossy else 0
            self._hits[pid] += n
            self._lost[pid] += lost
            self._emitted[pid] += n - lost
        return batch

    def stats(self, detail: bool = True) -> StatsSnapshot:
        if self._clock is not None:
            now = self._clock()
        else:
            self._fake_time += self.stats_interval
            now = self._fake_time
        return StatsSnapshot(
            time=now, probes={pid: self._probe_stats(pid) for pid in self._statuses}, timed=self.timing
        )

    def system_info(self) -> SystemInfo:
        return self.info

    async def set_enabled(self, probe_id: int, enabled: bool) -> ProbeStatus:
        self.calls.append(("set_enabled", probe_id, enabled))
        await asyncio.sleep(0)  # a real feed detaches in a thread
        status = self._get(probe_id)
        probe = dataclasses.replace(status.probe, enabled=enabled)
        self._statuses[probe_id] = self._status_for(probe_id, probe)
        self._sync_probeset()
        return self._statuses[probe_id]

    async def add_probe(self, probe: Probe) -> ProbeStatus:
        self.calls.append(("add_probe", probe.spec_text))
        await asyncio.sleep(0)
        if self.replay:
            raise FeedError("this is a recording: probes cannot be added to a replay")
        return self._attach(probe)

    async def remove_probe(self, probe_id: int) -> None:
        self.calls.append(("remove_probe", probe_id))
        await asyncio.sleep(0)
        if self.replay:
            raise FeedError("this is a recording: probes cannot be removed from a replay")
        self._get(probe_id)
        for table in (self._statuses, self._hits, self._lost, self._emitted):
            del table[probe_id]
        self._sync_probeset()

    def set_timing(self, on: bool) -> None:
        """Timed stats: every probe's program ran once per hit, 250 ns each."""
        self.calls.append(("set_timing", on))
        if self.replay:
            raise FeedError("this is a replay: no program runs to time (record with --cost)")
        self.timing = on

    def detach_all(self) -> None:
        self.calls.append(("detach_all",))
        self.detached = True

    def close(self) -> None:
        self.detached = True
        self.closed = True

    # ------------------------------------------------------------ the fake

    def make_event(self, probe_id: int, probe: Probe, seq: int) -> Event:
        """Event number `seq`: every field a function of `seq`."""
        pid = 1000 + seq % 7
        is_return = probe.kind is Kind.RETURN
        return Event(
            probe_id=probe_id,
            ts_ns=self.start_ns + seq * self.event_gap_ns,
            cpu=seq % 4,
            pid=pid,
            tid=pid,
            comm=COMMS[seq % len(COMMS)],
            latency_ns=latency_for(seq) if is_return else None,
            values=tuple(self._value(f.expr, f.effective_type, seq, i, _aggregated(probe))
                         for i, f in enumerate(probe.fetches)),
            cgroup=self.cgroups[seq % len(self.cgroups)] if self.cgroups else "",
        )

    def _value(self, expr, ftype: str, seq: int, index: int, aggregated=()):
        if expr in aggregated and ftype[:1] in ("u", "s", "x"):
            return AGG_SIZES[seq % len(AGG_SIZES)]  # as fake_aggregates counts them
        if isinstance(expr, Builtin):
            return {"comm": COMMS[seq % len(COMMS)], "pid": 1000 + seq % 7, "tid": 1000 + seq % 7, "cpu": seq % 4}[expr.name]
        if isinstance(expr, RetVal):
            return -ERRNOS[(seq // 8) % len(ERRNOS)] if seq % 8 == 7 else (seq * 37) % 4096
        if ftype in ("string", "ustring"):
            return STRINGS[(seq + index) % len(STRINGS)]
        if ftype == "symbol":
            return 0xFFFFFFFF81000000 + (seq % 16) * 0x40
        bits = int(ftype[1:])
        value = (seq * 2654435761 + index * 40503) % (1 << min(bits, 32))
        return -value if ftype[0] == "s" and seq % 3 == 0 else value

    def _probe_stats(self, probe_id: int) -> ProbeStats:
        probe = self._statuses[probe_id].probe
        hits = self._hits[probe_id]
        hist: tuple[int, ...] = ()
        errnos: tuple[tuple[int, int], ...] = ()
        is_return = probe.kind is Kind.RETURN
        errno_check = self.errno_checks.get(probe.name, "long") if is_return else ""
        if is_return and not errno_check.startswith("off"):
            hist = histogram_for(hits)
            fails = hits // 8
            split = spread(fails, (3, 2, 1))
            errnos = tuple((e, n) for e, n in zip(ERRNOS, split) if n)
        elif is_return:
            hist = histogram_for(hits)
        comms = spread(hits, (5, 4, 3, 2, 1))
        top = tuple((c, n) for c, n in zip(COMMS, comms) if n)
        cgroups = tuple((c, n) for c, n in zip(CGROUPS, spread(hits, (6, 3, 2, 1))) if n)
        timed = {"run_ns": 250 * hits, "run_count": hits} if self.timing else {}
        return ProbeStats(
            probe_id,
            **timed,
            **fake_aggregates(probe, hits),
            **shaky_counters(is_return, hits if probe.name in self.shaky else 0),
            hits=hits,
            lost=self._lost[probe_id],
            emitted=self._emitted[probe_id],
            hist=hist,
            errnos=errnos,
            top_comms=top,
            top_cgroups=cgroups,
            errno_check=errno_check,
            top_comms_exact=hits <= COMM_EXACT,
            **fake_members(probe, hits, self.names),
        )

    def _attach(self, probe: Probe) -> ProbeStatus:
        if probe.target.is_wildcard:  # bound as the session binds it
            pattern = probe.target.tracepoint or probe.target.symbol or ""
            probe = dataclasses.replace(probe, members=expand(pattern, self.names))
        probe_id = self._next_id
        self._next_id += 1
        self._hits[probe_id] = self._lost[probe_id] = self._emitted[probe_id] = 0
        self._statuses[probe_id] = self._status_for(probe_id, probe)
        self._sync_probeset()
        return self._statuses[probe_id]

    def _status_for(self, probe_id: int, probe: Probe) -> ProbeStatus:
        if not probe.enabled:
            return ProbeStatus(probe_id, probe, ProbeState.OFF)
        reason = self.fail.get(str(probe.target.symbol))
        if reason is not None:
            return ProbeStatus(probe_id, probe, ProbeState.FAILED, reason)
        # as a kernel session says it: on a kprobe, or a kretprobe for a return probe
        via = "kretprobe" if probe.kind is Kind.RETURN else "kprobe"
        return ProbeStatus(probe_id, probe, ProbeState.ATTACHED, via=via)

    def _get(self, probe_id: int) -> ProbeStatus:
        try:
            return self._statuses[probe_id]
        except KeyError:
            raise FeedError(f"no probe with id {probe_id}") from None

    def _sync_probeset(self) -> None:
        self.probeset = dataclasses.replace(
            self.probeset, probes=tuple(st.probe for st in self._statuses.values())
        )


# What wildcards match here: some of tcp's real functions first (the ones
# hit), then enough others for a pattern to match 120; and events.
FAKE_FUNCTIONS = (
    "tcp_sendmsg", "tcp_recvmsg", "tcp_v4_rcv", "tcp_ack", "tcp_rcv_established", "tcp_poll",
    "tcp_write_xmit", "tcp_transmit_skb", "tcp_clean_rtx_queue", "tcp_v4_do_rcv", "tcp_data_queue",
    "tcp_event_new_data_sent", "tcp_rate_skb_delivered", "tcp_send_ack", "tcp_cleanup_rbuf",
    "tcp_release_cb", "tcp_push", "tcp_current_mss", "tcp_established_options",
    "tcp_v4_send_check", "tcp_schedule_loss_probe", "tcp_check_space", "tcp_urg",
    "tcp_sendmsg_locked", "tcp_stream_memory_free", "tcp_recvmsg_locked", "tcp_rcv_space_adjust",
    "tcp_mstamp_refresh", "tcp_update_skb_after_send", "tcp_chrono_stop", "tcp_wfree",
    "tcp_small_queue_check.isra.0", "tcp_tso_segs", "tcp_queue_rcv", "tcp_event_data_recv",
    "tcp_ack_update_rtt", "tcp_rearm_rto",
) + tuple(f"tcp_fake_{i:03d}" for i in range(83)) + ("udp_sendmsg", "vfs_read", "vfs_write")
FAKE_EVENTS = tuple(f"syscalls/sys_enter_{n}" for n in (
    "read", "write", "openat", "close", "mmap", "futex", "epoll_wait", "newfstatat", "ioctl", "lseek"))
MEMBERS_HIT = 37


def fake_members(probe: Probe, hits: int, names: tuple[str, ...]) -> dict:
    """A wildcard's hits spread over its first MEMBERS_HIT members in the
    order of `names`, most to the first, only those hit; a return probe's
    latency sums grow with each member's place (1.2 us a call for the
    first, then longer)."""
    if not probe.target.is_wildcard or probe.members is None:
        return {}
    rank = {name: i for i, name in enumerate(names)}
    chosen = sorted(probe.members, key=lambda name: rank.get(name, len(rank)))[:MEMBERS_HIT]
    split = spread(hits, tuple(range(len(chosen), 0, -1)) or (1,))
    latency = probe.kind is Kind.RETURN
    members = tuple((name, n, n * (1_200 + 700 * i) if latency else 0)
                    for i, (name, n) in enumerate(zip(chosen, split)) if n)
    return {"members": tuple(sorted(members, key=lambda m: (-m[1], m[0]))), "member_count": len(probe.members)}


def shaky_counters(is_return: bool, hits: int) -> dict:
    """Issue 28's counters of a probe whose kernel side could not count every
    hit, growing with its `hits`: a return probe 1 in 16 returns unpaired
    (half of them for an entry not stored), 1 in 40 errnos outside the
    table; any probe 1 in 64 hits dropped nested, 1 in 128 runs missed."""
    counters = {"nest_dropped": hits // 64, "recursion_misses": hits // 128}
    if is_return:
        counters.update(unpaired=hits // 16, entries_unstored=hits // 32, errnos_other=hits // 40)
    return counters


def spread(total: int, weights: tuple[int, ...]) -> list[int]:
    """Split `total` by `weights` in integers that sum to `total`, the same
    way every time (cumulative floors, so counters only ever grow)."""
    whole = sum(weights)
    out, acc, prev = [], 0, 0
    for w in weights:
        acc += w
        upto = total * acc // whole
        out.append(upto - prev)
        prev = upto
    return out


def histogram_for(returns: int) -> tuple[int, ...]:
    """The log2 latency histogram of `returns` calls shaped by LATENCY_SHAPE."""
    hist = [0] * HIST_SLOTS
    for i, n in enumerate(spread(returns, LATENCY_SHAPE)):
        hist[LATENCY_FIRST_SLOT + i] = n
    return tuple(hist)


def latency_for(seq: int) -> int:
    """A latency for event `seq`, inside the slots LATENCY_SHAPE uses."""
    low, high = slot_bounds(LATENCY_FIRST_SLOT + (seq * 5) % len(LATENCY_SHAPE))
    return low + (seq * 97) % (high - low + 1)
