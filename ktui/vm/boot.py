"""Boot a stock Debian kernel in a throwaway VM and run something in it as root.

Our build and CI machines run a kernel without kprobes (and locked down), so
everything that touches the kernel runs here: virtme-ng (`vng`) boots
Debian's kernel under software emulation (TCG; nested KVM hangs on these
hosts) with the host's root filesystem shared read-only and a few
directories writable. The guest runs the very interpreter that runs this
module, its bin/ first on PATH: whichever venv ktui is installed in (a
checkout's .venv, a user's own) is the one inside, with the host's bcc and
kernel headers beside it.

The one place that boots the VM, for `ktui vm` (vm/launch.py: the
dashboard on the guest console, or a headless command) and for `python -m ktui.vm` (scripts/vm.sh,
the Makefile's kernel tests, the benchmarks: a command whose output and exit
status come back to the host).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ktui.exits import EXIT_ENVIRONMENT
from ktui.vm.sweep import RUN_FILE, sweep_stale

# Single-threaded TCG by default (KTUI_VM_QEMU_OPTS overrides; set it empty
# for QEMU's multi-threaded TCG). Under multi-threaded TCG, putting a kprobe
# on vfs_read while the other vCPU ran it oopsed the guest (an instruction
# fetch at 0 from vfs_read+5, then RCU stalls) in 3 of 4 benchmark startups:
# the patched text was not seen the same way by both vCPUs. One host thread
# running both vCPUs in turn has not crashed since, and ran the kernel suite
# faster (3.5 min instead of 4.4).
DEFAULT_QEMU_OPTS = "-accel tcg,thread=single"
DEFAULT_TIMEOUT_S = 2400  # KTUI_VM_TIMEOUT: a whole kernel suite, with room
# KTUI_VM_BOOT_TIMEOUT: a guest whose command has not started by then is
# booted once more, a safety net: a guest that sits idle from its start
# would otherwise hold the run for KTUI_VM_TIMEOUT. The cause seen so far (a
# command past the kernel command line's 2048 bytes, CI on 2026-12-01) is
# fixed in run_command; a boot takes 1-3 minutes under TCG, even with two
# guests side by side.
DEFAULT_BOOT_TIMEOUT_S = 600
BOOT_ATTEMPTS = 2
MAIN_SERIES = "6.1"  # Debian bookworm's stock kernel
BOOT = Path("/boot")  # the kernel images
MODULES = Path("/lib/modules")  # their headers (bcc compiles against them)
CONSOLE_TAIL_LINES = 40


class VmError(Exception):
    """The VM cannot be started here; str() is one line for the user."""


def interpreter_bin() -> Path:
    """The bin/ folder of the Python running ktui (not resolved: a venv's
    bin/python is a symlink to the system's, and the venv is what counts)."""
    return Path(sys.executable).parent


def newest_kernel(series: str = MAIN_SERIES) -> str | None:
    """The newest installed stock kernel of a series, e.g. 6.1.0-57-amd64."""
    def version_key(name: str) -> list[int | str]:
        return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]

    versions = [p.name.removeprefix("vmlinuz-") for p in BOOT.glob(f"vmlinuz-{series}.*-amd64")]
    return max(versions, key=version_key) if versions else None


def default_kernel() -> str | None:
    """The kernel `ktui vm` boots when none is named, if its image is here."""
    kernel = os.environ.get("KTUI_VM_KERNEL") or newest_kernel()
    return kernel if kernel and (BOOT / f"vmlinuz-{kernel}").exists() else None


