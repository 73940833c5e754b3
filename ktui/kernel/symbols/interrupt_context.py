"""Where a probe's program reads the context of a hit: the CPU's preempt
count, as the kernel's own in_interrupt()/in_serving_softirq() do.

A hit in an interrupt shows the interrupted task's pid and comm. The event
says so only where the program can read the count: x86-64's per-CPU
`__preempt_count` (to 6.1, and again from 6.15), or `preempt_count` inside
`pcpu_hot` (6.2 to 6.14; its offset there comes from BTF: the field sits in
an anonymous union). The per-CPU base is `__per_cpu_offset[cpu]`.

A kprobe hit by int3 (an offset inside a function, before the optimizer
makes it a jump) runs in x86's int3 handler, which enters the kernel as an
NMI would (`irqentry_nmi_enter`: NMI and hardirq counts raised). x86's
per-CPU `nmi_state` tells a real NMI apart: NMI_NOT_RUNNING (0) means the
NMI count is int3's own, and the program takes it off.

Addresses need root (kptr_restrict shows others zeros): without them the
context is "not known", never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

KALLSYMS = Path("/proc/kallsyms")

# one pass over the whole text (100,000+ lines: a Python loop per line
# costs seconds under emulation)
_WANTED = re.compile(r"^([0-9a-fA-F]+) [AaDdBbSsRr] (__per_cpu_offset|__preempt_count|pcpu_hot|nmi_state)$",
                     re.M)


@dataclass(frozen=True)
class ContextAddresses:
    """What the program reads a hit's context from; 0 = not known."""

    cpu_offsets: int = 0  # the address of __per_cpu_offset[]
    preempt_count: int = 0  # the per-CPU offset of the preempt count
    nmi_state: int = 0  # the per-CPU offset of x86's nmi_state
    # where the count was found, for `ktui doctor`: "__preempt_count" or "pcpu_hot"
    source: str = field(default="", compare=False)

    @property
    def known(self) -> bool:
        return bool(self.cpu_offsets and self.preempt_count)


NOT_KNOWN = ContextAddresses()


# This process's answer for the running kernel, once it is known: the
# addresses stay as they are until the machine boots again (KASLR picks them
# at boot; a module loaded later moves none of them), and /proc/kallsyms
# takes a second to read under emulation, which every session of a process
# (the exporter's reloads, a test suite's sessions) would pay again. Not
# kept on disk: kernel addresses are for root's eyes only. NOT_KNOWN is not
# kept (without root now, perhaps with it later); nor another file's answer.
_known: list[ContextAddresses] = []


def context_addresses(kallsyms: Path = KALLSYMS, btf=None) -> ContextAddresses:
    """The addresses on this kernel, or NOT_KNOWN. `btf`: a zero-argument
    callable giving vmlinux's RawBtf, asked only where the count lives in
    `pcpu_hot`."""
    running = kallsyms == KALLSYMS
    if running and _known:
        return _known[0]
    found = _read_addresses(kallsyms, btf)
    if running and found.known:
        _known.append(found)
    return found


def _read_addresses(kallsyms: Path, btf) -> ContextAddresses:
    try:
        text = kallsyms.read_text(errors="replace")
    except OSError:
        return NOT_KNOWN
    found = {name: int(addr, 16) for addr, name in _WANTED.findall(text)}
    offsets = found.get("__per_cpu_offset", 0)
    preempt, source = found.get("__preempt_count", 0), "__preempt_count"
    if not preempt and found.get("pcpu_hot") and btf is not None:
        at = _member_offset(btf, "pcpu_hot", "preempt_count")
        if at is not None:
            preempt, source = found["pcpu_hot"] + at, "pcpu_hot"
    if not (offsets and preempt):
        return NOT_KNOWN
    return ContextAddresses(offsets, preempt, found.get("nmi_state", 0), source)


def _member_offset(btf, struct: str, member: str) -> int | None:
    """The byte offset of `member` in `struct` (anonymous unions and
    structs looked through), or None where BTF cannot say."""
    from ktui.btf.access import Access
    from ktui.btf.kinds import Kind

    try:
        raw = btf()
        if raw is None:
            return None
        names = raw.offsets_of(struct)
        if not names:
            return None
        words, first = raw.words, raw.first_id
        # a name check per record first: 100,000+ records, no decode
        structs = [first + i for i, at in enumerate(raw.starts)
                   if words[at] in names and (words[at + 1] >> 24 & 31) == Kind.STRUCT]
        for type_id in structs:
            for name, bits, _m in Access(raw).members(type_id):
                if name == member and bits % 8 == 0:
                    return bits // 8
    except Exception:  # noqa: BLE001 - no context rather than no session
        return None
    return None
