"""Compile the generic program in a child process.

A first start compiles with bcc (clang inside libbcc): tens of seconds
under emulation, while the probes already count through the dispatcher.
Done in a thread of ktui's own process, that compile took the CPU and the
import lock from the collector (the first stats line of `ktui stream` came
11 s after the probes were live in the VM), diverted the process's fd 2 for
its whole length, and left LLVM in ktui's memory. A child at a lower
priority (nice 10) does it instead; ktui itself never imports bcc, first
start or not.

Protocol: the program text on stdin; on stdout `OK` and the compiled
program (cache.encode_entry, checksummed), or `ER` and a one-line error. The
child's stderr is ktui's log file. It dies with its parent.

    python -m ktui.kernel.generic.compile_child KEY < program.c
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

from ktui.exits import EXIT_OK, EXIT_RUNTIME
from ktui.kernel.bpfsys import BpfError
from ktui.kernel.generic.cache import CompiledProgram, decode_entry, encode_entry

NICE = 10
PR_SET_PDEATHSIG = 1


def compile_in_child(text: str, key: str, log_fd: int) -> CompiledProgram:
    """The compiled program, from a child process (see the module's doc)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ktui.kernel.generic.compile_child", key],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_fd if log_fd >= 0 else subprocess.DEVNULL,
        close_fds=True)
    out, _ = proc.communicate(text.encode())
    if out.startswith(b"OK"):
        return decode_entry(out[2:], key)
    if out.startswith(b"ER"):
        raise RuntimeError(out[2:].decode(errors="replace").strip())
    raise RuntimeError(f"compiling the generic program: the compiler process ended with status {proc.returncode}")


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent was gone before prctl took effect
        os._exit(EXIT_RUNTIME)


def main() -> int:
    from ktui.kernel.generic.loader import compile_program

    _die_with_parent()
    os.nice(NICE)
    # libbcc writes some complaints to fd 1 ("Unable to find kernel
    # headers..."): the answer goes out on a private copy of it, and fd 1
    # joins fd 2 in the log.
    answer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    key = sys.argv[1]
    text = sys.stdin.buffer.read().decode()
    try:
        payload = b"OK" + encode_entry(compile_program(text, 2), key)
    except BpfError as exc:
        payload = b"ER" + (exc.strerror or str(exc)).encode()
    sys.stdout.flush()
    answer.write(payload)
    answer.close()
    return EXIT_OK if payload.startswith(b"OK") else EXIT_RUNTIME


if __name__ == "__main__":
    sys.exit(main())
