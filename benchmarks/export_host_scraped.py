"""The compare part's export row alone, the exporter scraped from the host (issue 33).

    .venv/bin/python benchmarks/export_host_scraped.py --kernel 6.1.0-57-amd64 \
        --out bench-out/run13.json -- --workload bench-out/workload --n 1000000 --rounds 7

The scraper runs on the host (benchmarks/host_scrape.py), as `make bench`'s
does. Everything after `--` goes to vm_suite.py, which gets `--parts
warm_up,compare --compare-rows export` and the host scraper's options added.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.host_scrape import scraped_from_host  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--out", required=True, help="vm_suite.py's JSON results")
    ap.add_argument("--every", type=float, default=1.0, help="seconds between scrapes")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="-- then vm_suite.py's own arguments")
    args = ap.parse_args()
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    with scraped_from_host(ROOT, args.every) as scraping:
        suite = (shlex.join([".venv/bin/python", "benchmarks/vm_suite.py", *rest, "--out", args.out,
                             "--parts", "warm_up,compare", "--compare-rows", "export"]) + scraping.suite_args)
        proc = subprocess.run([sys.executable, "-m", "ktui.vm", "--kernel", args.kernel, "--", suite], cwd=ROOT,
                              env={**os.environ, "KTUI_VM_QEMU_OPTS": scraping.qemu_opts})
    print(f"host scraper: {scraping.scraper.summary()}", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
