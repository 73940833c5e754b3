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
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent

# The guest's home is read-only: `python -m ktui.vm` gives the guest a
# cache in the checkout (.vmout/cache-KERNEL); run otherwise, one cache per
# run (tmpfs). Tests of the cache itself, and of a first start, give their
# own directory.
os.environ.setdefault("XDG_CACHE_HOME", tempfile.mkdtemp(prefix="ktui-test-cache-"))
KPROBE_LIST = Path("/sys/kernel/debug/kprobes/list")
# How the tests start their helper processes (workloads, spinners): those
# need the standard library alone, and skip site's start-up (the venv's and
# the system's .pth files), a second each under emulation.
HELPER = [sys.executable, "-S"]


def reader_code(every: float) -> str:
    """A helper's program: read 7 bytes from /dev/zero every EVERY s, forever."""
    return ("import os, time\nfd = os.open('/dev/zero', os.O_RDONLY)\n"
            f"while True:\n    os.read(fd, 7)\n    time.sleep({every})\n")


# 20 reads a second: events flow while ktui starts and ends. Every read runs
# the probes' programs and ktui decodes its events, all on the guest's one
# emulated CPU: a read every 5 ms made ktui's start and stop slower (issue #29).
SPINNER = reader_code(0.05)


@pytest.fixture
def spinner():
    """The pid of a process that reads 7 bytes every 50 ms, forever."""
    p = subprocess.Popen([*HELPER, "-c", SPINNER])
    yield p.pid
    p.kill()
    p.wait()


def shared_cache_dir() -> Path:
    """The run's cache directory: where every Session with the default
    cache_dir, and every ktui the tests start, looks."""
    return Path(os.environ["XDG_CACHE_HOME"]) / "ktui"


@pytest.fixture(scope="session")
def warm_cache(kernel_rig) -> Path:
    """The run's cache directory, once this kernel is known to take the
    shipped generic program (both variants, for its probed features) with
    no compile: a stale shipped object (program.c changed since
    scripts/build-generic.sh) fails here, with what to run, not as
    minutes of compiles in every test after."""
    from ktui.kernel.generic.loader import compiled_variant
    from ktui.kernel.generic.shipped import KPROBE, TRACEPOINT, TRACING

    log_fd = os.open(os.devnull, os.O_WRONLY)
    kinds = (KPROBE, TRACING, TRACEPOINT)
    try:
        sources = {kind: compiled_variant(log_fd, cache=None, kind=kind, compiler=_no_compile)[1] for kind in kinds}
    finally:
        os.close(log_fd)
    assert sources == dict.fromkeys(kinds, "shipped"), sources
    return shared_cache_dir()


def _no_compile(text, key):
    raise AssertionError("the shipped generic program is not today's: run scripts/build-generic.sh")


def engine_cache(engine: str, request) -> Path | None:
    """The cache a session of `engine` wants: the run's warm one for the
    generic engine, none for the compiled one (its tests then neither wait
    for the generic program's compile nor depend on it)."""
    return None if engine == "compiled" else request.getfixturevalue("warm_cache")


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
            [*HELPER, str(HERE / "workload.py"), json.dumps(phases)],
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


