"""`ktui vm ARGS`: ktui ARGS inside a throwaway VM, its output and exit
status passed through (the command line checks ARGS on the host first,
cli._check_before_boot, so a typo does not cost a boot).

The dashboards run on the guest console (dashboard.py), the other commands
with their output in files (headless.py); either way guestrun.py carries
back ktui's status and what it printed, keeps the guest's log beside the
host's, and removes the run's files on every way out.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ktui.exits import EXIT_ENVIRONMENT, EXIT_INTERRUPTED
from ktui.kernel.quiet import default_log_path
from ktui.vm import dashboard, headless
from ktui.vm.boot import Machine, VmError
from ktui.vm.guest import DASHBOARDS, run_dir, shared_dirs
from ktui.vm.guestrun import GuestFiles, OutputPump, final_status, keep_guest_log, print_output
from ktui.vm.signals import Stopped, stop_signals_raise
from ktui.vm.sweep import GUEST_FILE, sweep_stale


def run_in_vm(argv: list[str], kernel: str | None = None, workload: bool = True) -> int:
    """ARGV: a ktui command line, its command first (`run`, `stream`...)."""
    cwd = Path.cwd()
    rundir = run_dir()
    rundir.mkdir(parents=True, exist_ok=True, mode=0o700)
    writable = (rundir, *shared_dirs(cwd))
    try:
        machine = Machine.from_env(kernel, cwd=cwd, rwdirs=writable)
    except VmError as exc:
        print(f"ktui vm: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    on_console = argv[0] in DASHBOARDS
    files = GuestFiles.in_dir(rundir)
    log_dir = default_log_path().parent
    # runs killed outright (SIGKILL) left their files: their logs are kept
    sweep_stale(rundir, GUEST_FILE, lambda pid: keep_guest_log(GuestFiles.in_dir(rundir, pid), log_dir))
    pump = OutputPump(files.stdout, sys.stdout.buffer)
    try:
        with stop_signals_raise():
            side = dashboard if on_console else headless
            files.script.write_text(side.guest_script(argv, workload, cwd, files))
            files.script.chmod(0o755)
            print("ktui vm: booting a stock kernel under emulation (about 30 s)...", file=sys.stderr, flush=True)
            if on_console:
                vng_status = dashboard.run_dashboard(machine, files)
            else:
                vng_status = headless.run_headless(machine, files, pump)
            print_output(files, pump, sys.stderr, terminal=on_console)
            return final_status(files, vng_status, sys.stderr)
    except VmError as exc:
        print(f"ktui vm: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except (KeyboardInterrupt, Stopped) as stop:
        print_output(files, pump, sys.stderr, terminal=on_console)
        print("ktui vm: stopped; the VM is down", file=sys.stderr)
        return stop.status if isinstance(stop, Stopped) else EXIT_INTERRUPTED
    finally:
        keep_guest_log(files, log_dir)
        files.remove()
