"""Issue 28's per-probe counters and honesty marks as the dashboard says
them, without a kernel (pipeline.accounting, the counters view, the probe
table): what was not counted beside lost, the block under the hits, errnos
"other" and errnos not checked with the reason, top comms exact or an
estimate. NDJSON, stderr, recordings: test_uncounted; Prometheus: test_export."""

from __future__ import annotations

import pytest

from ktui.kernel.codegen import runtime
from ktui.lang.spec import parse_spec
from ktui.pipeline import accounting
from ktui.pipeline.accounting import comms_heading, errno_unchecked, loss_lines, uncounted
from ktui.pipeline.rates import error_count
from ktui.pipeline.value_views import counter_lines
from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus
from ktui.widgets.probe_sort import SORT_KEYS
from ktui.widgets.probe_table import ProbeLine, fit_columns, lost_text, row_cells

RET = parse_spec("vfs_read:r:retval")
CALL = parse_spec("vfs_read:c:a3")
SHAKY = ProbeStats(1, hits=1000, emitted=1000, lost=2, missed_returns=4, maxactive=64, recursion_misses=1,
                   unpaired=12, entries_unstored=5, nest_dropped=3, errnos=((9, 20), (14, 7)), errnos_other=6,
                   errno_check="long", top_comms=(("dd", 900), ("cat", 100)), top_comms_exact=False)


def texts(lines) -> list[str]:
    return [line[0] for line in lines]


def test_the_sampling_said_on_screen_is_the_kernels():
    """pipeline may not import kernel: the numbers the pane says must be
    the ones the programs are built with."""
    assert (accounting.COMM_EXACT, accounting.COMM_EVERY) == (runtime.COMM_EXACT, runtime.COMM_EVERY)
    assert accounting.COMMS_SAMPLED == "sampled 1 in 64 past 1024 hits per CPU"


def test_uncounted_is_beside_lost_without_counting_an_entry_twice():
    # entries not stored come back as unpaired returns: left out of the sum
    assert uncounted(SHAKY) == 4 + 12 + 1 + 3
    assert error_count(SHAKY) == 20 + 7 + 6  # errnos outside the table are errors too


def test_a_return_probes_block_lists_every_counter_once_any_is_nonzero():
    lines = loss_lines(SHAKY, is_return=True)
    assert texts(lines) == [
        "not in hits or latency:",
        "  12 returns unpaired (no entry kept)",
        "   4 returns missed (maxactive 64): raise maxactive: in the probe set",
        "   5 entries not stored (map full/busy)",
        "   3 nested hits dropped (scratch busy)",
        "   1 runs missed (recursion)",
    ]
    only_unpaired = loss_lines(ProbeStats(1, unpaired=2), is_return=True)
    assert texts(only_unpaired)[1] == "  2 returns unpaired (no entry kept)"
    assert [style for _, style in only_unpaired[2:]] == ["dim"] * 3  # the zeros, dim
    # nothing happened: nothing said, but a kretprobe's counted zero misses
    assert loss_lines(ProbeStats(1), is_return=True) == []
    assert loss_lines(ProbeStats(1, maxactive=64), is_return=True) == [("0 returns missed (maxactive 64)", "dim")]


def test_a_call_probe_lists_only_what_applies_to_it():
    lines = texts(loss_lines(ProbeStats(1, nest_dropped=7), is_return=False))
    assert lines == ["not in hits:", "  7 nested hits dropped (scratch busy)", "  0 runs missed (recursion)"]
    assert loss_lines(ProbeStats(1, unpaired=9), is_return=False) == []  # (no returns to pair)


@pytest.mark.parametrize("check, said", [
    ("off: void", "errno not checked: void function"),
    ("off: unsigned", "errno not checked: unsigned return value"),
    ("off: not an integer", "errno not checked: returns no integer"),
    ("off: by the probe set", "errno not checked: off in the probe set"),
    ("off: no BTF", "errno not checked: no BTF"),
    ("off: something new", "errno not checked: something new"),
    ("int", None), ("long", None), ("pointer", None), ("guessed", None), ("", None),
])
def test_errno_not_checked_says_why(check, said):
    assert errno_unchecked(ProbeStats(1, errno_check=check)) == said


def test_counters_view_errnos_other_and_estimated_comms():
    lines = texts(counter_lines(RET, SHAKY, bar_width=10))
    assert "errors 33 (3.3% of returns)" in lines
    assert "  other                      6" in lines
    at = lines.index("top comms ≈ estimate")
    assert lines[at + 1] == "  sampled 1 in 64 past 1024 hits per CPU"
    exact = texts(counter_lines(CALL, ProbeStats(1, hits=5, top_comms=(("dd", 5),)), bar_width=10))
    assert exact[0] == "top comms (exact)" and not any("sampled" in line for line in exact)
    assert comms_heading(ProbeStats(1)) == ("top comms (exact)", None)


def test_counters_view_without_errno_checks_says_so_and_shows_no_error_count():
    void = ProbeStats(1, hits=50, hist=(0,) * 10 + (50,), errno_check="off: void")
    lines = texts(counter_lines(RET, void, bar_width=10))
    assert "errno not checked: void function" in lines
    assert not any(line.startswith("errors") for line in lines)
    guessed = texts(counter_lines(RET, ProbeStats(1, hits=50, errnos=((9, 1),), errno_check="guessed"), 10))
    assert "  errno guessed (no BTF): the return value read as an int" in guessed


def line_of(probe, stats, losing=False) -> list[str]:
    return [c.plain for c in row_cells(ProbeLine(ProbeStatus(1, probe, ProbeState.ATTACHED), stats, losing=losing))]


def test_probe_table_shows_unpaired_beside_lost_and_no_error_count_when_unchecked():
    cells = line_of(RET, SHAKY)
    assert "2+20" in cells and "33" in cells
    void = line_of(RET, ProbeStats(1, hits=5, errno_check="off: void"))
    assert void[-1] == "-"  # not "0": nothing was checked
    assert SORT_KEYS["errors"][0](ProbeLine(ProbeStatus(1, RET, ProbeState.ATTACHED),
                                            ProbeStats(1, errno_check="off: void"))) is None
    assert SORT_KEYS["lost"][0](ProbeLine(ProbeStatus(1, RET, ProbeState.ATTACHED), SHAKY)) == 22.0


def test_the_lost_column_grows_to_its_longest_cell_rather_than_cut_a_number():
    big = ProbeStats(1, lost=12_345_678, unpaired=123_456)
    assert lost_text(big, losing=True) == "⚠ 12.35M+123.5k"
    widths = {key: width for key, _, width in fit_columns(20, 300, lost_width=len(lost_text(big, True)))}
    assert widths["lost"] == 15
    assert {key: width for key, _, width in fit_columns(20, 300)}["lost"] == 8  # as before
