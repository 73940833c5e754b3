"""Before/after of `host_dash` on a shared machine: runs alternate, medians.

    git archive <before-commit> | tar -x -C /tmp/before
    .venv/bin/python -m benchmarks.host_dash_ab --before /tmp/before --rounds 3 --seconds 20

Each round runs `flood --rate 100000` and the idle case (`flood --rate 0`,
which a tree from before the `idle` mode also understands) in the `before`
tree and in this one, back to back, with this venv (the tree's own `ktui`
is imported: its directory comes first on sys.path). Prints every run, then
the median of each figure over the rounds. Load from other processes moves
all figures; only before/after within one invocation compare.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

FIELDS = ("key_ms_median", "key_ms_p95", "key_ms_max", "key_idle_ms_median", "cpu_share", "keys")


def run(tree: str, rate: int, seconds: float) -> dict:
    out = subprocess.run([sys.executable, "-m", "benchmarks.host_dash", "flood", "--rate", str(rate),
                          "--seconds", str(seconds)], cwd=tree, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {k: round(result[k], 1) for k in FIELDS}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, help="a checkout of the commit to compare with")
    ap.add_argument("--after", default=str(Path(__file__).resolve().parent.parent), help="default: this tree")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=20)
    args = ap.parse_args()
    runs: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        for mode, rate in (("flood", 100_000), ("idle", 0)):
            for name, tree in (("before", args.before), ("after", args.after)):
                row = run(tree, rate, args.seconds)
                print(r, mode, name, json.dumps(row), flush=True)
                runs.setdefault((mode, name), []).append(row)
    print("medians over", args.rounds, "rounds")
    for (mode, name), rows in runs.items():
        print(mode, name, json.dumps({k: round(statistics.median(x[k] for x in rows), 1) for k in FIELDS}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