@dataclass(frozen=True)
class Machine:
    """One throwaway VM: which kernel, where the guest starts, what it may write."""

    kernel: str
    cwd: Path
    rwdirs: tuple[Path, ...]
    qemu_opts: str | None = DEFAULT_QEMU_OPTS  # None: QEMU's own choice
    verbose: bool = False  # the guest kernel's messages (lockups, stalls) on the console
    memory: str = "3G"
    cpus: int = 2

    @classmethod
    def from_env(cls, kernel: str | None, cwd: Path, rwdirs: tuple[Path, ...]) -> Machine:
        """The machine the KTUI_VM_* variables ask for (see scripts/vm.sh)."""
        kernel = kernel or os.environ.get("KTUI_VM_KERNEL") or newest_kernel()
        if not kernel or not (BOOT / f"vmlinuz-{kernel}").exists():
            raise VmError(f"no kernel image {BOOT}/vmlinuz-{kernel or '?'} (run scripts/install.sh --test)")
        if not (MODULES / kernel / "build").is_dir():
            raise VmError(f"headers for {kernel} missing (apt-get install linux-headers-{kernel})")
        opts = os.environ.get("KTUI_VM_QEMU_OPTS", DEFAULT_QEMU_OPTS)  # set but empty: none
        cpus = os.environ.get("KTUI_VM_CPUS", "2")
        if not cpus.isdigit() or int(cpus) < 1:
            raise VmError(f"KTUI_VM_CPUS={cpus!r}: a number of CPUs, 1 or more")
        return cls(kernel=kernel, cwd=cwd, rwdirs=rwdirs, qemu_opts=opts or None,
                   verbose=os.environ.get("KTUI_VM_VERBOSE", "0") == "1", cpus=int(cpus))

    def vng_args(self) -> list[str]:
        """vng and its options, up to (not including) what runs inside."""
        vng = shutil.which("vng", path=host_env()["PATH"])
        if vng is None:
            raise VmError("vng missing (run scripts/install.sh --test)")
        args = [vng]
        if self.verbose:
            args.append("-v")
        if self.qemu_opts:
            args.append(f"--qemu-opts={self.qemu_opts}")
        args += ["-r", str(BOOT / f"vmlinuz-{self.kernel}"), "--disable-kvm", "--memory", self.memory,
                 "--cpus", str(self.cpus)]
        for d in self.rwdirs:
            args += ["--rwdir", str(d)]
        return args


def host_env() -> dict[str, str]:
    """The environment vng runs in: the interpreter's bin/ first on PATH, for
    vng itself and for the virtme-run it starts by name."""
    return {**os.environ, "PATH": f"{interpreter_bin()}{os.pathsep}{os.environ.get('PATH', '')}"}


def guest_prelude(cwd: Path) -> str:
    """Shell lines every guest run starts with: where, which Python, debugfs."""
    return "; ".join([
        f"cd {shlex.quote(str(cwd))}",
        "mount -t debugfs none /sys/kernel/debug 2>/dev/null",
        f"export PATH={shlex.quote(str(interpreter_bin()))}:$PATH",
    ])


def run_shell(machine: Machine, script: Path) -> int:
    """Interactive: SCRIPT runs as the guest's shell, on the guest console,
    in the host terminal (its size and TERM)."""
    return subprocess.call([*machine.vng_args(), "--shell", str(script)], cwd=machine.cwd, env=host_env())


@dataclass(frozen=True)
class RunFiles:
    """Where one run's output, exit status and console log go: a folder the
    guest can write (the guest's console is noisy, so the command's own
    output goes to a file, printed once the VM is down)."""

    output: Path
    status: Path
    console: Path
    script: Path  # the command itself: the kernel's command line has room for 2047 bytes

    @classmethod
    def in_dir(cls, rundir: Path) -> RunFiles:
        rundir.mkdir(parents=True, exist_ok=True)
        tag = os.getpid()
        return cls(rundir / f"guest-{tag}.log", rundir / f"rc-{tag}", rundir / f"console-{tag}.log",
                   rundir / f"cmd-{tag}.sh")


