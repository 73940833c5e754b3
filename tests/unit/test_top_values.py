"""The top values view (`count(comm) sum(retval)`: bytes per process) as a
new user reads it (issue #29): every row on one line at the pane's width,
columns named, and its percentage the share of what it is ranked by."""

from __future__ import annotations

import pytest

from ktui.lang.spec import parse_probe_text
from ktui.pipeline.value_views import TOP, view_lines
from ktui.record.feed import ProbeStats

BYTES = parse_probe_text("vfs_read:r count(comm) sum(retval)")
CALLS = parse_probe_text("vfs_read:c count(comm)")
TOP_BYTES = ((("cat",), 16, 1_048_576), (("sshd",), 16, 1600), (("bash",), 31, 217))


def texts(probe, stats, room):
    return [line[0] for line in view_lines(TOP, probe, stats, 20, room=room)]


@pytest.mark.parametrize("room", [46, 40, 76])
def test_every_row_fits_the_pane_with_its_sum_on_it(room):
    stats = ProbeStats(1, hits=63, top_values=TOP_BYTES, value_keys=3, value_sum=1_050_393)
    lines = texts(BYTES, stats, room)
    assert all(len(line) <= room for line in lines), [line for line in lines if len(line) > room]
    rows = {line.split()[0]: line for line in lines if line.split() and line.split()[0] in ("cat", "sshd", "bash")}
    assert rows["cat"].split()[1:3] == ["16", "1.05M"] and rows["bash"].split()[1:3] == ["31", "217"]
    header = next(line for line in lines if line.split()[:1] == ["comm"])
    assert header.split() == ["comm", "hits", "sum(retval)", "%"] or header.split() == ["comm", "hits", "sum", "%"]


def test_ranked_by_the_sum_the_percentage_is_the_share_of_the_sum():
    stats = ProbeStats(1, hits=63, top_values=TOP_BYTES, value_keys=3, value_sum=1_050_393)
    lines = texts(BYTES, stats, 60)
    rows = [line.split() for line in lines if line.split()[:1] in (["cat"], ["sshd"], ["bash"])]
    assert [r[-1] for r in rows] == ["99.8%", "0.2%", "0.0%"]  # not 25.4% of the calls
    assert any("ranked by sum(retval)" in line and "% of the sum" in line for line in lines)


def test_ranked_by_count_the_percentage_is_the_share_of_the_hits():
    stats = ProbeStats(1, hits=64, top_values=((("bash",), 48, 0), (("cat",), 16, 0)), value_keys=2)
    lines = texts(CALLS, stats, 46)
    rows = [line.split() for line in lines if line.split()[:1] in (["bash"], ["cat"])]
    assert rows == [["bash", "48", "75.0%"], ["cat", "16", "25.0%"]]
    assert any("ranked by hits" in line for line in lines)


def test_a_sum_whose_total_is_not_known_has_no_share_unless_every_key_is_shown():
    """A recording made before the total was kept: the shown keys are every
    key (value_keys), so their sums are the total; else no share."""
    every = ProbeStats(1, hits=63, top_values=TOP_BYTES, value_keys=3)
    assert [line.split()[-1] for line in texts(BYTES, every, 60) if line.startswith("  cat")] == ["99.8%"]
    some = ProbeStats(1, hits=70, top_values=TOP_BYTES, value_keys=5)
    assert [line.split()[-1] for line in texts(BYTES, some, 60) if line.startswith("  cat")] == ["-"]


def test_a_long_key_is_cut_to_its_column():
    probe = parse_probe_text("vfs_read:r count(comm, a3) sum(retval)")
    stats = ProbeStats(1, hits=5, top_values=((("systemd-journal", 1234567890), 5, 10),),
                       value_keys=1, value_sum=10)
    lines = texts(probe, stats, 40)
    assert all(len(line) <= 40 for line in lines)
    assert any(line.lstrip().startswith("systemd-journal, 1") and "…" in line for line in lines)
