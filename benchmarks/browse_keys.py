"""The host half of the browser's speed goal: keystroke -> updated list
under 100 ms with ~60,000 functions (issue 12). No kernel.

    python -m benchmarks.browse_keys --names 60000

Synthetic kernel-like names (subsystem prefix, a few words, some compiler
copies), seeded, so every run ranks the same list. Queries are typed one
key at a time, as a user does (each search narrows the last), starting
from an empty field each time; the worst case is the first letter (most
names match). Two measurements per keystroke:

  matcher  Matcher.search alone (ktui/screens/browse_match.py)
  handler  the BrowserScreen's own work per key, in Textual's headless
           driver (140x40): rank, refill the list, show the first row's
           prototype and choices, rebuild the spec line
  screen   pilot.press + one pause, key to painted screen; this includes
           the harness's own floor, measured the same way on a plain Input
           of the dashboard (`floor`): the browser's cost is screen - floor

Prints one JSON object: p50/p99/max ms for each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time

from ktui.kernel.symbols.catalog import Entry
from ktui.screens.browse_match import Matcher
from ktui.screens.browse_model import FunctionIndex, Functions

QUERIES = ("vfs_read", "tcp_sendmsg", "ext4_file_write_iter", "kmalloc", "sched", "xfsbuf",
           "do_sys_open", "zz", "e", "skb_cl")
SUBSYSTEMS = ("vfs", "tcp", "udp", "ext4", "xfs", "btrfs", "sched", "mm", "kmem", "skb", "net",
              "bpf", "do", "sys", "__x64_sys", "ip", "nf", "drm", "usb", "pci", "acpi", "blk", "io")
WORDS = ("read", "write", "open", "close", "alloc", "free", "init", "exit", "lock", "unlock",
         "get", "put", "send", "recv", "msg", "file", "iter", "page", "buf", "queue", "work",
         "timer", "map", "unmap", "state", "create", "destroy", "update", "check", "find")


def synthetic_names(count: int, seed: int = 12) -> list[str]:
    rnd = random.Random(seed)
    names: set[str] = {"vfs_read", "tcp_sendmsg", "ext4_file_write_iter", "kmalloc"}
    while len(names) < count:
        words = [rnd.choice(SUBSYSTEMS)] + rnd.sample(WORDS, rnd.randint(1, 3))
        name = "_".join(words)
        r = rnd.random()
        if r < 0.02:
            name += f".constprop.{rnd.randint(0, 3)}"
        elif r < 0.03:
            name += f".isra.{rnd.randint(0, 2)}"
        elif r < 0.3:
            name += f"_{rnd.randint(0, 999)}"
        names.add(name)
    return sorted(names)


def stats(ms: list[float]) -> dict:
    ms = sorted(ms)
    return {"p50_ms": ms[len(ms) // 2], "p99_ms": ms[min(len(ms) - 1, int(len(ms) * 0.99))],
            "max_ms": ms[-1], "keys": len(ms)}


def matcher_keys(names: list[str], rounds: int) -> dict:
    times = []
    for _ in range(rounds):
        m = Matcher(names)  # a fresh matcher: no narrowing carried over between rounds
        for q in QUERIES:
            for i in range(1, len(q) + 1):
                t = time.perf_counter()
                m.search(q[:i])
                times.append((time.perf_counter() - t) * 1000)
    return stats(times)


async def screen_keys(names: list[str]) -> dict:
    from ktui.screens.browser import BrowserScreen
    from tests.ui.conftest import make_app

    entries = [Entry(n, "traceable", "", f"{n}(int x) -> int", "", "", 1) for n in names]
    index = FunctionIndex.of(Functions(entries, None, (), "no BTF (synthetic names)"))
    app = make_app(functions=index)
    times, handler, floor = [], [], []
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await pilot.press("slash")  # the event filter: a plain Input
        for ch in "abcdefghijklmnop":
            t = time.perf_counter()
            await pilot.press(ch)
            await pilot.pause()
            floor.append((time.perf_counter() - t) * 1000)
        await pilot.press("escape", "escape", "b")
        while not isinstance(app.screen, BrowserScreen) or app.screen.functions is None:
            await pilot.pause(0.01)
        screen = app.screen
        search = screen.search

        def timed(query: str) -> None:
            t = time.perf_counter()
            search(query)
            handler.append((time.perf_counter() - t) * 1000)

        screen.search = timed  # type: ignore[method-assign]
        query = screen.query_one("#query")
        for q in QUERIES:
            for ch in q:
                t = time.perf_counter()
                await pilot.press(ch)
                await pilot.pause()
                times.append((time.perf_counter() - t) * 1000)
            query.value = ""
            await pilot.pause()
    handler = handler[: len(times) + len(QUERIES)]
    return {"handler": stats(handler), "screen": stats(times), "floor": stats(floor)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--names", type=int, default=60000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    names = synthetic_names(args.names)
    out = {"names": len(names), "matcher": matcher_keys(names, args.rounds),
           **asyncio.run(screen_keys(names))}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
