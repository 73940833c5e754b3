"""The export row's scraper on the host, as a real Prometheus would be (issue 33).

A guest's exporter is reached through QEMU's user network: a hostfwd from
a free port of the host's loopback to the guest's NIC (10.0.2.15), which
vm_suite brings up (guest_nic_up). Until run 12 the row's scraper ran in
the guest, on the one emulated CPU the workload runs on, and its thread
cost more than the exporter did. The scraper rewrites its summary in a
status file of the shared tree after each scrape; the guest
(vm_suite.HostScraperView) reads it to know the exporter is scraped
before its rounds, and how often.

    with scraped_from_host(root) as scraping:
        env["KTUI_VM_QEMU_OPTS"] = scraping.qemu_opts
        cmd += scraping.suite_args
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from benchmarks.vm_suite import Scraper
from ktui.vm.boot import DEFAULT_QEMU_OPTS

GUEST_PORT = 19436  # the scraped exporters' port on the guest's NIC


@dataclass
class HostScraping:
    qemu_opts: str  # KTUI_VM_QEMU_OPTS for the boot: the NIC and the forward
    suite_args: str  # vm_suite.py's options that go with them
    scraper: Scraper


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def scraped_from_host(root: Path, every: float = 1.0):
    status = root / ".vmout" / "host-scraper.json"
    status.parent.mkdir(exist_ok=True)
    status.unlink(missing_ok=True)
    port = _free_port()
    qemu = (f"{os.environ.get('KTUI_VM_QEMU_OPTS', DEFAULT_QEMU_OPTS)} "
            f"-netdev user,id=bench0,hostfwd=tcp:127.0.0.1:{port}-10.0.2.15:{GUEST_PORT} "
            f"-device virtio-net-pci,netdev=bench0")
    args = (f" --export-scraped-from host --export-port {GUEST_PORT}"
            f" --host-scraper-status {status.relative_to(root)}")
    scraper = Scraper(f"http://127.0.0.1:{port}/metrics", every=every, status=status)
    scraper.start()
    try:
        yield HostScraping(qemu, args, scraper)
    finally:
        scraper.stop()
