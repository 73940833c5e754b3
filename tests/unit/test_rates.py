"""ktui.pipeline.rates: rates from counter deltas, percentiles and funclatency text
from log2 histograms, and the bounded rate history."""

from __future__ import annotations

import pytest

from ktui.pipeline.rates import (
    RateHistory,
    counter_delta,
    drop_percent,
    error_count,
    hist_lines,
    lost_growing,
    percentile,
    rate,
    rates,
    totals,
)
from ktui.record.feed import ProbeStats, StatsSnapshot
from ktui.record.histogram import HIST_SLOTS


def snap(time: float, **hits_by_id) -> StatsSnapshot:
    return StatsSnapshot(time, {int(k[1:]): ProbeStats(int(k[1:]), hits=v) for k, v in hits_by_id.items()})


def hist(**slots) -> tuple[int, ...]:
    out = [0] * HIST_SLOTS
    for name, count in slots.items():
        out[int(name[1:])] = count
    return tuple(out)


# ---------------------------------------------------------------- rates


def test_counter_delta_grows_and_resets():
    assert counter_delta(100, 250) == 150
    assert counter_delta(250, 250) == 0
    # a counter that went down was reset (re-attached probe): all it holds is new
    assert counter_delta(1000, 30) == 30


def test_rate_is_delta_over_elapsed_time():
    assert rate(snap(10.0, p1=100), snap(12.0, p1=400), 1) == 150.0
    assert rate(snap(10.0, p1=100), snap(10.5, p1=150), 1) == 100.0


def test_rate_after_counter_reset_counts_from_zero():
    assert rate(snap(10.0, p1=5000), snap(11.0, p1=40), 1) == 40.0


def test_rate_unknown_without_history():
    assert rate(None, snap(1.0, p1=5), 1) is None
    assert rate(snap(1.0), snap(2.0, p1=5), 1) is None  # probe new since the last read
    assert rate(snap(2.0, p1=1), snap(2.0, p1=5), 1) is None  # no time passed
    assert rate(snap(3.0, p1=1), snap(2.0, p1=5), 1) is None  # clock went backwards


def test_rate_of_another_counter():
    before = StatsSnapshot(0.0, {1: ProbeStats(1, hits=10, lost=2)})
    after = StatsSnapshot(2.0, {1: ProbeStats(1, hits=30, lost=12)})
    assert rate(before, after, 1, "lost") == 5.0
    assert lost_growing(before, after, 1)
    assert not lost_growing(after, after, 1)


def test_rates_for_every_known_probe():
    assert rates(snap(0.0, p1=0, p2=10), snap(4.0, p1=8, p2=10, p3=99)) == {1: 2.0, 2: 0.0}


def test_totals_and_drop_percent():
    s = StatsSnapshot(1.0, {1: ProbeStats(1, hits=10, lost=1, emitted=9), 2: ProbeStats(2, hits=5, lost=3, emitted=2)})
    t = totals(s)
    assert (t.hits, t.lost, t.emitted) == (15, 4, 11)
    assert drop_percent(4, 11) == pytest.approx(100 * 4 / 15)
    assert drop_percent(0, 0) == 0.0


def test_error_count_sums_errnos():
    assert error_count(ProbeStats(1, errnos=((9, 4), (14, 1)))) == 5
    assert error_count(ProbeStats(1)) == 0


# ---------------------------------------------------------------- percentiles


def test_percentile_of_one_slot_interpolates_inside_it():
    h = hist(s11=100)  # all in 1024..2047
    assert percentile(h, 50) == pytest.approx(1024 + 1024 * 0.5)
    assert percentile(h, 100) == pytest.approx(2048)
    assert 1024 <= percentile(h, 1) < 1100


