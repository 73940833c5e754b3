"""A small C program with functions and USDT probe points, built with gcc
in a test's folder, for the host tests that list a file (the browser's
binary and USDT places). gcc and sys/sdt.h are on the host and in CI
(scripts/install.sh), so there is no skip: a missing gcc fails loudly."""

from __future__ import annotations

import subprocess
from pathlib import Path

SOURCE = r"""
#include <stdio.h>
#include <sys/sdt.h>

__attribute__((noinline)) long shop_add(long a, long b)
{
    STAP_PROBE2(shop, added, a, b);
    return a + b;
}

__attribute__((noinline)) int shop_list(const char *name)
{
    STAP_PROBE1(shop, listed, name);
    return puts(name);
}

int main(int argc, char **argv)
{
    STAP_PROBE(shop, start);
    return (int)shop_add(argc, 2) + shop_list(argv[0]);
}
"""


def build_shop(where: Path) -> Path:
    """`where/shop`: functions shop_add, shop_list, main (and puts, an
    import); USDT probes shop:added (2 arguments), shop:listed (1) and
    shop:start (none)."""
    source = where / "shop.c"
    source.write_text(SOURCE)
    out = where / "shop"
    subprocess.run(["gcc", "-O1", "-o", str(out), str(source)], check=True, capture_output=True)
    return out
