"""What a compile of the generic program depends on, named without compiling.

The program cache (cache.py) keys an entry by everything bcc's output
depends on, so that an entry is exactly what a compile here would make
now. Besides the program text and the versions of ktui and bcc, that is:

- the kernel headers bcc compiles against. bcc 0.26 (frontends/clang/
  loader.cc) takes $BCC_KERNEL_SOURCE, else /lib/modules/$(uname -r)/
  source and build (Debian splits them), else build (or
  $BCC_KERNEL_MODULES_SUFFIX); without include/linux/kconfig.h there it
  unpacks the running kernel's own /sys/kernel/kheaders.tar.xz. Headers are
  known by their generated files (release, build, version, configuration),
  not by the kernel that runs: a machine that has kernel X's headers
  compiles what a machine running X compiles (build_shipped.py builds the
  shipped program this way).
- what bcc asks the running kernel: it rewrites bpf_probe_read_kernel to
  the old bpf_probe_read when /proc/kallsyms, read as root, does not show
  the symbol (frontends/clang/b_frontend_action.cc). Every kernel the
  generic engine runs on (5.15+) has it, so bcc's answer is whether this
  process sees kallsyms' addresses at all (root, and kptr_restrict or
  lockdown not hiding them).
- the environment bcc reads: ARCH, BCC_LINUX_VERSION_CODE.

The running kernel's release and build string are not inputs: nothing of
them reaches the bytecode but through its headers. The verifier judges the
rest when the program loads (a refused program is compiled afresh).
"""

from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import dataclass
from pathlib import Path

MODULES = Path("/lib/modules")
# What bcc reads from its environment: where the headers are, the
# architecture, a version code to claim (the build inputs name each)
BCC_ENV = ("BCC_KERNEL_SOURCE", "BCC_KERNEL_MODULES_SUFFIX", "ARCH", "BCC_LINUX_VERSION_CODE")
KALLSYMS = Path("/proc/kallsyms")
KHEADERS = Path("/sys/kernel/kheaders.tar.xz")
# The generated files that name one kernel build: its release, its build
# (Debian: the package version), its version code, its configuration.
IDENTITY_FILES = (
    "include/generated/utsrelease.h",
    "include/generated/utsversion.h",  # 6.0+; before, UTS_VERSION is in compile.h
    "include/generated/compile.h",
    "include/generated/uapi/linux/version.h",
    "include/generated/autoconf.h",
)
# bcc skips kallsyms addresses below this (x86-64's user half and the zeros
# kptr_restrict shows): src/cc/bcc_proc.c, kernelAddrSpace
KERNEL_ADDR_SPACE = 0x00FFFFFFFFFFFFFF
KALLSYMS_LOOK = 1 << 16  # the first text symbol comes after the per-CPU ones


@dataclass(frozen=True)
class KernelHeaders:
    """Where bcc compiles: `srctree` (clang's working directory, the
    sources) and `objtree` (the generated headers); one directory unless
    the distribution splits them."""

    srctree: Path
    objtree: Path


def find_headers(release: str | None = None, env: dict | None = None,
                 modules: Path | None = None) -> KernelHeaders | None:
    """The headers bcc would compile against on kernel RELEASE (default: the
    running one), found as bcc 0.26 finds them; None when bcc would fall back
    to the running kernel's kheaders."""
    env = os.environ if env is None else env
    source = env.get("BCC_KERNEL_SOURCE")
    if source:
        headers = KernelHeaders(Path(source), Path(source))
    else:
        kdir = (modules or MODULES) / (release or os.uname().release)
        if (kdir / "build").is_dir() and (kdir / "source").is_dir():
            headers = KernelHeaders(kdir / "source", kdir / "build")
        else:
            tree = kdir / env.get("BCC_KERNEL_MODULES_SUFFIX", "build")
            headers = KernelHeaders(tree, tree)
    if not (headers.srctree / "include/linux/kconfig.h").is_file():
        return None
    return headers


def _read(path: Path, limit: int = 1 << 20) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None


def running_kernel() -> str:
    """The running kernel, as far as it can say: for headers that only it has."""
    uname = os.uname()
    proc_version = (_read(Path("/proc/version"), 4096) or b"").decode(errors="replace").strip()
    return f"{uname.release} {uname.version} {proc_version}"


def headers_identity(headers: KernelHeaders | None) -> str:
    """One line naming the headers by their content (see IDENTITY_FILES)."""
    if headers is None:
        # bcc unpacks kheaders.tar.xz: the running kernel's own headers
        return "kheaders of " + running_kernel()
    contents = {name: _read(headers.objtree / name) for name in IDENTITY_FILES}
    if not contents[IDENTITY_FILES[0]] or not contents[IDENTITY_FILES[-1]]:
        # headers that do not name their build (no release, no configuration):
        # trusted only for the kernel that runs, where they are
        return f"unnamed headers in {headers.objtree} on " + running_kernel()
    digest = hashlib.sha256()
    for name, data in contents.items():
        digest.update(name.encode() + b"\0" + (b"-" if data is None else data) + b"\0")
    return "headers " + digest.hexdigest()


def kallsyms_addresses_visible() -> bool:
    """Would bcc find bpf_probe_read_kernel in /proc/kallsyms? It needs root
    and the addresses (all hidden or none): the first text symbol tells."""
    if os.geteuid() != 0:
        return False
    text = (_read(KALLSYMS, KALLSYMS_LOOK) or b"").decode(errors="replace")
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1] in ("T", "t"):
            try:
                return int(fields[0], 16) > KERNEL_ADDR_SPACE
            except ValueError:
                return False
    return False


def bcc_version() -> str:
    """bcc's version without importing bcc (seconds under emulation)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("bcc")
    except (ImportError, ValueError):
        return "none"
    if spec is None or not spec.origin:
        return "none"
    return (_read(Path(spec.origin).parent / "version.py", 4096) or b"").decode(errors="replace").strip()


@dataclass(frozen=True)
class BuildInputs:
    """Everything besides the program text and ktui's version that a compile
    of the generic program here depends on (the module's doc)."""

    bcc: str
    arch: str
    headers: str
    probe_read: str  # "kernel", or "compat" (bcc's bpf_probe_read fallback)
    version_code: str  # $BCC_LINUX_VERSION_CODE, bcc's override ("" unset)

    def lines(self) -> list[str]:
        return [f"bcc {self.bcc}", f"arch {self.arch}", self.headers, f"probe-read {self.probe_read}",
                f"version-code {self.version_code}"]


def here(env: dict | None = None) -> BuildInputs:
    """The inputs of a compile in this process, on this machine."""
    env = os.environ if env is None else env
    return BuildInputs(
        bcc=bcc_version(),
        arch=env.get("ARCH") or platform.machine(),
        headers=headers_identity(find_headers(env=env)),
        probe_read="kernel" if kallsyms_addresses_visible() else "compat",
        version_code=env.get("BCC_LINUX_VERSION_CODE", ""),
    )
