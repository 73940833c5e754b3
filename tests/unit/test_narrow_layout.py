"""Issue 15: at 80 columns the probe table cut off p50/p99 at its edge and
the event pane showed only timestamps and comms, never a value. Columns now
give way by priority: these tests pin the order."""

from __future__ import annotations

from ktui.widgets.event_line import MIN_DETAILS, LineLayout, choose_layout, cut_time, fit
from ktui.widgets.probe_table import COLUMNS as ALL_COLUMNS
from ktui.widgets.probe_table import TIMED_ONLY, fit_columns

# the cost columns show only while timed (tests/unit/test_cost.py)
COLUMNS = tuple(c for c in ALL_COLUMNS if c[0] not in TIMED_ONLY)

ALWAYS = {"on", "name", "state", "hits", "rate"}  # the selected probe's numbers


def keys(available, name_width=18):
    return [key for key, _, _ in fit_columns(name_width, available)]


def widths(available, name_width=18):
    return {key: width for key, _, width in fit_columns(name_width, available)}


def test_wide_tables_show_every_column_at_full_width():
    assert keys(200) == [key for key, _, _ in COLUMNS]
    assert widths(200)["state"] == 22 and widths(200)["name"] == 18


def test_errors_then_p99_then_p50_then_lost_go():
    for name_width in (12, 18, 40):
        gone = []  # columns in the order they leave as the table narrows
        for available in range(200, 20, -1):
            gone += [key for key in [k for k, _, _ in COLUMNS] if key not in keys(available, name_width) and key not in gone]
        assert gone[:4] == ["errors", "p99", "p50", "lost"], name_width


def test_long_names_are_cut_before_a_column_goes():
    everything = widths(200, name_width=40)
    assert everything["name"] == 40
    at_120 = widths(116, name_width=40)  # a 120-column table less border and scrollbar
    # cut (to 28, plus what the coarse steps left over), the columns kept
    assert 28 <= at_120["name"] < 40 and {"p50", "p99", "errors"} <= set(at_120)


def test_at_80_columns_name_state_hits_rate_and_lost_show():
    shown = keys(76)  # an 80-column table less its border and a scrollbar
    assert ALWAYS <= set(shown) and "lost" in shown
    assert not {"p50", "p99", "errors"} & set(shown)
    assert sum(w + 2 for w in widths(76).values()) <= 76


def test_name_state_hits_and_rate_never_go():
    for available in range(20, 200, 7):
        assert ALWAYS <= set(keys(available, name_width=40)), available


def test_columns_fit_whenever_they_can():
    for available in range(60, 200):
        assert sum(w + 2 for w in widths(available, 30).values()) <= available, available


def test_event_lines_keep_everything_when_the_pane_is_wide():
    assert choose_layout(10, 20, 16, 200) == LineLayout(True, 0, 20, 16)


def test_event_lines_drop_cpu_then_timestamp_precision_first():
    full = LineLayout(True, 0, 20, 16).prefix_width(10)
    assert choose_layout(10, 20, 16, full + MIN_DETAILS) == LineLayout(True, 0, 20, 16)
    assert choose_layout(10, 20, 16, full + MIN_DETAILS - 1) == LineLayout(False, 0, 20, 16)
    assert choose_layout(10, 20, 16, full + MIN_DETAILS - 5) == LineLayout(False, 3, 20, 16)
    narrowest = choose_layout(10, 20, 24, 40)
    assert narrowest == LineLayout(False, 3, 14, 16)


def test_short_values_keep_the_columns():
    """Lines whose values are short leave room: nothing needs to give way."""
    full = LineLayout(True, 0, 20, 16).prefix_width(10)
    assert choose_layout(10, 20, 16, full + 6, details_width=6).cpu


def test_cut_time_and_fit():
    assert cut_time("4242.000123", 3) == "4242.000"
    assert cut_time("4242.000123", 0) == "4242.000123"
    assert fit("systemd-journal[1234]", 14) == "systemd-journ…"
    assert fit("cat[1]", 8) == "cat[1]  "


def test_room_left_after_narrowing_goes_back_to_the_name():
    """The narrowing steps are coarse (name 28 -> 20): the audit of issue 15
    saw `vfs_read:r:retval:s…` at 80 columns with 4 cells left empty at the
    table's right edge. What is left goes back to a cut name."""
    for available in range(60, 200):
        got = widths(available, name_width=21)
        used = sum(w + 2 for w in got.values())
        assert used <= available, available
        # one cell stays free (a DataTable filled exactly shows a scrollbar)
        assert got["name"] == 21 or used == available - 1, (available, got)
    assert widths(76, name_width=21)["name"] == 21  # 80 columns: vfs_read:r:retval:s64 whole


def test_the_state_column_is_as_wide_as_its_states():
    """`attached` is 8 cells; a 22-cell state column took the cells a cut
    name needed (`do_sys_openat2:c:fname=+0(a…` at 120 columns)."""
    got = {k: w for k, _, w in fit_columns(37, 116, state_width=8)}
    assert got["state"] == 8 and got["name"] == 37
    assert {"p50", "p99", "errors"} <= set(got)
    # 22 at most while the table is short of room; a wide one shows it whole
    assert {k: w for k, _, w in fit_columns(37, 116, state_width=30)}["state"] <= 22
    assert {k: w for k, _, w in fit_columns(18, 200, state_width=30)}["state"] == 30
    assert {k: w for k, _, w in fit_columns(18, 200, state_width=2)}["state"] == 5  # the header's width


def test_a_wide_table_shows_long_names_and_reasons_whole():
    """At 200 columns the audit saw `kmem_cache_alloc:r:ret=retval:x64,calle…`
    and `failed: no such symbo…` beside 70 empty cells: names were capped at
    40 cells and states at 22 whatever the room. The caps hold only while
    the table is short of room."""
    got = {k: w for k, _, w in fit_columns(52, 196, state_width=40)}
    assert got["name"] == 52 and got["state"] == 40 and "errors" in got
    tight = {k: w for k, _, w in fit_columns(52, 116, state_width=40)}
    assert tight["name"] <= 40 and tight["state"] <= 22
