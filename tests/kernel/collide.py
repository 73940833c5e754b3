"""Threads whose ids collide inside one kernel function: the workload for
return pairing (a return must pair with its own thread's entry, whatever
its thread id is equal to modulo some table size).

    python collide.py MODULUS [MODULUS...]

For each MODULUS: a sleeper thread blocks in read() on an eventfd (the
kernel's eventfd_read), then a second thread whose id is the sleeper's
plus MODULUS reads a ready eventfd (in and out of eventfd_read) while the
sleeper is still inside. Thread ids are chosen through
/proc/sys/kernel/ns_last_pid (root); a thread that did not get its id
(another process took it first) reads nothing, and the pair is tried
again with other ids.

The process prints "ready", waits for SIGUSR1, makes the pairs, prints
"pairs SLEEPER:QUICK ..." once every quick thread is done, waits for
SIGUSR1 again, wakes the sleepers, joins them and prints "done".
"""

import os
import signal
import sys
import threading
import time

NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"


def thread_with_id(tid: int, work) -> tuple[threading.Thread, list]:
    """A thread that runs `work` only if its id is `tid`; [got] says."""
    got: list = []
    ready = threading.Event()

    def body():
        got.append(threading.get_native_id())
        ready.set()
        if got[0] == tid:
            work()

    with open(NS_LAST_PID, "w") as f:
        f.write(str(tid - 1))
    t = threading.Thread(target=body, daemon=True)  # an error must not wait for a sleeper
    t.start()
    ready.wait()
    return t, got


def free_pair(start: int, modulus: int) -> int:
    """An id at or after `start` such that neither it nor it + modulus is
    a task's now (a guess: either may be taken by the time it is used, then
    the pair is tried again)."""
    tid = start
    while os.path.exists(f"/proc/{tid}") or os.path.exists(f"/proc/{tid + modulus}"):
        tid += 1
    return tid


def main() -> None:
    moduli = [int(m) for m in sys.argv[1:]]
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    os.write(1, b"ready\n")
    signal.sigwait({signal.SIGUSR1})
    sleepers, pairs = [], []
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    base = 1000  # low ids are free in a test VM, and leave room below pid_max
    for modulus in moduli:
        for _attempt in range(50):
            base = free_pair(base + 7, modulus)
            if base + modulus >= pid_max:
                raise SystemExit(f"no thread ids {modulus} apart below pid_max {pid_max}")
            sleep_fd = os.eventfd(0)
            sleeper, got = thread_with_id(base, lambda fd=sleep_fd: os.eventfd_read(fd))
            if got[0] != base:
                sleeper.join()
                continue
            time.sleep(0.2)  # well inside eventfd_read, asleep
            quick_fd = os.eventfd(1)
            quick, got_quick = thread_with_id(base + modulus, lambda fd=quick_fd: os.eventfd_read(fd))
            quick.join()
            if got_quick[0] != base + modulus:  # taken: wake this sleeper, try again
                os.eventfd_write(sleep_fd, 1)
                sleeper.join()
                raise SystemExit(f"thread id {base + modulus} was taken: the sleeper read once")
            sleepers.append((sleeper, sleep_fd))
            pairs.append(f"{base}:{base + modulus}")
            break
        else:
            raise SystemExit(f"no free pair of thread ids {modulus} apart")
    os.write(1, ("pairs " + " ".join(pairs) + "\n").encode())
    signal.sigwait({signal.SIGUSR1})
    for thread, fd in sleepers:
        os.eventfd_write(fd, 1)
        thread.join()
    os.write(1, b"done\n")


if __name__ == "__main__":
    main()