def run_command(machine: Machine, command: str, rundir: Path,
                timeout: float | None = None, env: dict[str, str] | None = None) -> int:
    """Run COMMAND (a shell command line) in the guest, with ENV exported,
    print its output (stdout and stderr, merged) and return its exit
    status. When the guest does not finish (a crash, a hang past the
    timeout), the tail of the console log goes to stderr and the status is 3."""
    timeout = timeout if timeout is not None else float(os.environ.get("KTUI_VM_TIMEOUT", DEFAULT_TIMEOUT_S))
    files = RunFiles.in_dir(rundir)
    sweep_stale(rundir, RUN_FILE)  # what runs killed outright left
    files.status.unlink(missing_ok=True)
    # vng passes the guest's command on the kernel command line (virtme.exec,
    # base64), which x86 cuts at COMMAND_LINE_SIZE (2048): a long command (CI's
    # 6.12 pytest line with its --deselects, 2235 bytes) left the guest idle
    # before it ever ran. So the command goes in a file and the line stays short.
    exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in (env or {}).items())
    files.script.write_text(exports + command + "\n")
    inner = (f"{guest_prelude(machine.cwd)}; bash {shlex.quote(str(files.script))} "
             f"> {shlex.quote(str(files.output))} 2>&1; echo $? > {shlex.quote(str(files.status))}")
    boot_timeout = float(os.environ.get("KTUI_VM_BOOT_TIMEOUT", DEFAULT_BOOT_TIMEOUT_S))
    try:  # the run's files go on every way out (a Ctrl-C left them in .vmout/)
        for attempt in range(1, BOOT_ATTEMPTS + 1):
            files.output.unlink(missing_ok=True)
            vng_rc = _wait_for_vm([*machine.vng_args(), "--", inner], machine.cwd, files.console, timeout,
                                  started=files.output, boot_timeout=boot_timeout)
            if vng_rc != BOOT_STUCK:
                break
            again = "booting it again" if attempt < BOOT_ATTEMPTS else "giving up"
            print(f"vm: the guest had not started the command after {boot_timeout:g} s "
                  f"(KTUI_VM_BOOT_TIMEOUT); {again}", file=sys.stderr, flush=True)
        if files.output.exists():
            sys.stdout.buffer.write(files.output.read_bytes())
            sys.stdout.flush()
        if not files.status.exists():
            print(f"vm: the guest did not finish (vng exit {vng_rc}); console log:", file=sys.stderr)
            lines = files.console.read_text(errors="replace").splitlines()
            print("\n".join(lines[-CONSOLE_TAIL_LINES:]), file=sys.stderr)
            return EXIT_ENVIRONMENT  # the VM could not run it: 3, as scripts/vm.sh always said
        return int(files.status.read_text().strip() or EXIT_ENVIRONMENT)
    finally:
        for f in (files.status, files.output, files.console, files.script):
            f.unlink(missing_ok=True)


BOOT_STUCK = -1  # _wait_for_vm: the command never started (not an exit status)


def _wait_for_vm(args: list[str], cwd: Path, console: Path, timeout: float, *,
                 started: Path | None = None, boot_timeout: float = float("inf")) -> int:
    """vng's exit status; the VM is taken down whole (vng, virtme-run and
    QEMU share a process group of their own) on a timeout or a Ctrl-C, or
    when STARTED (a file the guest creates as its command starts) is not
    there after BOOT_TIMEOUT: then BOOT_STUCK."""
    t0 = time.monotonic()
    with open(console, "ab") as log:
        proc = subprocess.Popen(args, cwd=cwd, env=host_env(), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while True:
                elapsed = time.monotonic() - t0
                watching = started is not None and not started.exists()
                step = min(timeout, boot_timeout if watching else timeout) - elapsed
                try:
                    return proc.wait(timeout=max(0.0, min(step, 2.0) if watching else step))
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - t0
                    if watching and elapsed >= boot_timeout and not started.exists():
                        stop_process_group(proc)
                        return BOOT_STUCK
                    if elapsed >= timeout:
                        raise
        except subprocess.TimeoutExpired:
            print(f"vm: no result after {timeout:g} s (KTUI_VM_TIMEOUT); stopping the VM", file=sys.stderr)
            stop_process_group(proc)
            return 124  # what timeout(1) reports
        except BaseException:
            stop_process_group(proc)
            raise


def stop_process_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group PROC leads (vng, virtme-run, QEMU), then
    SIGKILL if it is still there after 10 s."""
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
