"""ktui.record.histogram: the one log2 slot convention, its bounds, the C
helper the BPF programs use to pick a slot, and old histograms brought to
the current length."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ktui.kernel.codegen import generate
from ktui.kernel.codegen.runtime import log2_slot_helper
from ktui.lang.spec import parse_spec
from ktui.record.histogram import HIST_SLOTS, fit, slot_bounds, slot_of

U64_MAX = (1 << 64) - 1


def test_bounds_of_every_slot():
    assert slot_bounds(0) == (0, 0)
    assert slot_bounds(1) == (1, 1)
    assert slot_bounds(2) == (2, 3)
    assert slot_bounds(11) == (1024, 2047)
    assert slot_bounds(64) == (1 << 63, U64_MAX)
    for k in range(1, HIST_SLOTS):
        assert slot_bounds(k) == (2 ** (k - 1), 2**k - 1)


def test_the_slots_tile_every_u64_without_gaps_or_overlap():
    assert slot_bounds(0)[0] == 0
    for k in range(1, HIST_SLOTS):
        assert slot_bounds(k)[0] == slot_bounds(k - 1)[1] + 1
    assert slot_bounds(HIST_SLOTS - 1)[1] == U64_MAX


def test_no_slot_past_the_last():
    with pytest.raises(ValueError):
        slot_bounds(HIST_SLOTS)
    with pytest.raises(ValueError):
        slot_bounds(-1)


def test_slot_of_edges():
    for k in range(HIST_SLOTS):
        low, high = slot_bounds(k)
        assert slot_of(low) == k
        assert slot_of(high) == k
    with pytest.raises(ValueError):
        slot_of(1 << 64)
    with pytest.raises(ValueError):
        slot_of(-1)


@given(st.integers(min_value=0, max_value=U64_MAX))
def test_slot_of_is_the_slot_whose_bounds_hold_the_value(v):
    low, high = slot_bounds(slot_of(v))
    assert low <= v <= high


def test_fit_pads_old_64_slot_histograms():
    old = tuple(range(64))  # a recording of format 1: 64 slots, bpf_log2l
    assert fit(old) == old + (0,)
    assert len(fit(old)) == HIST_SLOTS


def test_fit_keeps_the_total_when_trimming():
    assert fit((1,) * 70) == (1,) * 64 + (6,)
    assert fit(()) == ()
    assert fit((0,) * HIST_SLOTS) == (0,) * HIST_SLOTS


# ---------------------------------------------------------------- the C helper

EDGES = sorted({0, 1, 2, 3, 4, 7, 8, 1000, U64_MAX, U64_MAX - 1}
               | {(1 << k) + d for k in range(64) for d in (-1, 0, 1) if 0 <= (1 << k) + d <= U64_MAX})

HARNESS = """
#include <stdio.h>
#include <stdlib.h>
typedef unsigned long long u64;
typedef unsigned int u32;
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
%s
int main(void)
{
    char line[64];
    while (fgets(line, sizeof(line), stdin))
        printf("%%u\\n", ktui_log2_slot(strtoull(line, NULL, 10)));
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on this host")
def test_the_generated_c_helper_agrees_with_slot_of(tmp_path):
    """The helper the BPF programs run, compiled for the host and fed every
    power of two and its neighbours."""
    helper = "\n".join(log2_slot_helper())
    program = generate([parse_spec("vfs_read:r")]).text
    assert helper in program  # the program runs this very helper
    src = tmp_path / "log2.c"
    src.write_text(HARNESS % helper)
    exe = tmp_path / "log2"
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", "-o", str(exe), str(src)], check=True)
    out = subprocess.run([str(exe)], input="".join(f"{v}\n" for v in EDGES),
                         capture_output=True, text=True, check=True).stdout.split()
    assert [int(x) for x in out] == [slot_of(v) for v in EDGES]
