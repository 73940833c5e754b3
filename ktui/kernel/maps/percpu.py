"""Reading one key of a per-CPU BPF map (through bcc's table), summed over CPUs.

Shared by the counters (statmaps.py) and the aggregations (aggmaps.py).
"""

from __future__ import annotations

import ctypes

from ktui.record.histogram import HIST_SLOTS


def percpu_sum(table, key: int) -> int:
    """Every CPU's counter under `key`, added up (0 where the key is absent)."""
    try:
        return int(sum(table[ctypes.c_int(key)]))
    except KeyError:
        return 0


def percpu_hist(table, key: int) -> tuple[int, ...]:
    """One lookup: every CPU's log2 histogram under `key`, summed slot by slot."""
    import numpy as np  # not at import: the session loads it once probes run

    try:
        per_cpu = table[ctypes.c_int(key)]
    except KeyError:
        return (0,) * HIST_SLOTS
    counts = np.frombuffer(bytes(per_cpu), dtype=np.uint64).reshape(-1, HIST_SLOTS)
    return tuple(int(n) for n in counts.sum(axis=0, dtype=np.uint64))


def percpu_values(table, key: int) -> list[int]:
    """Every CPU's counter under `key`, CPU by CPU (all 0 where absent)."""
    try:
        return [int(n) for n in table[ctypes.c_int(key)]]
    except KeyError:
        return [0]
