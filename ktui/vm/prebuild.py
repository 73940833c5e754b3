"""Compile the generic program on the host for the VM's kernel, before it boots.

Under emulation a compile takes minutes (both variants: 2-4 under TCG);
on the host, seconds. bcc compiles against /lib/modules/$(uname -r)/build
(and source): in a private mount namespace, where those name the guest
kernel's headers, the host's compile is the guest's, and the program
cache's key names the headers, not the kernel that runs
(kernel/generic/build_inputs.py). So the host compiles into the cache the
guest's ktui reads (XDG_CACHE_HOME in the guest), and the guest starts
from it: every session of a kernel test run, and a `ktui vm` first start.

It needs root (a mount namespace; bcc creates maps as it compiles) and the
guest kernel's headers; without them, or if the compile fails, the guest
compiles as it always did: the reason comes back as one line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ktui.kernel.generic.build_inputs import BCC_ENV, MODULES, find_headers
from ktui.vm import boot

TIMEOUT_S = 600  # a compile takes seconds; a loaded CI host, more
# In the namespace: a tmpfs over /lib/modules holding only the running
# kernel's name, its build (and source, where the headers are split) the
# guest kernel's headers, resolved before the tmpfs hides them; then the
# compile.
_IN_NAMESPACE = ('mount -t tmpfs ktui-prebuild "$1" && d="$1/$(uname -r)" && mkdir "$d" && '
                 'ln -s "$2" "$d/build" && { [ "$3" = "$2" ] || ln -s "$3" "$d/source"; } && '
                 'shift 3 && exec "$@"')


def prebuild(kernel: str, cache_home: Path) -> tuple[bool, str]:
    """Compile both variants for KERNEL into the program cache under
    CACHE_HOME (an XDG_CACHE_HOME: the cache is its ktui/). (done, one line
    saying what happened or why not)."""
    if os.geteuid() != 0:
        return False, "not root (a mount namespace and bcc's maps need it)"
    unshare = shutil.which("unshare")
    if unshare is None:
        return False, "no unshare(1)"
    # as the guest finds them: nothing of the host's environment goes in
    headers = find_headers(kernel, env={}, modules=boot.MODULES)
    if headers is None:
        return False, f"no headers for {kernel} in {boot.MODULES / kernel}"
    env = {k: v for k, v in os.environ.items() if k not in BCC_ENV}
    args = [unshare, "--mount", "--propagation", "private", "sh", "-c", _IN_NAMESPACE, "sh", str(MODULES), str(headers.objtree.resolve()), str(headers.srctree.resolve()),
            sys.executable, "-m", "ktui.kernel.generic.prebuild", str(cache_home / "ktui")]
    started = time.monotonic()
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S,
                             stdin=subprocess.DEVNULL, env=env)
    except subprocess.TimeoutExpired:
        return False, f"no answer after {TIMEOUT_S} s"
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
        return False, why
    said = ", ".join(out.stdout.split("\n")).strip(", ")
    return True, f"{said} ({time.monotonic() - started:.1f} s)"
