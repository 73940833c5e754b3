"""Log2 histograms: which slot a value goes in, and what each slot holds.

One convention for every log2 histogram ktui keeps (return-probe latencies
today) and for everything that reads one: percentiles and the funclatency
text (`pipeline.rates`), NDJSON, recordings, and any exporter that needs
bucket bounds. Slot k counts the values with k significant bits:

    slot 0        0
    slot k >= 1   2^(k-1) .. 2^k - 1      (both ends included)

So the slot of v is `v.bit_length()`, and 65 slots hold every u64 exactly:
nothing is clamped, nothing spills into a neighbour. The BPF programs
compute the same number with the C helper codegen emits
(`kernel.codegen.runtime.log2_slot_helper`), checked against `slot_of`.

This is also how bcc's `bpf_log2l` and `print_log2_hist` read a slot, which
the programs of recording format 1 used: there, 64 slots, and 0 ns counted
in slot 1 with 1 ns. `fit()` brings such a histogram to the new length.
"""

from __future__ import annotations

from typing import Sequence

HIST_SLOTS = 65  # slots 0..64: every u64 has 0..64 significant bits


def slot_of(value: int) -> int:
    """The slot counting `value` (0 <= value < 2^64)."""
    if not 0 <= value < 1 << 64:
        raise ValueError(f"{value} is not a u64")
    return value.bit_length()


def slot_bounds(k: int) -> tuple[int, int]:
    """The smallest and the largest value slot k counts (both included)."""
    if not 0 <= k < HIST_SLOTS:
        raise ValueError(f"no histogram slot {k}")
    if k == 0:
        return 0, 0
    return 1 << (k - 1), (1 << k) - 1


def fit(hist: Sequence[int]) -> tuple[int, ...]:
    """`hist` with HIST_SLOTS slots: zeros padded on, or the counts past
    the last slot added into it (so the total never changes). An empty
    histogram (a call probe's) stays empty."""
    if not hist:
        return ()
    counts = [int(c) for c in hist]
    if len(counts) > HIST_SLOTS:
        counts[HIST_SLOTS - 1] += sum(counts[HIST_SLOTS:])
        del counts[HIST_SLOTS:]
    return tuple(counts + [0] * (HIST_SLOTS - len(counts)))