class BuiltTarget:
    """A C program the test built (uprobe_target.c, usdt_target.c): run with
    its argument, it prints "ready", then makes one round of its calls per
    line on stdin and prints "done N"."""

    def __init__(self, binary: Path, *args: str) -> None:
        self.binary = str(binary)
        self.proc = subprocess.Popen([self.binary, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout.readline() == b"ready\n"
        self.pid = self.proc.pid

    def round(self) -> int:
        """One round; the N its "done N" line says."""
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.startswith(b"done "), line
        return int(line.split()[1])

    def close(self) -> None:
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


def _live_descendants(root: int) -> list[tuple[int, str]]:
    """Every process below `root` that has not exited yet (zombies are done)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # comm may hold spaces and parentheses: the fields start after the last ')'
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":
            children.setdefault(int(ppid), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            try:
                cmd = (Path("/proc") / str(pid) / "cmdline").read_bytes()
            except OSError:
                continue
            found.append((pid, cmd.replace(b"\0", b" ").decode(errors="replace").strip()))
            todo.append(pid)
    return found


@pytest.fixture(autouse=True)
def no_child_outlives_its_test():
    """A test that fails halfway must not leave its ktui running: its probes
    would still be attached when the next tests count what the kernel holds,
    and one failure would turn into a dozen. Whatever is left is killed, and
    the test that left it errors, naming it."""
    yield
    # A session's generic-program compile (a child that dies with us) may
    # still run behind a module-scoped session: it is not a leftover.
    left = [(pid, cmd) for pid, cmd in _live_descendants(os.getpid())
            if "generic.compile_child" not in cmd]
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid, _ in left:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass  # not our direct child: its own parent (killed too) or init reaps it
    if left:
        pytest.fail("left running after the test (killed): " + "; ".join(c for _, c in left))


@pytest.fixture
def ktui_for_anyone():
    """ktui(*needs) -> (command, environment): `python -m ktui` as any user
    can run it, wherever the checkout is (a clone in `mktemp -d` sits in a
    directory only its owner may enter). The ktui package and the packages
    NEEDS (top-level names, from the venv) are copied into a directory all
    may read, and run by the venv's base interpreter; ktui's arguments go
    after the command."""
    import importlib
    import shutil

    root = Path(tempfile.mkdtemp(prefix="ktui-for-anyone-"))  # /tmp: all may pass

    def install(*needs: str) -> tuple[list[str], dict[str, str]]:
        for name in ("ktui", *needs):
            # with its compiled modules (still valid: copytree keeps the
            # sources' times), or each run compiles them all under emulation
            source = Path(importlib.import_module(name).__file__).parent
            shutil.copytree(source, root / name)
        for path in (root, *root.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        python = os.path.realpath(sys._base_executable)  # the venv's bin/ is in the checkout
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        return [python, "-s", "-m", "ktui"], {**env, "PYTHONPATH": str(root)}

    yield install
    shutil.rmtree(root)


# At most a fifth of the guest's time goes to asking: the guest's CPUs are
# one emulated thread, so a condition that costs (a scrape of the exporter,
# a bpftool, a look at the dashboard's screen) asked every 0.1 s took CPU
# from the very ktui it waited for.
ASKING_SHARE = 0.2


def wait_for(cond, what: str, timeout: float = 120, every: float = 0.05):
    """COND's first true value, asked every EVERY s at least (longer when
    asking takes long: ASKING_SHARE; a cheap look every 50 ms is seen 25 ms
    late on average, and a run has hundreds of waits); the test fails,
    naming WHAT, once TIMEOUT s have passed (a bound for a slow, shared VM:
    never a measure of how fast)."""
    deadline = time.monotonic() + timeout
    while True:
        asked = time.monotonic()
        got = cond()
        if got:
            return got
        now = time.monotonic()
        if now >= deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(max(every, (now - asked) * (1 - ASKING_SHARE) / ASKING_SHARE))


class LineReader:
    """A process's output, read line by line by a thread of its own, so a
    test can wait for a number of lines with a deadline (a readline() in
    the test would wait without one)."""

    def __init__(self, stream) -> None:
        import threading

        self.lines: list[bytes] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line)

    def rest(self, timeout: float) -> bytes:
        """Everything, once the stream has ended (the process closed it)."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the output did not end within {timeout:g} s"
        return b"".join(self.lines)


def drain_all(session, timeout: float = 60) -> list:
    """Every event SESSION's buffers hold, drained until one drain comes back
    empty. No waiting is needed once the work that made them is done: a
    probe's program writes its event during the hit, before the traced
    call returns (a deadline bounds a probe that keeps firing)."""
    events: list = []

    def empty_now() -> bool:
        batch = session.drain().events()
        events.extend(batch)
        return not batch

    wait_for(empty_now, "the event buffers to run dry", timeout, every=0)
    return events


def kprobe_entries() -> list[str]:
    """Every kprobe the kernel has registered, whoever made it."""
    return [ln for ln in KPROBE_LIST.read_text().splitlines() if ln.strip()]


def bpftool(*args: str) -> str:
    """bpftool's output. It exits 255 when an object it was listing went away
    mid-listing (a probe detaching as we look): ask again, a few times."""
    for _ in range(5):
        out = subprocess.run(["bpftool", *args], capture_output=True, text=True)
        if out.returncode == 0:
            return out.stdout
    raise AssertionError(f"bpftool {' '.join(args)}: exit {out.returncode}: {out.stderr.strip()}")


def ktui_bpf_programs() -> list[str]:
    """Names of loaded BPF programs that are ours (ktui_p*/ktui_e*)."""
    out = subprocess.CompletedProcess([], 0, stdout=bpftool("prog", "list"))
    return re.findall(r"\bname (ktui_\w+)", out.stdout)
