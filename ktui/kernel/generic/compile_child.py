"""Compile the generic program in a helper process, started before any probe.

A first start compiles with bcc (clang inside libbcc): tens of seconds
under emulation, while the probes already count through the dispatcher.
Done in a thread of ktui's own process, that compile took the CPU and the
import lock from the collector (the first stats line of `ktui stream` came
11 s after the probes were live in the VM), diverted the process's fd 2 for
its whole length, and left LLVM in ktui's memory. A helper process at a
lower priority (nice 10) does it instead; ktui itself never imports bcc,
first start or not.

The helper is ktui's own work, so no probe may count it (issue 28: python3
topped a probe's comms on a first start, with reads nobody saw). A process
cannot be left out before its pid is known, and a child's pid is known only
once it runs, so the session starts its helper before the first probe is
attached (`CompileHelper`), puts the pid among the excluded ones from the
start, and keeps the helper, idle, until the session ends: the pid stays
ktui's for as long as it is excluded (a helper that exited could see its
pid reused by someone else's process). After each compile the helper execs
itself afresh (same pid), so an idle helper does not keep LLVM's memory.
The helper starts nothing itself: nothing it imports runs a program (see
bpfsys: no ctypes.util.find_library, which runs ldconfig).

Protocol (stdin/stdout of the helper): a request is `KTUI`, the key's and
the text's lengths (u32 each) and the two; the answer `OK` and the
compiled program (cache.encode_entry, checksummed), or `ER` and a one-line
error, each after its length (u32). The helper's stderr is ktui's log
file. EOF on stdin: it exits.

    python -m ktui.kernel.generic.compile_child --serve
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import struct
import subprocess
import sys
import threading

from ktui.exits import EXIT_OK, EXIT_RUNTIME
from ktui.kernel.maps.bpfsys import BpfError
from ktui.kernel.generic.cache import CompiledProgram, decode_entry, encode_entry

NICE = 10
PR_SET_PDEATHSIG = 1
_REQUEST = struct.Struct("<4sII")
_ANSWER = struct.Struct("<2sI")
MAGIC = b"KTUI"


class CompileHelper:
    """One helper process: `pid` (running from the constructor on),
    `compile(text, key)` (one at a time, in the order asked), `close()`
    (after what was asked is done: the helper then exits).

    A thread of its own starts the process and talks to it: the kernel
    kills the helper (PR_SET_PDEATHSIG) when the thread that forked it
    ends, so that thread must live as long as the helper, whichever thread
    opened the session."""

    def __init__(self, log_fd: int) -> None:
        self.pid = 0
        self._requests: queue.Queue = queue.Queue()
        self._ended = False  # the helper is gone: nothing put in _requests is read
        self._ended_lock = threading.Lock()
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(log_fd,), name="ktui-compiler", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise RuntimeError(f"the compiler process did not start: {self._error}") from self._error

    def compile(self, text: str, key: str) -> CompiledProgram:
        reply: queue.Queue = queue.Queue(maxsize=1)
        with self._ended_lock:
            if self._ended:
                raise RuntimeError("compiling the generic program: the compiler process has ended")
            self._requests.put((text, key, reply))
        answer = reply.get()
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def close(self) -> None:
        """The helper ends once every compile asked for is answered (a
        compile under way still fills the cache for the next start)."""
        self._requests.put(None)

    def _run(self, log_fd: int) -> None:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ktui.kernel.generic.compile_child", "--serve"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=log_fd if log_fd >= 0 else subprocess.DEVNULL, close_fds=True)
        except OSError as exc:
            self._error = exc
            self._ended = True
            self._started.set()
            return
        self.pid = proc.pid
        self._started.set()
        try:
            while True:
                item = self._requests.get()
                if item is None:
                    break
                text, key, reply = item
                try:
                    reply.put(_ask(proc, text, key))
                except Exception as exc:  # noqa: BLE001 - the asker raises it
                    reply.put(exc)
        finally:
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            proc.wait()
            with self._ended_lock:
                self._ended = True
            # answer whoever asked after close() or after the helper died
            while True:
                try:
                    item = self._requests.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[2].put(RuntimeError("compiling the generic program: the compiler process has ended"))


def _ask(proc: subprocess.Popen, text: str, key: str) -> CompiledProgram:
    body, name = text.encode(), key.encode()
    try:
        proc.stdin.write(_REQUEST.pack(MAGIC, len(name), len(body)) + name + body)
        proc.stdin.flush()
    except OSError:
        pass  # it died: said below, with its status
    head = _read_exactly(proc.stdout, _ANSWER.size)
    if len(head) == _ANSWER.size:
        status, size = _ANSWER.unpack(head)
        payload = _read_exactly(proc.stdout, size)
        if len(payload) == size and status == b"OK":
            return decode_entry(payload, key)
        if len(payload) == size and status == b"ER":
            raise RuntimeError(payload.decode(errors="replace").strip())
    proc.wait()
    raise RuntimeError(f"compiling the generic program: the compiler process ended with status {proc.returncode}")


def _read_exactly(stream, size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = stream.read(size - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def compile_in_child(text: str, key: str, log_fd: int) -> CompiledProgram:
    """One compile in a helper of its own (no session: nothing to leave out)."""
    helper = CompileHelper(log_fd)
    try:
        return helper.compile(text, key)
    finally:
        helper.close()


# ---------------------------------------------------------------- the helper's side


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent was gone before prctl took effect
        os._exit(EXIT_RUNTIME)


def _compile(text: str, key: str) -> bytes:
    from ktui.kernel.generic.loader import compile_program

    try:
        return b"OK" + encode_entry(compile_program(text, 2), key)
    except BpfError as exc:
        return b"ER" + (exc.strerror or str(exc)).encode()


def main() -> int:
    _die_with_parent()
    if os.getpriority(os.PRIO_PROCESS, 0) < NICE:  # once: an exec of itself keeps it
        os.setpriority(os.PRIO_PROCESS, 0, NICE)
    # libbcc writes some complaints to fd 1 ("Unable to find kernel
    # headers..."): answers go out on a private copy of it, and fd 1
    # joins fd 2 in the log.
    answer_fd = os.dup(1)
    os.dup2(2, 1)
    requests = os.fdopen(0, "rb", buffering=0)
    head = _read_exactly(requests, _REQUEST.size)
    if len(head) < _REQUEST.size:
        return EXIT_OK  # ktui is done with it
    magic, key_len, text_len = _REQUEST.unpack(head)
    if magic != MAGIC:
        return EXIT_RUNTIME
    key = _read_exactly(requests, key_len).decode()
    text = _read_exactly(requests, text_len).decode()
    payload = _compile(text, key)
    sys.stdout.flush()
    status, body = payload[:2], payload[2:]
    with os.fdopen(answer_fd, "wb", closefd=False) as answer:
        answer.write(_ANSWER.pack(status, len(body)) + body)
    # Afresh, same pid, for the next request: LLVM's memory goes with the
    # old image. Fd 1 is the answer pipe again for it.
    os.dup2(answer_fd, 1)
    os.execv(sys.executable, [sys.executable, "-m", "ktui.kernel.generic.compile_child", "--serve"])
    return EXIT_RUNTIME  # not reached


if __name__ == "__main__":
    sys.exit(main())
