"""What both engines agree on about return probes: how deep and how many
entry stacks (codegen/entry_stack.c) they keep, each probe's errno table,
and how a return value is read as an errno (errno_mode).

The generic program (generic/abi.py, program.c) and the compiled programs
(codegen/runtime.py) both take these from here, so a probe counts the same
in either engine. A module of its own: generic/abi.py imports the compiled
path's runtime, so the compiled path cannot import abi back."""

from __future__ import annotations

from ktui.lang.errnos import GUESSED, probe_errno_mode
from ktui.lang.model import Probe

# Return probes: every thread inside a probed function has a stack of its
# entries (codegen/entry_stack.c), ENTRY_DEPTH deep, in one LRU hash of
# ENTRY_THREADS (probe, thread) stacks shared by a program's return probes.
ENTRY_DEPTH = 4
ENTRY_THREADS = 16384
# Each probe's errno counts: errno 1..199 -> bucket errno, 512..567 (the
# kernel's own: ERESTARTSYS...) -> 200 + errno - 512; others are counted apart.
ERRNO_BUCKETS = 256
ERRNO_LOW = 200
ERRNO_HIGH_BASE = 512
ERRNO_GUESS = 1  # errno_mode without BTF, asked for: int-sized when the upper half is zero


def errno_bucket(err: int) -> int | None:
    """An errno's place in its probe's table (the C's ktui_errno_bucket);
    None: it fits none, and is counted apart."""
    if 0 <= err < ERRNO_LOW:
        return err
    if ERRNO_HIGH_BASE <= err < ERRNO_HIGH_BASE + ERRNO_BUCKETS - ERRNO_LOW:
        return ERRNO_LOW + err - ERRNO_HIGH_BASE
    return None


def bucket_errno(bucket: int) -> int:
    """The errno a table bucket counts (errno_bucket's inverse)."""
    return bucket if bucket < ERRNO_LOW else ERRNO_HIGH_BASE + bucket - ERRNO_LOW


def errno_mode(probe: Probe) -> int:
    """How the program reads a return value as an errno: 0 not at all, 4 as
    a 32-bit int, 8 as a long or an ERR_PTR (lang.errnos decides, by BTF's
    return type or the probe set's `errno:`), ERRNO_GUESS for its guess
    without BTF (`errno: on`): an int-sized errno where the upper half is
    zero, else the whole word (a long's -EINVAL has both halves set)."""
    mode = probe_errno_mode(probe)
    return ERRNO_GUESS if mode.text == GUESSED else mode.mode


def errno_check(probe: Probe) -> str:
    """ProbeStats.errno_check: what the user reads of errno_mode."""
    return probe_errno_mode(probe).text
