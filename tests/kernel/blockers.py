"""N threads asleep inside one kernel function at once, then woken: the
workload for missed returns (more calls in flight than a kretprobe has
instances).

    python blockers.py N

Each thread blocks in read() on its own eventfd (the kernel's
eventfd_read, which nothing else in the test VM calls). The process prints
"ready", waits for SIGUSR1, starts the threads, waits for SIGUSR1 again,
writes each eventfd (every read returns 8), joins the threads and prints
"done".
Whether the threads are inside the function yet is for the test to see
(a call probe's hits).
"""

import os
import signal
import sys
import threading


def main() -> None:
    count = int(sys.argv[1])
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})  # threads inherit the mask
    fds = [os.eventfd(0) for _ in range(count)]
    threads = [threading.Thread(target=os.eventfd_read, args=(fd,)) for fd in fds]
    os.write(1, b"ready\n")
    signal.sigwait({signal.SIGUSR1})
    for t in threads:
        t.start()
    signal.sigwait({signal.SIGUSR1})
    for fd in fds:
        os.eventfd_write(fd, 1)
    for t in threads:
        t.join()
    os.write(1, b"done\n")


if __name__ == "__main__":
    main()
