"""Run a `ktui` command up to its first attach, on a host without kprobes,
and write the modules imported by then.

    python -m tests.launch_path OUT stream --attach kprobe -e vfs_read:c:a3 --no-stats

The real command line, session and generic engine run; only the kernel
is stubbed, at its lowest doors: the environment's checks find nothing
wrong, the kernel's features are Debian 6.1's, bpf(2) hands out fds of
/dev/null, and the first attach (a kprobe opened, kprobe_pmu.open_kprobe,
or a BPF link made) writes sorted(sys.modules) to OUT, one a line, and
ends the process with status 0. So `python -X importtime -m tests.launch_path ...` shows what a launch
imports before it counts (issue 30, "a lean first path"), and
tests/unit/test_launch_imports.py keeps the heavy modules off that path.

What this module imports itself is on that path anyway (the attach, the
bpf(2) wrapper, the features, the checks of the environment).
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

from ktui.kernel.attach import kprobe_pmu
from ktui.kernel.machine import features, preflight
from ktui.kernel.maps import bpfsys

# Debian 6.1's answers (`ktui doctor` in the VM): kprobe cookies, so the
# generic engine and its dispatcher; fentry, but the runs here say
# --attach kprobe as run 9 did.
DEBIAN_6_1 = features.given(ringbuf=True, ringbuf_no_wakeup=True, kprobe_cookie=True, fentry=True,
                            tracing_cookie=True, func_arg=True, trace_args=6, task_storage=True,
                            kprobe_multi=False, kprobe_recursion_misses=False, tracing_recursion_misses=True,
                            run_stats=True, batch_lookup=True)


# bpf(2) commands that make an fd (a map, a program, BTF, the stats switch)
_MAKES_FD = (bpfsys.BPF_MAP_CREATE, bpfsys.BPF_PROG_LOAD, bpfsys.BPF_BTF_LOAD, bpfsys.BPF_ENABLE_STATS)
# and those that attach: a link (fentry/fexit, kprobe_multi, a kprobe's cookie)
_ATTACHES = (bpfsys.BPF_LINK_CREATE, bpfsys.BPF_RAW_TRACEPOINT_OPEN)


def _fake_bpf(out: str):
    """bpf(2) as a kernel that takes everything: a new fd of /dev/null for
    what makes one, empty maps, 0 for the rest; an attach ends the run."""
    def bpf(cmd: int, attr: ctypes.Array, what: str) -> int:
        if cmd in _ATTACHES:
            _write_modules_and_exit(out)
        if cmd in _MAKES_FD:
            return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        if cmd == bpfsys.BPF_MAP_GET_NEXT_KEY:
            raise bpfsys.BpfError(errno.ENOENT, what)
        return 0

    return bpf


def _write_modules_and_exit(out: str) -> None:
    with open(out, "w", encoding="utf-8") as f:
        f.write("".join(f"{name}\n" for name in sorted(sys.modules)))
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str]) -> None:
    out, args = argv[0], argv[1:]
    preflight.check_environment = lambda *a, **k: []
    features.detect = lambda **k: DEBIAN_6_1
    bpfsys._bpf = _fake_bpf(out)
    kprobe_pmu.open_kprobe = lambda *args, **kwargs: _write_modules_and_exit(out)
    from ktui.cli import main as ktui_main

    ktui_main(args, prog_name="ktui")
    sys.exit("launch_path: the command ended without attaching a kprobe")


if __name__ == "__main__":
    main(sys.argv[1:])
