"""The top line: what this machine can do, totals, and what needs attention.

It is one line at any width (issue 15: at 80 columns it wrapped onto two).
Each part has a few renderings, longest first; when the line is too wide
the least useful part is shortened first (the flags' words, the buffer, the
lost percentage, the kernel's name...), and only what still does not fit
is cut with an ellipsis. Warnings take extra lines only when there are any.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import Static

from ktui.pipeline.format import format_count
from ktui.record.feed import SystemInfo

Piece = tuple[str, str]  # (text, style)
Rendering = tuple[Piece, ...]


@dataclass(frozen=True)
class Totals:
    events: int = 0  # emitted by the kernel, summed over probes
    lost: int = 0
    drop_percent: float = 0.0
    losing: tuple[str, ...] = ()  # names of probes whose lost count grows


@dataclass(frozen=True)
class Replaying:
    """A replay's own facts for the line: where and when it was recorded,
    and where the playback is."""

    host: str = ""  # the recording machine ("" in recordings that did not keep it)
    started: str = ""  # local start time of the recording
    position: float = 0.0  # seconds of the recording played
    speed: float = 1.0  # 0: as fast as drained
    paused: bool = False
    ended: bool = False


def _speed(speed: float) -> str:
    return "max" if speed <= 0 else f"×{speed:g}"


def _flags(info: SystemInfo) -> list[Rendering]:
    """`kprobes ✓  BTF ✓  root ✗`, then only the missing ones, then nothing."""
    marks = (("kprobes", info.kprobes), ("BTF", info.btf), ("root", info.root))
    full: list[Piece] = []
    for name, ok in marks:
        full += [(f"{name} ", ""), ("✓" if ok else "✗", "green" if ok else "red bold"), ("  ", "")]
    missing: list[Piece] = []
    for name, ok in marks:
        if not ok:
            missing += [(f"{name}", ""), ("✗", "red bold"), (" ", "")]
    if missing:
        missing[-1] = ("  ", "")
    return [tuple(full), tuple(missing), ()]


def _parts(info: SystemInfo, totals: Totals, paused: bool,
           replay: Replaying | None = None) -> dict[str, list[Rendering]]:
    """Every part of the line, each as its renderings from longest to shortest."""
    parts: dict[str, list[Rendering]] = {"badge": [((" ktui ", "reverse bold"), ("  ", ""))]}
    if info.buffer == "replay":
        # This machine's kprobes/BTF/root say nothing about a recording.
        source, kernel = info.source or "a recording", info.kernel or "?"
        host = f"{replay.host}, " if replay is not None and replay.host else ""
        started = replay.started if replay is not None else ""
        when = f", {started}" if started else ""
        # `2026-12-01 23:06:33` -> `12-01 23:06` (other forms stay whole)
        short = f", {started[5:16]}" if len(started) == 19 and started[4] == "-" else when
        # The file name goes first: the user typed it. Where and when the
        # recording was made go last, the kernel after everything else.
        parts["replay"] = [
            (("replay ", "bold"), (f"{source}, recorded on {host}kernel {kernel}{when}  ", "")),
            (("replay ", "bold"), (f"{source}, {host}kernel {kernel}{when}  ", "")),
            (("replay ", "bold"), (f"{host}kernel {kernel}{when}  ", "")),
            (("replay ", "bold"), (f"{host}{kernel}{short}  ", "")),
            (("replay ", "bold"), (f"{host}{kernel}  ", "")),
            (("replay ", "bold"), (f"{kernel}  ", "")),
        ]
    else:
        kernel = info.kernel or "?"
        parts["kernel"] = [((f"kernel {kernel}  ", ""),), ((f"{kernel}  ", ""),), ()]
        parts["flags"] = _flags(info)
        parts["buffer"] = [((f"{info.buffer or '?'}  ", "bold"),), ()]
    lost_style = "yellow bold" if totals.lost else ""
    percent = ((f" ({totals.drop_percent:.2f}%)", "yellow" if totals.drop_percent else ""),)
    lost = ((" lost ", ""), (format_count(totals.lost), lost_style))
    parts["counts"] = [
        (("│ ", "dim"), (f"events {format_count(totals.events)} ", "")) + lost + percent + (("  ", ""),),
        (("│ ", "dim"), (f"events {format_count(totals.events)} ", "")) + lost + (("  ", ""),),
        (("│ ", "dim"), (f"ev {format_count(totals.events)}", "")) + lost + ((" ", ""),),
    ]
    mark = ("⏸ PAUSED", "black on yellow") if paused else ("▶ following", "green")
    short = ("⏸ PAUSED", "black on yellow") if paused else ("▶", "green")
    parts["mode"] = [(("│ ", "dim"), mark), (("│ ", "dim"), short)]
    if replay is not None:
        # where the playback is, at what speed; END once every event is shown
        at = f"{replay.position:.1f}s"
        if replay.ended:
            play = ("END", "black on cyan")
        elif replay.paused or paused:
            play = ("⏸ PAUSED", "black on yellow")
        else:
            play = ("▶ playing", "green")
        short_play = ("▶", "green") if play[0] == "▶ playing" else play  # PAUSED and END stay words
        where = f" {at}" if replay.ended else f" {at} {_speed(replay.speed)}"  # at the end no speed applies
        parts["mode"] = [
            (("│ ", "dim"), play, (where, "")),
            (("│ ", "dim"), short_play, (where, "")),
            (("│ ", "dim"), (play[0].split()[0], play[1]), (where, "")),
        ]
    return parts


# Which part gives up a rendering next when the line is too wide: the least
# useful first. The counts and the paused mark stay readable longest. (A
# live line has no "replay" part, a replay's no flags, buffer or kernel.)
SHORTEN_ORDER = ("flags", "buffer", "replay", "counts", "replay", "replay", "mode", "kernel", "flags", "counts",
                 "replay", "kernel", "replay", "replay", "mode")


def _width(parts: dict[str, list[Rendering]], levels: dict[str, int]) -> int:
    return sum(cell_len(text) for name, options in parts.items() for text, _ in options[levels[name]])


def shorten_levels(parts: dict[str, list[Rendering]], width: int) -> dict[str, int]:
    """How far to shorten each part so the line fits `width` cells (as far
    as the order allows; the caller cuts whatever still does not fit)."""
    levels = dict.fromkeys(parts, 0)
    for name in SHORTEN_ORDER:
        if _width(parts, levels) <= width:
            break
        if name in parts and levels[name] < len(parts[name]) - 1:
            levels[name] += 1
    return levels


def status_text(info: SystemInfo, totals: Totals, paused: bool, width: int | None = None,
                replay: Replaying | None = None, drill: str = "") -> Text:
    """The status line, shortened to `width` cells (None: everything), then
    a line for a drill-down (`drill-down: vfs_read comm=bash (Esc clears)`:
    the event pane shows only some events) and one line per warning."""
    parts = _parts(info, totals, paused, replay)
    levels = shorten_levels(parts, width) if width else dict.fromkeys(parts, 0)
    line = Text(no_wrap=True, overflow="ellipsis", end="")
    for name, options in parts.items():
        for piece, style in options[levels[name]]:
            line.append(piece, style)
    line.rstrip()
    if width:
        line.truncate(width, overflow="ellipsis")
    warnings = list(info.notes)
    if totals.losing:
        names = ", ".join(totals.losing)
        warnings.append(
            f"losing events: {names} (try stats-only: no fetches, or a filter, sample or rate limit)"
        )
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    text.append_text(line)
    if drill:
        shown = Text(f" {drill}", "bold cyan")
        if width:
            shown.truncate(width, overflow="ellipsis")
        text.append("\n")
        text.append_text(shown)
    for note in warnings:
        warning = Text(f" ⚠ {note}", "yellow")
        if width:
            warning.truncate(width, overflow="ellipsis")
        text.append("\n")
        text.append_text(warning)
    return text


class StatusLine(Static):
    DEFAULT_CSS = """
    StatusLine {
        height: auto;
        max-height: 4;
        background: $panel;
        color: $foreground;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: Text | None = None
        self._state: tuple[SystemInfo, Totals, bool] | None = None
        self._replay: Replaying | None = None
        self._drill = ""

    def show(self, info: SystemInfo, totals: Totals, paused: bool, replay: Replaying | None = None,
             drill: str = "") -> None:
        self._state = (info, totals, paused)
        self._replay = replay
        self._drill = drill
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        if self._state is None:
            return
        text = status_text(*self._state, width=self.size.width or None, replay=self._replay, drill=self._drill)
        if text != self._shown:  # no refresh when nothing changed
            self._shown = text
            self.update(text)
