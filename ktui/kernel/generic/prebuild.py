"""Compile the generic program ahead of time, into a program cache.

    python -m ktui.kernel.generic.prebuild CACHE_DIR

Both variants (kprobe and fentry/fexit) of today's program text, compiled
for the kernel headers bcc finds here (build_inputs.py) and stored in the
program cache at CACHE_DIR under the key a ktui using those headers looks
for; an entry already there is kept. Nothing is loaded into the kernel
(bcc creates its maps while it compiles, then frees them).

A compile takes seconds on a real CPU and minutes under emulation, so the
test rig runs this on the host for the VM's kernel before it boots
(ktui/vm/prebuild.py), and the guest's ktui starts from the cache. One
line per variant on stdout: `kprobe cache` or `kprobe compiled 1.8`
(seconds); the compiler's complaints go to stderr.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ktui.exits import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE
from ktui.kernel.generic.cache import ProgramCache
from ktui.kernel.generic.loader import compiled_variant

VARIANTS = (("kprobe", False), ("tracing", True))


def prebuild(cache: ProgramCache, log_fd: int) -> list[str]:
    """Each variant's line (see the module's doc)."""
    lines = []
    for name, tracing in VARIANTS:
        started = time.monotonic()
        # the kernel it is for is not this one: its features cannot be
        # probed here, and every kernel ktui is tested on has the helpers
        _, source = compiled_variant(log_fd, cache=cache, tracing=tracing, func_arg_helpers=True)
        took = f" {time.monotonic() - started:.1f}" if source == "compiled" else ""
        lines.append(f"{name} {source}{took}")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return EXIT_USAGE
    errors: list[str] = []
    cache = ProgramCache(Path(argv[0]), log=errors.append)
    try:
        lines = prebuild(cache, 2)
    except Exception as exc:  # noqa: BLE001 - one line for the caller, who compiles in the guest instead
        print(f"ktui: prebuild: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    for line in errors:
        print(line, file=sys.stderr)
    print("\n".join(lines))
    return EXIT_OK if not errors else EXIT_RUNTIME


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
