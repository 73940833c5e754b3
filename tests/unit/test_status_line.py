"""The top line says what the dashboard is looking at: this machine's
kernel and what it can do, or, in a replay, the recording and the kernel it
was made on (issue 15: this machine's `kprobes ✗ BTF ✗ root ✗` read like an
error and said nothing about the recording)."""

from __future__ import annotations

from ktui.record.feed import SystemInfo
from ktui.widgets.status_line import Totals, status_text


def test_live_shows_this_machine():
    text = status_text(SystemInfo("6.1.0-57-amd64", True, True, False, "ringbuf"), Totals(), False).plain
    assert "kernel 6.1.0-57-amd64" in text and "kprobes ✓" in text and "root ✗" in text


def test_replay_shows_the_recording_not_this_machine():
    info = SystemInfo("6.1.0-57-amd64", buffer="replay", source="run.ktrec of 2026-11-30 12:00")
    text = status_text(info, Totals(), False).plain
    assert "replay run.ktrec of 2026-11-30 12:00, recorded on kernel 6.1.0-57-amd64" in text
    assert "✗" not in text and "kprobes" not in text


# Issue 15: at 80 columns the header wrapped onto two lines. It now shortens
# by priority and stays one line at any width.
LIVE = SystemInfo("6.1.0-57-amd64", True, True, False, "ringbuf")
REPLAY = SystemInfo("6.1.0-57-amd64", buffer="replay", source="run.ktrec of 2026-11-30 12:00")
BUSY = Totals(events=371_400, lost=12_345, drop_percent=3.25)


def _line(info, totals, paused, width):
    text = status_text(info, totals, paused, width).plain
    assert "\n" not in text  # one line when there is nothing to warn about
    assert len(text) <= width
    return text


def test_wide_enough_shows_everything():
    text = _line(LIVE, BUSY, False, 200)
    assert text == status_text(LIVE, BUSY, False).plain
    assert "kprobes ✓" in text and "ringbuf" in text and "(3.25%)" in text and "following" in text


def test_at_80_the_flag_words_and_percentage_go_first():
    text = _line(LIVE, BUSY, False, 80)
    assert "kprobes" not in text and "BTF" not in text  # the words of flags that are fine
    assert "root✗" in text  # what is missing still shows
    assert "(3.25%)" not in text and "ringbuf" not in text
    assert "kernel 6.1.0-57-amd64" in text and "events 371.4k" in text and "lost 12345" in text


def test_paused_stays_readable_when_following_shrinks():
    assert "⏸ PAUSED" in _line(LIVE, BUSY, True, 60)
    following = _line(LIVE, BUSY, False, 60)
    assert following.endswith("▶") and "following" not in following


def test_replay_at_80_keeps_the_kernel_and_the_counts():
    text = _line(REPLAY, BUSY, False, 80)
    # the file name (the user typed it) goes before the kernel it was made on
    assert "replay kernel 6.1.0-57-amd64" in text and "lost 12345" in text
    at_120 = _line(REPLAY, BUSY, False, 120)
    assert "kernel 6.1.0-57-amd64" in at_120 and "recorded on" not in at_120


def test_too_narrow_for_any_form_is_cut_with_an_ellipsis():
    assert _line(REPLAY, BUSY, False, 40).endswith("…")


def test_warnings_take_extra_lines_only_when_there_are_some():
    noted = SystemInfo("6.1.0-57-amd64", True, False, True, "ringbuf", notes=("no BTF: " + "x" * 100,))
    lines = status_text(noted, Totals(losing=("vfs_read",)), False, 80).plain.split("\n")
    assert len(lines) == 3 and all(len(line) <= 80 for line in lines)
    assert lines[1].startswith(" ⚠ no BTF") and lines[1].endswith("…")
    assert "losing events: vfs_read" in lines[2]


def test_a_drill_down_takes_its_own_line_before_the_warnings():
    noted = SystemInfo("6.1.0-57-amd64", True, False, True, "ringbuf", notes=("no BTF",))
    drill = "drill-down: vfs_read comm=" + "b" * 80 + " (Esc clears)"
    lines = status_text(noted, Totals(), False, 80, drill=drill).plain.split("\n")
    assert len(lines) == 3 and all(len(line) <= 80 for line in lines)
    assert lines[1].startswith(" drill-down: vfs_read comm=bbb") and lines[1].endswith("…")
    assert lines[2].startswith(" ⚠ no BTF")
    assert len(status_text(noted, Totals(), False, 80).plain.split("\n")) == 2


def test_a_narrow_replay_says_where_when_and_paused_before_the_file_name():
    """The audit of issue 15 at 80 columns: `replay audit0.ktrec, kernel
    6.1.0-57-amd64 │ ev 0 lost 0 │ ⏸ 0.0s ×1`: the host and start time gone
    (the file name, which the user typed, kept) and PAUSED reduced to a mark.
    Where and when the recording was made go last; the file name first."""
    from ktui.widgets.status_line import Replaying

    info = SystemInfo("6.1.0-57-amd64", buffer="replay", source="audit0.ktrec")
    at = Replaying(host="virtme-ng", started="2026-12-01 23:06:33", position=12.3, speed=2.0, paused=True)

    def line(width):
        text = status_text(info, Totals(events=2_113, lost=0), False, width, replay=at).plain
        assert "\n" not in text and len(text) <= width
        return text

    assert "audit0.ktrec" in line(200) and "2026-12-01 23:06:33" in line(200)
    for width in (80, 100):
        text = line(width)
        assert "virtme-ng" in text and "6.1.0-57-amd64" in text, text
        assert "PAUSED" in text and "12.3s" in text and "×2" in text, text
    assert "12-01 23:06" in line(100)
    # at 60 the kernel, and the playback as marks: ⏸ 12.3s ×2
    assert "6.1.0-57-amd64" in line(60) and "⏸ 12.3s ×2" in line(60), line(60)


def test_at_the_end_the_speed_is_not_said():
    """A speed means nothing once every event is shown; at 60 columns the
    audit saw `END 2.0s ×…`, cut for it."""
    from ktui.widgets.status_line import Replaying

    info = SystemInfo("6.18.44-fc-v973", buffer="replay", source="format1.ktrec")
    ended = Replaying(started="2026-12-01 10:50:33", position=2.0, speed=0.2, ended=True)
    for width in (60, 80, 200):
        text = status_text(info, Totals(events=21), False, width, replay=ended).plain
        assert text.endswith("END 2.0s") and "×" not in text, text
