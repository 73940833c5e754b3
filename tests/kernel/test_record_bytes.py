"""A record holds only bytes its probe wrote for that hit: recordings leave
the machine (issue #28). A probe whose filter never passes must leave none
of what it would have fetched in anyone's records."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .test_exit_paths import check_clean, has_events, replay, start, wait_for
from .conftest import engine_cache, kprobe_entries

OPENS = 50

# The file is opened by its name alone (from its folder): the open probe's
# 64-byte string slot then holds the whole name, marker included. By its
# absolute path under pytest's tmp_path the marker starts past byte 63, and
# no leak of the slot could show.
WORKLOAD = """
import os, signal, sys
os.chdir(os.path.dirname(sys.argv[1]))
path = os.path.basename(sys.argv[1])
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
print("ready", flush=True)
signal.sigwait({signal.SIGUSR1})
for _ in range(int(sys.argv[2])):
    fd = os.open(path, os.O_RDONLY)
    os.read(fd, 7)
    os.close(fd)
print("done", flush=True)
signal.sigwait({signal.SIGUSR1})
"""


@pytest.mark.parametrize("engine,attach", [("generic", "kprobe"), ("generic", "fentry"), ("compiled", "kprobe")])
def test_a_recording_holds_no_byte_of_a_probe_whose_filter_never_passes(engine, attach, tmp_path, request):
    """The set: an open probe fetching the file name, filtered to a comm no
    task has, and a read probe of one integer filtered to the workload. The
    workload opens a file whose name carries a marker, then reads it. The
    recording's read records must not carry the name: not as bytes left
    over in a shared record area, nor from a fetch the filter did not need."""
    engine_cache(engine, request)  # the generic engine's ktui finds its programs in the run's cache
    marker = "KTUILEAK" + secrets.token_hex(8).upper()
    target = tmp_path / f"leak-{marker}-file"
    target.write_bytes(b"x" * 64)
    out = tmp_path / "leak.ktrec"
    work = subprocess.Popen([sys.executable, "-c", WORKLOAD, str(target), str(OPENS)], stdout=subprocess.PIPE)
    try:
        assert work.stdout.readline() == b"ready\n"
        before = len(kprobe_entries())
        p = start(["record", "--engine", engine, "--attach", attach, "--interval", "0.2",
                   "-e", 'do_sys_openat2:c:fname=+0(a2):ustring if comm == "nobody"',
                   "-e", f"vfs_read:c:a3 if pid == {work.pid}", "-o", str(out)])
        # the read probe's records flow once the program is in: then the workload runs
        wait_for(lambda: p.poll() is not None or ready_to_record(out), "the recording to start")
        assert p.poll() is None, p.communicate()[1].decode()
        os.kill(work.pid, signal.SIGUSR1)
        assert work.stdout.readline() == b"done\n"
        # stopped, ktui record detaches, drains to the end, then writes the last stats
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
        check_clean(before)
    finally:
        for proc in (work, locals().get("p")):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    data = out.read_bytes()
    assert marker.encode() not in data
    assert marker.encode()[:8] not in data  # not even a piece of it
    events, feed = replay(out)
    reads = [e for e in events if feed.statuses()[e.probe_id].probe.name.startswith("vfs_read")]
    assert len(reads) >= OPENS and all(e.values == (7,) for e in reads)
    opens = [e for e in events if feed.statuses()[e.probe_id].probe.name.startswith("do_sys_openat2")]
    assert opens == []


def ready_to_record(path: Path) -> bool:
    """The recording names its probes as attached (its program is in)."""
    return path.exists() and b"\"states\": [\"attached\", \"attached\"]" in path.read_bytes()
