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
"""

import json
import os
import signal
import sys


def main() -> None:
    phases = json.loads(sys.argv[1])
    zero = os.open("/dev/zero", os.O_RDONLY)
    wronly = os.open("/dev/null", os.O_WRONLY)
    files = {op[1]: os.open(op[1], os.O_RDONLY)
             for phase in phases for op in phase if op[0] == "fileread"}
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
            elif op[0] == "open":
                os.close(os.open(op[1], os.O_CREAT | os.O_WRONLY, 0o600))
        os.write(1, b"done\n")


if __name__ == "__main__":
    main()
