"""Build the shipped generic program (shipped.py), or check it: a developer's tool.

    python -m ktui.kernel.generic.build_shipped [--check] [--kernel RELEASE]

Compiles every variant with bcc against the headers of kernel RELEASE
(default: the newest Debian 6.1 in /lib/modules, the oldest kernel ktui
supports) and writes ktui/kernel/generic/shipped/, or with --check
compares what it compiles with what is there (map-fd immediates zeroed:
shipped.py) and fails on any difference. scripts/build-generic.sh runs it.

bcc compiles against /lib/modules/$(uname -r)/build (and source: Debian
splits them; $BCC_KERNEL_SOURCE takes one tree only). So the compile runs
in a private mount namespace where those name RELEASE's headers: a tmpfs
over /lib/modules holding only the running kernel's name, whose build and
source are links to RELEASE's. It needs root (the namespace, and bcc
creates maps as it compiles) and that bcc find bpf_probe_read_kernel in
/proc/kallsyms (else it rewrites the helper to the old bpf_probe_read).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ktui.exits import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE
from ktui.kernel.generic import build_inputs
from ktui.kernel.generic.build_inputs import BCC_ENV, MODULES, find_headers
from ktui.kernel.generic.shipped import SUFFIX, VARIANTS, encode_shipped, shipped_dir

IN_NAMESPACE = "KTUI_BUILD_SHIPPED_NS"
_MOUNT = ('mount -t tmpfs ktui-build "$1" && d="$1/$(uname -r)" && mkdir "$d" && '
          'ln -s "$2" "$d/build" && { [ "$3" = "$2" ] || ln -s "$3" "$d/source"; } && '
          'shift 3 && exec "$@"')
BUILT_WITH = "built-with.txt"


def default_kernel(modules: Path = MODULES) -> str | None:
    """The newest 6.1 kernel whose headers are installed."""
    releases = [p.name for p in modules.glob("6.1.*") if (p / "build").is_dir()]
    return max(releases, key=lambda r: [int(x) if x.isdigit() else 0 for x in r.replace("-", ".").split(".")],
               default=None)


def compile_all(log_fd: int) -> dict[str, bytes]:
    """Each variant's shipped file name and bytes, compiled here."""
    from ktui.kernel.generic.loader import compile_program, program_text

    out = {}
    for name, kind, helpers in VARIANTS:
        text = program_text(kind, func_arg_helpers=helpers)
        out[name + SUFFIX] = encode_shipped(text, compile_program(text, log_fd))
    return out


def built_with(kernel: str) -> str:
    inputs = build_inputs.here()
    bcc = inputs.bcc.split("=")[-1].strip().strip("'\"")  # bcc's version.py: __version__ = '0.26.0'
    return (f"# what scripts/build-generic.sh compiled the objects here with\n"
            f"kernel headers {kernel}\nbcc {bcc}\narch {inputs.arch}\n")


def in_namespace(args: list[str], kernel: str) -> int:
    """Run this module again, with ARGS, where /lib/modules names KERNEL's headers."""
    headers = find_headers(kernel, env={})
    if headers is None:
        print(f"build_shipped: no headers for {kernel} in {MODULES / kernel}", file=sys.stderr)
        return EXIT_RUNTIME
    env = {k: v for k, v in os.environ.items() if k not in BCC_ENV}
    env[IN_NAMESPACE] = kernel
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", _MOUNT, "sh", str(MODULES),
               str(headers.objtree.resolve()), str(headers.srctree.resolve()),
               sys.executable, "-m", "ktui.kernel.generic.build_shipped", *args]
    return subprocess.run(command, env=env, stdin=subprocess.DEVNULL).returncode


def main(argv: list[str]) -> int:
    check = "--check" in argv
    rest = [a for a in argv if a != "--check"]
    kernel = os.environ.get(IN_NAMESPACE)
    if rest[:1] == ["--kernel"] and len(rest) == 2:
        kernel = kernel or rest[1]
    elif rest:
        print(__doc__.strip(), file=sys.stderr)
        return EXIT_USAGE
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        print("build_shipped: needs root and unshare(1)", file=sys.stderr)
        return EXIT_RUNTIME
    if IN_NAMESPACE not in os.environ:
        kernel = kernel or default_kernel()
        if kernel is None:
            print(f"build_shipped: no 6.1 kernel headers in {MODULES} (apt install linux-headers-amd64)",
                  file=sys.stderr)
            return EXIT_RUNTIME
        return in_namespace(argv, kernel)
    if not build_inputs.kallsyms_addresses_visible():
        print("build_shipped: /proc/kallsyms shows no addresses here: bcc would compile "
              "bpf_probe_read_kernel as the old bpf_probe_read", file=sys.stderr)
        return EXIT_RUNTIME
    try:
        built = compile_all(2)
    except Exception as exc:  # noqa: BLE001 - bcc raises bare Exception; one line for the developer
        print(f"build_shipped: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    directory = shipped_dir()
    if check:
        differ = [name for name, data in built.items()
                  if not (directory / name).is_file() or (directory / name).read_bytes() != data]
        if differ:
            print(f"build_shipped: {', '.join(differ)} in {directory} differ from a build of today's "
                  "program text: run scripts/build-generic.sh", file=sys.stderr)
            return EXIT_RUNTIME
        print(f"build_shipped: {len(built)} objects in {directory} are today's build")
        return EXIT_OK
    directory.mkdir(exist_ok=True)
    for stale in directory.glob("*" + SUFFIX):
        stale.unlink()
    for name, data in built.items():
        (directory / name).write_bytes(data)
    (directory / BUILT_WITH).write_text(built_with(kernel))
    print(f"build_shipped: {len(built)} objects written to {directory}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
