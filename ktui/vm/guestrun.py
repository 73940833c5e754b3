"""What comes back from one `ktui vm` run: ktui's exit status, what it
printed, its log.

ktui in the guest printed its errors on the guest console, where the
dashboard's exit cleared them or the console's own noise buried them, and
`ktui vm` returned vng's status (0) whatever ktui's was. Now each run has
its files in the run folder, which the guest may write: the guest script,
ktui's exit status, its stdout and stderr (or, for the dashboard, what was
left on its terminal once the full screen ended), its log, and the console.
The host copies stdout as it grows, prints the rest once the VM is down,
keeps the guest's log beside its own, and removes every file of the run on
every way out (signals.py turns SIGTERM and SIGHUP into an exception so the
clean-up runs then too).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from ktui.exits import EXIT_ENVIRONMENT

CONSOLE_TAIL_LINES = 40
GUEST_LOG_NAME = "ktui-vm.log"  # beside the host's ktui.log
PUMP_CHUNK = 1 << 20


@dataclass(frozen=True)
class GuestFiles:
    """One run's files in the shared run folder, named by the host's pid."""

    script: Path
    status: Path
    stdout: Path
    stderr: Path
    log: Path
    stop: Path
    console: Path
    size: Path  # the host terminal's size, for the dashboard (resize.py)

    @classmethod
    def in_dir(cls, rundir: Path, tag: str | int | None = None) -> GuestFiles:
        stem = rundir / f"ktui-vm-{tag if tag is not None else os.getpid()}"
        return cls(*(stem.with_suffix(ext) for ext in (".sh", ".status", ".out", ".err", ".log", ".stop",
                                                      ".console", ".size")))

    def all(self) -> tuple[Path, ...]:
        return (self.script, self.status, self.stdout, self.stderr, self.log, self.stop, self.console,
                self.size, self.size.with_suffix(".size.tmp"))

    def remove(self) -> None:
        for f in self.all():
            f.unlink(missing_ok=True)


def exit_status(files: GuestFiles) -> int | None:
    """ktui's exit status in the guest; None when it never wrote one (the
    VM went down first, or the file is not a number)."""
    try:
        text = files.status.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


class OutputPump:
    """Copies what the guest appends to a file onto a host stream, as it
    grows (stream's NDJSON arrives while the VM runs, byte for byte)."""

    def __init__(self, path: Path, out: BinaryIO) -> None:
        self.path = path
        self.out = out
        self.offset = 0

    def pump(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                while chunk := f.read(PUMP_CHUNK):
                    self.out.write(chunk)
                    self.offset += len(chunk)
        except FileNotFoundError:
            return
        self.out.flush()


def keep_guest_log(files: GuestFiles, host_log_dir: Path) -> Path | None:
    """Append the guest's log to GUEST_LOG_NAME beside the host's log (the
    guest's own home is a throwaway overlay); the file, or None if the guest
    logged nothing."""
    try:
        data = files.log.read_bytes()
    except OSError:
        return None
    if not data:
        return None
    host_log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    kept = host_log_dir / GUEST_LOG_NAME
    fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "ab") as out:
        out.write(data if data.endswith(b"\n") else data + b"\n")
    return kept


def terminal_text(path: Path) -> str:
    """What the dashboard left on its terminal (a captured tmux pane): its
    lines without the blank rows below them."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    lines = [ln.rstrip() for ln in lines]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return "\n".join(lines)


def print_output(files: GuestFiles, pump: OutputPump, stderr: TextIO, *, terminal: bool = False) -> None:
    """The rest of ktui's stdout (through PUMP, which copied what came
    while the VM ran), then its stderr; with `terminal`, the stderr file
    is what the dashboard left on its terminal."""
    pump.pump()
    if terminal:
        text = terminal_text(files.stderr)
        if text:
            print(text, file=stderr)
    else:
        try:
            stderr.write(files.stderr.read_text(errors="replace"))
        except FileNotFoundError:
            pass
    stderr.flush()


def final_status(files: GuestFiles, vng_status: int, stderr: TextIO) -> int:
    """ktui's exit status in the guest, as ours. None written (the VM ended
    before ktui did): the console's tail and EXIT_ENVIRONMENT, as `python -m
    ktui.vm` says it."""
    status = exit_status(files)
    if status is not None:
        return status
    print(f"ktui vm: the VM ended before ktui did (vng exit {vng_status})", file=stderr)
    try:
        lines = files.console.read_text(errors="replace").splitlines()
    except OSError:
        lines = []  # the dashboard's console was the terminal itself
    if lines:
        print("ktui vm: the console's last lines:", file=stderr)
        print("\n".join(lines[-CONSOLE_TAIL_LINES:]), file=stderr)
    return EXIT_ENVIRONMENT
