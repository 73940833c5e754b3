"""python -m ktui.vm [--kernel VERSION] [--shell] -- COMMAND...

Run COMMAND (one shell command line; the words are joined with spaces) as
root inside a throwaway VM booting a stock Debian kernel (default: the
newest 6.1 under /boot). It runs from the current directory, which the
guest may write; its output is printed and its exit status is this
command's. With --shell, COMMAND is a script run as the guest's shell on
the guest console (interactive).

    KTUI_VM_KERNEL     the kernel, when --kernel is not given
    KTUI_VM_QEMU_OPTS  QEMU options (default: -accel tcg,thread=single;
                       set but empty: QEMU's multi-threaded TCG)
    KTUI_VM_VERBOSE=1  the guest kernel's messages go to the console log
    KTUI_VM_CPUS       the guest's CPUs (default 2; 1 for a one-CPU guest)
    KTUI_VM_TIMEOUT    seconds before the VM is stopped (default 2400)

The guest's XDG_CACHE_HOME is .vmout/cache-KERNEL: its caches (BTF,
probed features, compiled programs) outlive the boot.

Exit status: COMMAND's; 2 when the VM cannot start here; 3 when the guest
did not finish (the console log's tail goes to stderr).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ktui.exits import EXIT_INTERRUPTED, EXIT_USAGE
from ktui.vm.boot import Machine, VmError, run_command, run_shell
from ktui.vm.signals import Stopped, stop_signals_raise


def guest_cache(machine: Machine) -> dict[str, str]:
    """The guest's environment for its caches: an XDG_CACHE_HOME that
    outlives the boot (the guest's home is read-only)."""
    return {"XDG_CACHE_HOME": str(machine.cwd / ".vmout" / f"cache-{machine.kernel}")}


def main(argv: list[str]) -> int:
    kernel, shell = None, False
    while argv:
        if argv[0] == "--kernel" and len(argv) > 1:
            kernel, argv = argv[1], argv[2:]
        elif argv[0] == "--shell":
            shell, argv = True, argv[1:]
        elif argv[0] in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        elif argv[0] == "--":
            argv = argv[1:]
            break
        else:
            break
    command = " ".join(argv) or "bash"
    cwd = Path.cwd()
    try:
        machine = Machine.from_env(kernel, cwd=cwd, rwdirs=(cwd,))
        if shell:
            return run_shell(machine, Path(command))
        # SIGTERM and SIGHUP unwind like a Ctrl-C: the VM goes down and the
        # run's files in .vmout/ go with it (a killed run left them there)
        with stop_signals_raise():
            return run_command(machine, command, rundir=cwd / ".vmout", env=guest_cache(machine))
    except VmError as exc:
        print(f"vm: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Stopped as stop:
        print(f"vm: {stop}: the VM is down", file=sys.stderr)
        return stop.status
    except KeyboardInterrupt:  # one line, not a traceback
        print("vm: interrupted: the VM is down", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