def test_percentile_picks_the_slot_holding_the_rank():
    h = hist(s9=50, s13=49, s21=1)  # 256ns.., 4us.., 1ms..
    assert percentile(h, 50) == 512  # the 50th of 100 is the last of slot 9
    assert 4096 < percentile(h, 98) < 8192
    assert percentile(h, 99) == 8192
    assert 1 << 20 <= percentile(h, 99.5) < 1 << 21
    assert percentile(h, 51) > percentile(h, 50)


def test_percentile_at_a_slot_edge_is_exact():
    h = hist(s4=10, s6=10)
    assert percentile(h, 50) == 16  # the top of slot 4: 8..15
    assert percentile(h, 100) == 64


def test_percentile_reads_the_bounds_of_every_slot():
    """One value per slot, at its low edge: the p100 of a histogram holding
    only slot k is the value just past that slot, 2^k (1 for slot 0)."""
    for k in range(HIST_SLOTS):
        assert percentile(hist(**{f"s{k}": 3}), 100) == (1 << k), k
        assert percentile(hist(**{f"s{k}": 3}), 1e-9) == pytest.approx(0 if k == 0 else 1 << (k - 1), rel=1e-6, abs=1e-3), k


def test_percentile_of_the_returns_a_histogram_counts():
    """Latencies binned by slot_of, then read back: each percentile lies in
    the slot of the true one (within a factor of two, never an octave off)."""
    from ktui.record.histogram import slot_bounds, slot_of

    latencies = [300, 310, 900, 1500, 1600, 1700, 5000, 70000, 70001, 1 << 40]
    h = [0] * HIST_SLOTS
    for ns in latencies:
        h[slot_of(ns)] += 1
    for q, true in ((50, 1600), (10, 300), (90, 70001), (100, 1 << 40)):
        low, high = slot_bounds(slot_of(true))
        assert low <= percentile(h, q) <= high + 1, (q, true)


def test_percentile_of_empty_histogram_is_none():
    assert percentile(hist(), 50) is None
    assert percentile((), 99) is None


def test_percentile_rejects_nonsense():
    with pytest.raises(ValueError):
        percentile(hist(s1=1), 0)
    with pytest.raises(ValueError):
        percentile(hist(s1=1), 101)


# ---------------------------------------------------------------- funclatency text


def test_hist_lines_like_funclatency():
    lines = hist_lines(hist(s9=1, s10=4, s11=8, s13=2), bar_width=8)
    assert lines == [
        "       nsecs : count distribution",
        " 256 -> 511  : 1     |*       |",
        " 512 -> 1023 : 4     |****    |",
        "1024 -> 2047 : 8     |********|",
        "2048 -> 4095 : 0     |        |",
        "4096 -> 8191 : 2     |**      |",
    ]


def test_hist_lines_align_wide_counts():
    lines = hist_lines(hist(s0=1_000_000, s1=3, s2=1), bar_width=4)
    assert lines[0] == " nsecs : count   distribution"  # " : " lines up
    assert lines[1] == "0 -> 0 : 1000000 |****|"
    assert lines[2] == "1 -> 1 : 3       |    |"
    assert lines[3] == "2 -> 3 : 1       |    |"
    assert len({len(line) for line in lines[1:]}) == 1


def test_hist_lines_up_to_the_last_slot():
    lines = hist_lines(hist(s64=1), bar_width=1)
    assert lines[-1].split(" : ")[0].split() == [str(1 << 63), "->", str((1 << 64) - 1)]


def test_hist_lines_empty():
    assert hist_lines(hist()) == []


# ---------------------------------------------------------------- history


def test_rate_history_is_bounded_per_probe():
    h = RateHistory(maxlen=3)
    for v in range(5):
        h.push(1, float(v))
    h.push_all({2: 7.0})
    assert h.series(1) == [2.0, 3.0, 4.0]
    assert h.series(2) == [7.0]
    assert h.series(99) == []


def test_rate_history_forgets_removed_probes():
    h = RateHistory()
    h.push_all({1: 1.0, 2: 2.0, 3: 3.0})
    h.retain([2])
    assert 1 not in h and 3 not in h and h.series(2) == [2.0]
