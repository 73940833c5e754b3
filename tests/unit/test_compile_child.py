"""The generic program's compile runs in a child process
(kernel/generic/compile_child.py). On the host (no kprobes, no headers for
its kernel, or a program that does not compile) the child answers with a
one-line error, and what libbcc prints, on fd 1 or fd 2, lands in the log,
never in the answer. The successful compile is proven in the VM
(tests/kernel/test_generic.py)."""

from __future__ import annotations

import os

import pytest

from ktui.kernel.generic.compile_child import compile_in_child

# python3-bpfcc, which `make test` installs: without it this test must fail,
# not pass on a "no module named bcc" that also starts with the same words
import bcc  # noqa: E402,F401


def test_a_failed_compile_is_one_line_and_the_chatter_goes_to_the_log(tmp_path):
    log = tmp_path / "ktui.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        with pytest.raises(RuntimeError) as caught:
            compile_in_child("int broken(void *ctx) { return ; ", "key", fd)
    finally:
        os.close(fd)
    message = str(caught.value)
    assert message.startswith("compiling the generic program: ")
    assert "\n" not in message
    assert "Failed to compile BPF module" in message  # bcc's own words: it ran
    assert log.read_text().strip()  # bcc / clang said why, into the log


def _gone(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def _cmdline(pid: int) -> bytes:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return b""


def test_the_helper_answers_each_compile_as_one_process_then_ends_when_closed(tmp_path):
    """The session leaves the helper's pid out of every count: the pid must
    stay the helper's (each compile in the same process, made afresh by an
    exec, not a new child), and the helper ends once closed."""
    import time

    from ktui.kernel.generic.compile_child import CompileHelper

    fd = os.open(tmp_path / "ktui.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        helper = CompileHelper(fd)
    finally:
        os.close(fd)  # the helper has its own copy
    pid = helper.pid
    assert pid > 0 and not _gone(pid)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="^compiling the generic program: "):
            helper.compile("int broken(void *ctx) { return ; ", "key")
        deadline = time.monotonic() + 120  # an exec and Python's start: slow on a loaded machine
        while b"compile_child" not in _cmdline(pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # an exec of itself under way: its command line comes back
        assert b"ktui.kernel.generic.compile_child" in _cmdline(pid)
        parent = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]
        assert int(parent) == os.getpid()  # still ktui's own child, not a grandchild
    helper.close()
    deadline = time.monotonic() + 30
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)
    with pytest.raises(RuntimeError, match="has ended"):
        helper.compile("int x;", "key")


def test_what_the_helper_imports_starts_no_program():
    """A program the helper started would be a process of ktui's whose pid
    ktui never learns, so its hits would be counted (ctypes.util.find_library
    runs ldconfig: bpfsys once called it). Python's audit events say every
    process start; the helper's imports must raise none."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "def hook(event, args):\n"
        "    if event in ('subprocess.Popen', 'os.posix_spawn', 'os.system', 'os.fork', 'os.exec'):\n"
        "        raise SystemExit(f'started a program: {event} {args!r:.200}')\n"
        "sys.addaudithook(hook)\n"
        "import ktui.kernel.generic.compile_child, ktui.kernel.generic.loader, ktui.kernel.attach.kprobe_pmu\n"
        "import bcc\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
