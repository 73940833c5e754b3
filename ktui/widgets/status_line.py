"""The top line: what this machine can do, totals, and what needs attention."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from ktui.pipeline.format import format_count
from ktui.record.feed import SystemInfo


@dataclass(frozen=True)
class Totals:
    events: int = 0  # emitted by the kernel, summed over probes
    lost: int = 0
    drop_percent: float = 0.0
    losing: tuple[str, ...] = ()  # names of probes whose lost count grows


def _flag(text: Text, name: str, ok: bool) -> None:
    text.append(f"{name} ")
    text.append("✓" if ok else "✗", "green" if ok else "red bold")
    text.append("  ")


def status_text(info: SystemInfo, totals: Totals, paused: bool) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(" ktui ", "reverse bold")
    text.append("  ")
    if info.buffer == "replay":
        # This machine's kprobes/BTF/root say nothing about a recording.
        text.append("replay ", "bold")
        text.append(f"{info.source or 'a recording'}, recorded on kernel {info.kernel or '?'}  ")
    else:
        text.append(f"kernel {info.kernel or '?'}  ")
        _flag(text, "kprobes", info.kprobes)
        _flag(text, "BTF", info.btf)
        _flag(text, "root", info.root)
        text.append(f"{info.buffer or '?'}  ", "bold")
    text.append("│ ", "dim")
    text.append(f"events {format_count(totals.events)}  lost ")
    text.append(format_count(totals.lost), "yellow bold" if totals.lost else "")
    text.append(f" ({totals.drop_percent:.2f}%)  ", "yellow" if totals.drop_percent else "")
    text.append("│ ", "dim")
    text.append("⏸ PAUSED" if paused else "▶ following", "black on yellow" if paused else "green")
    warnings = list(info.notes)
    if totals.losing:
        names = ", ".join(totals.losing)
        warnings.append(
            f"losing events: {names} (try stats-only: no fetches, or a filter, sample or rate limit)"
        )
    for note in warnings:
        text.append(f"\n ⚠ {note}", "yellow")
    return text


class StatusLine(Static):
    DEFAULT_CSS = """
    StatusLine {
        height: auto;
        max-height: 4;
        background: $panel;
        color: $foreground;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: Text | None = None

    def show(self, info: SystemInfo, totals: Totals, paused: bool) -> None:
        text = status_text(info, totals, paused)
        if text != self._shown:  # no refresh when nothing changed
            self._shown = text
            self.update(text)
