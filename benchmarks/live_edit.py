"""Benchmark part 5 (run inside the VM by vm_suite.py, as root): what a
probe added, edited or switched in a running dashboard costs, from the
user's Enter to the probe being attached, and to its first event.

The session is the dashboard's own (`Session`, the calls the probe dialog
makes through screens/probe_ops.py); a child process reads /dev/zero
every millisecond, so a live probe on vfs_read sees a hit within a few ms.
Each round uses a different probe (fetches, dereferences, a filter, a
return probe, aggregations), since a probe language whose edits were cheap
only for one shape would not count. A probe without fetches writes no
event: its "first event" is the first stats read that shows it counted. The last row is the same add on a session that
compiles each probe (`engine="compiled"`), the cost the generic engine
removes.

Prints one JSON object on stdout:
  {"generic": {"add": [...], "edit": [...], "toggle": [...]},   seconds
   "compiled": {"add": [...]}, "bcc_imported": bool, "engine": "..."}
each entry {"attached_s", "state", "via", "first_event_s"}. `--attach`
says how the set and the probes added to it enter the kernel (fentry's
tracing copy is verified per probe: its cost is in attached_s).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset
from ktui.lang.spec import parse_probe_text

# What a user types into the dialog, round after round.
SPECS = [
    "vfs_read:c:a3",
    "vfs_read:c:a3,a2 if a3 > 0",
    "vfs_read:r:retval,a3 if retval >= 0",
    "vfs_read:c:pos=+0(a4):s64,c=comm",
    'vfs_read:c:a3 if comm != "nobody" && a3 < 100000',
    "vfs_read:r:retval:s64",
    "vfs_read:c:a1:x64,a3:u16",
    "vfs_read:c:n=a3 if n == 1 || n > 0",
    # aggregations: in the generic program too (issue 30), no compile
    "vfs_read:c hist(a3) count(comm)",
    "vfs_read:r count(comm) sum(retval)",
    "vfs_read:c stack(kernel)",
]
READER = ("import os, time\n"
          "z = os.open('/dev/zero', os.O_RDONLY)\n"
          "while True:\n"
          "    os.read(z, 1)\n"
          "    time.sleep(0.001)\n")
FIRST_EVENT_TIMEOUT = 30.0


def first_event(session: Session, probe_id: int, since: float, emits: bool = True) -> float | None:
    """Seconds from `since` until `probe_id`'s first event is drained (a
    probe that emits none: until the stats show a hit of its own)."""
    deadline = time.monotonic() + FIRST_EVENT_TIMEOUT
    while time.monotonic() < deadline:
        if emits:
            if any(e.probe_id == probe_id for e in session.drain().events()):
                return time.monotonic() - since
        else:
            stats = session.stats().probes.get(probe_id)
            if stats is not None and stats.hits - stats.counted_only > 0:
                return time.monotonic() - since
        time.sleep(0.002)
    return None


def timed(session: Session, action) -> dict:
    """Run `action` (-> a ProbeStatus); Enter-to-attached and -to-first-event."""
    t0 = time.monotonic()
    status = action()
    attached = time.monotonic() - t0
    return {"attached_s": attached, "state": status.state.value, "via": status.via,
            "spec": " ".join(str(x) for x in (status.probe, status.probe.agg) if x is not None),
            "first_event_s": first_event(session, status.probe_id, t0, status.probe.emits_events)}


def run(engine: str, rounds: int, pid: int, attach: str = "auto") -> dict:
    ps = dataclasses.replace(loads_probeset("name: live-edit\nprobes:\n  - vfs_read:c\n"), pid=pid)
    out: dict = {"add": [], "edit": [], "toggle": []}
    with Session(ps, SessionOptions(engine=engine, attach=attach)) as s:
        s.wait_loaded()
        out["engine_in_use"] = "generic" if getattr(s, "_engine", None) is not None else "compiled"
        for r in range(rounds):
            spec = SPECS[r % len(SPECS)]
            added = timed(s, lambda: s.add_probe_now(parse_probe_text(spec)))
            out["add"].append(added)
            if engine == "compiled":
                continue
            # an edit as the dialog does it (probe_ops.replace): remove, add
            newest = max(s.statuses())
            edit_to = SPECS[(r + 3) % len(SPECS)]

            def edit():
                s.remove_probe_now(newest)
                return s.add_probe_now(parse_probe_text(edit_to))
            out["edit"].append(timed(s, edit))
            newest = max(s.statuses())
            s.set_enabled_now(newest, False)
            out["toggle"].append(timed(s, lambda: s.set_enabled_now(newest, True)))
            s.drain()
    return out


def warm_cache() -> None:
    """Both variants of the generic program in the cache (XDG_CACHE_HOME),
    as on any start after a machine's first: the rounds then time adds,
    not a compile."""
    from ktui.kernel.session.loader import BccLoader

    loader = BccLoader()
    helpers = loader.features(None, True).func_arg_helpers  # the text a session compiles
    log_fd = os.open(os.devnull, os.O_WRONLY)
    try:
        loader.load_generic(log_fd, None, True, 1 << 20, func_arg_helpers=helpers).close()
        loader.tracing_variant(log_fd, None, True, func_arg_helpers=helpers)
    finally:
        os.close(log_fd)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=len(SPECS))
    ap.add_argument("--compiled-rounds", type=int, default=1)
    ap.add_argument("--attach", choices=["auto", "kprobe", "fentry"], default="auto",
                    help="how the set and the probes added live enter the kernel (the session's default)")
    ap.add_argument("--warm-cache", action="store_true",
                    help="compile both variants of the generic program into the cache first")
    args = ap.parse_args()
    if args.warm_cache:
        warm_cache()
    reader = subprocess.Popen([sys.executable, "-c", READER])
    try:
        result = {"generic": run("generic", args.rounds, reader.pid, args.attach), "attach": args.attach}
        result["bcc_imported_by_generic"] = "bcc" in sys.modules
        if args.compiled_rounds:  # 0: the generic rounds alone (a compiled session takes a compile)
            result["compiled"] = run("compiled", args.compiled_rounds, reader.pid)
    finally:
        reader.kill()
        reader.wait()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
