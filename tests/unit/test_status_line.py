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
