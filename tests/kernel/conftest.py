"""Kernel tests: run inside the VM (scripts/vm.sh), as root, on a stock kernel.

They never skip: on a kernel without kprobes, or without root, they fail,
so a broken rig cannot pass as green.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).parent

# The guest's home is read-only, so the generic program's cache would never
# be written and every session would compile it again. One cache per run
# (tmpfs): the first session compiles, the rest load. Tests of the cache
# itself give their own directory.
os.environ.setdefault("XDG_CACHE_HOME", tempfile.mkdtemp(prefix="ktui-test-cache-"))
KPROBE_LIST = Path("/sys/kernel/debug/kprobes/list")


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.kernel)


@pytest.fixture(scope="session", autouse=True)
def kernel_rig():
    problems = []
    if os.geteuid() != 0:
        problems.append("not root")
    if not Path("/sys/bus/event_source/devices/kprobe/type").exists():
        problems.append("no kprobe PMU (CONFIG_KPROBES off?)")
    if not KPROBE_LIST.exists():
        problems.append(f"{KPROBE_LIST} missing (debugfs not mounted?)")
    if problems:
        pytest.fail("kernel tests need the VM (scripts/vm.sh): " + "; ".join(problems))


class Workload:
    """Controls a workload.py child process phase by phase."""

    def __init__(self, phases: list) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "workload.py"), json.dumps(phases)],
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout.readline() == b"ready\n"
        self.pid = self.proc.pid
        self.phases_left = len(phases)

    def run_phase(self) -> None:
        os.kill(self.pid, signal.SIGUSR1)
        assert self.proc.stdout.readline() == b"done\n"
        self.phases_left -= 1
        if not self.phases_left:
            self.proc.wait(timeout=60)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def workload():
    made = []

    def start(phases):
        w = Workload(phases)
        made.append(w)
        return w

    yield start
    for w in made:
        w.close()


def kprobe_entries() -> list[str]:
    """Every kprobe the kernel has registered, whoever made it."""
    return [ln for ln in KPROBE_LIST.read_text().splitlines() if ln.strip()]


def ktui_bpf_programs() -> list[str]:
    """Names of loaded BPF programs that are ours (ktui_p*/ktui_e*)."""
    out = subprocess.run(["bpftool", "prog", "list"], capture_output=True, text=True, check=True)
    return re.findall(r"\bname (ktui_\w+)", out.stdout)
