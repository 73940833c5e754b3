"""Session.drain and Session.stats from other threads while probes are
removed (their units freed) and added, against a real kernel. The host
twin on a fake kernel side, with many more rounds: tests/unit/test_session.py."""

from __future__ import annotations

import subprocess
import threading

from ktui.kernel.session import Session
from ktui.lang.spec import parse_spec
from ktui.record.feed import ProbeState

from .conftest import HELPER, kprobe_entries, ktui_bpf_programs, reader_code
from .test_pipeline import probe_set

ROUNDS = 3
# Reads every 5 ms: events keep coming while probes are removed and added
SPINNER = reader_code(0.005)


def test_drain_and_stats_race_removal_and_adding():
    spinner = subprocess.Popen([*HELPER, "-c", SPINNER])
    before_kp = len(kprobe_entries())
    failures: list[BaseException] = []
    done = threading.Event()
    seen = {"events": 0, "stats": 0}
    try:
        text = "name: race\nprobes:\n  - spec: vfs_read:c:a3\n"
        with Session(probe_set(text, spinner.pid)) as s:
            def drain():
                try:
                    while not done.is_set():
                        seen["events"] += len(s.drain())
                except BaseException as exc:  # noqa: BLE001 - reported below
                    failures.append(exc)

            def stats():
                try:
                    while not done.is_set():
                        s.stats()
                        seen["stats"] += 1
                except BaseException as exc:  # noqa: BLE001 - reported below
                    failures.append(exc)

            threads = [threading.Thread(target=drain), threading.Thread(target=stats),
                       threading.Thread(target=stats)]
            for t in threads:
                t.start()
            try:
                for _ in range(ROUNDS):  # each round compiles a unit: 10-40 s here
                    added = s.add_probe_now(parse_spec("vfs_read:r:retval"))
                    assert added.state is ProbeState.ATTACHED
                    s.set_enabled_now(0, False)
                    s.set_enabled_now(0, True)
                    s.remove_probe_now(added.probe_id)
                    assert set(s.stats().probes) == {0}
            finally:
                done.set()
                for t in threads:
                    t.join()
            assert s.stats().probes[0].hits > 0
        assert failures == []
        assert seen["events"] > 0 and seen["stats"] > ROUNDS
        assert len(kprobe_entries()) == before_kp
        assert ktui_bpf_programs() == []
    finally:
        spinner.kill()
        spinner.wait()
