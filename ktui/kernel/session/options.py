"""How a Session runs: its options, set by the command line and the dashboard."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class SessionOptions:
    buffer: str = "auto"  # "auto" (ring buffer where the kernel has it), "ringbuf", "perf"
    ringbuf_pages: int = 2048  # 8 MiB of 4 KiB pages; a power of two
    perf_pages: int = 256  # per CPU; a power of two
    log_path: Path | None = None
    include_self: bool = False  # probe ktui's own process too
    engine: str = "auto"  # "auto" (generic where the kernel allows), "generic", "compiled"
    cache: bool = True  # keep the compiled generic program for later starts (--no-cache: not)
    cache_dir: Path | None = None  # default ~/.cache/ktui
    # open() returns once every probe runs its full program. The dashboard
    # and the headless commands say False: their probes count from the
    # first moment, and events follow when the generic program is in.
    wait_loaded: bool = True
    # the kernel's BPF run-time statistics from the start (--cost; the
    # dashboard switches them with a key): see runstats
    timing: bool = False
    # how probes enter the kernel where neither they nor their set say
    # (`attach:`): "auto" (fentry/fexit where the kernel allows, the
    # default), "kprobe" or "fentry" (see kernel/attach/attach_choice)
    attach: str = "auto"
    # False: the generic engine's probes write no events, whatever they
    # fetch (`ktui export`, which exports counters only): a hit is counted
    # and aggregated as ever, then written nowhere, so no record is copied
    # and no reader wakes. The compiled engine has no such switch: its
    # fetching probes still write (Session.writes_events says so).
    events: bool = True


ENGINES = ("auto", "generic", "compiled")
