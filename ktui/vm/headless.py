"""`ktui vm` for the headless commands (stream, record, check, compile,
list): ktui runs in the guest with its stdout and stderr in the run's files,
and the host copies stdout as it grows, so `ktui vm stream ... | jq .`
gets the NDJSON intact, while it is produced.

The VM runs without the host terminal (its console goes to the run's
console file), so a Ctrl-C reaches only `ktui vm`: the first one asks the
guest to stop ktui (the run's stop file; the guest sends ktui SIGINT, so
stream and record end as they do on Ctrl-C, with their summary), a second
one stops the VM.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from ktui.vm.boot import Machine, host_env, stop_process_group
from ktui.vm.guest import ktui_argv, setup_lines
from ktui.vm.guestrun import GuestFiles, OutputPump

POLL_S = 0.2  # how often the host copies stdout and the guest looks for the stop file


def guest_script(argv: list[str], workload: bool, cwd: Path, files: GuestFiles) -> str:
    q = {name: shlex.quote(str(getattr(files, name))) for name in ("stdout", "stderr", "status", "stop")}
    return "\n".join([
        "#!/bin/bash",
        *setup_lines(cwd, workload),
        # job control: a background job that does not ignore SIGINT
        "set -m",
        f"{shlex.join(ktui_argv(argv, files))} > {q['stdout']} 2> {q['stderr']} < /dev/null &",
        "ktui=$!",
        "while kill -0 $ktui 2>/dev/null; do",
        f"    if [ -e {q['stop']} ]; then rm -f {q['stop']}; kill -INT $ktui; fi",
        f"    sleep {POLL_S}",
        "done",
        "wait $ktui",
        f"echo $? > {q['status']}",
        "",
    ])


def run_headless(machine: Machine, files: GuestFiles, pump: OutputPump) -> int:
    """vng's status, once the VM is down; meanwhile PUMP copies ktui's
    stdout. A second Ctrl-C takes the VM down and is raised on."""
    args = [*machine.vng_args(), "--", f"bash {shlex.quote(str(files.script))}"]
    with open(files.console, "wb") as console:
        proc = subprocess.Popen(args, cwd=machine.cwd, env=host_env(), stdin=subprocess.DEVNULL,
                                stdout=console, stderr=subprocess.STDOUT, start_new_session=True)
        asked_to_stop = False
        try:
            while True:
                try:
                    return proc.wait(timeout=POLL_S)
                except subprocess.TimeoutExpired:
                    pump.pump()
                except KeyboardInterrupt:
                    if asked_to_stop:
                        raise
                    asked_to_stop = True
                    files.stop.touch()
                    print("\nktui vm: stopping ktui in the VM (Ctrl-C again stops the VM)",
                          file=sys.stderr, flush=True)
        except BaseException:
            stop_process_group(proc)
            raise
