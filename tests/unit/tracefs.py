"""Tracepoint formats on the host: the real `format` files of Debian's
6.1.0-57-amd64 and 6.12.118+deb12-amd64 kernels, laid out as tracefs lays
them out (tests/unit/data/tracepoints/KERNEL/events/CATEGORY/NAME/format),
17 events each: syscalls/sys_{enter,exit}_{openat,read}, sched/{sched_process_exec,
sched_switch,sched_wakeup}, kmem/{kmalloc,kmem_cache_alloc,mm_page_alloc},
block/block_rq_{issue,complete}, irq/irq_handler_entry, net/netif_receive_skb,
skb/kfree_skb, tcp/tcp_probe, writeback/writeback_dirty_inode."""

from __future__ import annotations

from pathlib import Path

from ktui.lang.tracepoints import TracepointFormat, parse_format, read_format

DATA = Path(__file__).resolve().parent / "data" / "tracepoints"
KERNELS = ("6.1", "6.12")


def tracefs(kernel: str) -> Path:
    """The fixture tracefs root of one kernel."""
    return DATA / kernel


def fixture_format(kernel: str, tracepoint: str) -> TracepointFormat:
    return parse_format((DATA / kernel / "events" / tracepoint / "format").read_text())


class FormatsKernel:
    """`bind.Kernel` with no BTF and one kernel's fixture formats."""

    def __init__(self, kernel: str = "6.12") -> None:
        self.root = tracefs(kernel)
        self.asked: list[str] = []

    def problem(self) -> str | None:
        return "no BTF here"

    def prototype(self, function: str):
        raise AssertionError(f"a tracepoint probe asked BTF for {function}")

    def tracepoint_format(self, tracepoint: str) -> TracepointFormat:
        self.asked.append(tracepoint)
        category, _, name = tracepoint.partition("/")
        return read_format(category, name, self.root)
