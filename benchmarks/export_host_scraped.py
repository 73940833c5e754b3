"""The compare part's export row, the exporter scraped from the host (issue 33).

    .venv/bin/python benchmarks/export_host_scraped.py --kernel 6.1.0-57-amd64 \
        --out bench-out/run13.json -- --workload bench-out/workload --n 1000000 --rounds 5

Until run 12 the benchmark's scraper ran in the guest, on the same emulated
CPU as the workload (QEMU's single-threaded TCG): its thread took about
10 ms a scrape, the exporter 1-3 ms, so the row measured the scraper as
much as the exporter. A real Prometheus runs elsewhere. Here the scraper
runs on the host and reaches the guest's exporter through QEMU's user
network (a hostfwd to the guest's 10.0.2.15): what the workload pays is
the exporter's share alone (its map read, its HTTP answer, the NIC's
interrupts). The scraper rewrites its summary in a status file under
.vmout/ after every scrape; the guest (vm_suite.HostScraperView) reads it
to know the exporter is being scraped before its rounds, and how often.

Everything after `--` goes to vm_suite.py, which gets `--parts
warm_up,compare --compare-rows export --export-scraped-from host` and the
status file's path added.
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.vm_suite import Scraper  # noqa: E402
from ktui.vm.boot import DEFAULT_QEMU_OPTS  # noqa: E402

GUEST_PORT = 19436


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--out", required=True, help="vm_suite.py's JSON results")
    ap.add_argument("--every", type=float, default=1.0, help="seconds between scrapes")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="-- then vm_suite.py's own arguments")
    args = ap.parse_args()
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest

    root = Path(__file__).resolve().parent.parent
    status = root / ".vmout" / "host-scraper.json"
    status.parent.mkdir(exist_ok=True)
    status.unlink(missing_ok=True)
    host_port = free_port()
    # the guest's NIC on QEMU's user network; the host's port forwarded to
    # the exporter's (only the scraped exporters listen on the NIC)
    qemu = (f"{os.environ.get('KTUI_VM_QEMU_OPTS', DEFAULT_QEMU_OPTS)} "
            f"-netdev user,id=bench0,hostfwd=tcp:127.0.0.1:{host_port}-10.0.2.15:{GUEST_PORT} "
            f"-device virtio-net-pci,netdev=bench0")
    scraper = Scraper(f"http://127.0.0.1:{host_port}/metrics", every=args.every, status=status)
    scraper.start()
    suite = [".venv/bin/python", "benchmarks/vm_suite.py", *rest, "--out", args.out,
             "--parts", "warm_up,compare", "--compare-rows", "export", "--export-scraped-from", "host",
             "--export-port", str(GUEST_PORT), "--host-scraper-status", str(status.relative_to(root))]
    try:
        return subprocess.run([sys.executable, "-m", "ktui.vm", "--kernel", args.kernel, "--",
                               shlex.join(suite)], cwd=root,
                              env={**os.environ, "KTUI_VM_QEMU_OPTS": qemu}).returncode
    finally:
        scraper.stop()
        print(f"host scraper: {scraper.summary()}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
