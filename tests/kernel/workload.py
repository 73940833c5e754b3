"""A workload of known shape, run as its own process so probes can filter on
its pid. It prepares every fd before the first phase, then for each phase
waits for SIGUSR1 (waiting reads nothing: no stray vfs_read), runs the
phase's operations, and writes "done" to stdout (a write, not a read).

    python workload.py '[[["read", 7, 100], ["badread", 5]], [["open", "/tmp/x"]]]'

Operations:
    ["read", SIZE, N]   N reads of SIZE bytes from /dev/zero (vfs_read returns SIZE)
    ["badread", N]      N reads from a write-only fd (vfs_read returns -EBADF)
    ["open", PATH]      open(PATH, O_CREAT) and close it (do_sys_openat2 sees PATH)
    ["fileread", PATH, SIZE, N]
                        N reads of SIZE bytes, one after the other, from the
                        regular file PATH opened before the first phase: the
                        file position at each read is 0, SIZE, 2*SIZE, ...
    ["comm", NAME]      the process renames itself (prctl PR_SET_NAME): what
                        follows is seen under comm NAME
    ["readv", SIZE, N]  N readv(2)s of SIZE bytes in one buffer from /dev/zero
    ["pread", SIZE, N]  N pread64(2)s of SIZE bytes from /dev/zero
    ["write", SIZE, N]  N writes of SIZE bytes to /dev/null
    ["directread", PATH, SIZE, N]
                        N preadv(2)s of SIZE bytes at 0, SIZE, 2*SIZE, ...
                        from PATH (a block device) opened O_DIRECT before
                        the first phase, into a page-aligned buffer: one
                        block request each, past the page cache
    ["slowread", SIZE, N, SECONDS]
                        N reads of SIZE bytes from a pipe, each blocked for
                        at least SECONDS: a thread of this process sleeps
                        that long, then writes the SIZE bytes (one atomic
                        write: SIZE <= PIPE_BUF), which the read returns
"""

import ctypes
import json
import mmap
import os
import signal
import sys
import threading
import time


# loaded before the first phase: an import there would read files
LIBC = ctypes.CDLL(None, use_errno=True)


def set_comm(name: str) -> None:
    if LIBC.prctl(15, name.encode(), 0, 0, 0) != 0:  # PR_SET_NAME
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NAME)")


def main() -> None:
    phases = json.loads(sys.argv[1])
    zero = os.open("/dev/zero", os.O_RDONLY)
    wronly = os.open("/dev/null", os.O_WRONLY)
    files = {op[1]: os.open(op[1], os.O_RDONLY)
             for phase in phases for op in phase if op[0] == "fileread"}
    direct = {op[1]: os.open(op[1], os.O_RDONLY | os.O_DIRECT)
              for phase in phases for op in phase if op[0] == "directread"}
    pipe_r, pipe_w = os.pipe()
    aligned = mmap.mmap(-1, max([op[2] for phase in phases for op in phase if op[0] == "directread"] or [1]))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    os.write(1, b"ready\n")
    for phase in phases:
        signal.sigwait({signal.SIGUSR1})
        for op in phase:
            if op[0] == "read":
                for _ in range(op[2]):
                    os.read(zero, op[1])
            elif op[0] == "badread":
                for _ in range(op[1]):
                    try:
                        os.read(wronly, 13)
                    except OSError:
                        pass
            elif op[0] == "fileread":
                for _ in range(op[3]):
                    os.read(files[op[1]], op[2])
            elif op[0] == "comm":
                set_comm(op[1])
            elif op[0] == "readv":
                for _ in range(op[2]):
                    os.readv(zero, [bytearray(op[1])])
            elif op[0] == "pread":
                for _ in range(op[2]):
                    os.pread(zero, op[1], 0)
            elif op[0] == "write":
                for _ in range(op[2]):
                    os.write(wronly, bytes(op[1]))
            elif op[0] == "directread":
                view = memoryview(aligned)[:op[2]]
                for i in range(op[3]):
                    os.preadv(direct[op[1]], [view], i * op[2])
            elif op[0] == "slowread":
                for _ in range(op[2]):
                    writer = threading.Thread(target=_write_later, args=(pipe_w, op[1], op[3]))
                    writer.start()
                    assert len(os.read(pipe_r, op[1])) == op[1]
                    writer.join()
            elif op[0] == "open":
                os.close(os.open(op[1], os.O_CREAT | os.O_WRONLY, 0o600))
        os.write(1, b"done\n")


def _write_later(fd: int, size: int, seconds: float) -> None:
    time.sleep(seconds)
    os.write(fd, bytes(size))


if __name__ == "__main__":
    main()
