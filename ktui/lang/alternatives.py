"""Probes that survive kernel upgrades: a probe may name alternatives.

Kernel functions get renamed (`__kmalloc` became `__kmalloc_noprof` in
6.10, `kmem_cache_alloc` `kmem_cache_alloc_noprof`), so a probe set written
for one kernel names nothing on the next. A probe may name several
(`function: [__kmalloc_noprof, __kmalloc]` in YAML, `__kmalloc_noprof|__kmalloc`
in a spec): the first that this kernel has is probed, and its names are
bound by that function's prototype. `Target.alternatives` keeps them all
(they print, save and compare as written); `Target.symbol` is the one in use.

`choose_alternative` is pure: what "this kernel has" is the caller's
(`has_function`: BTF, or kallsyms where there is none: `lang.bind` asks
its `Kernel`, `ktui check` asks kallsyms through `namecheck`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

from ktui.lang.model import Probe, SpecError


def choose_alternative(probe: Probe, has_function: Callable[[str], bool],
                       close: Callable[[str], Iterable[str]] | None = None) -> Probe:
    """`probe` with `target.symbol` the first of its alternatives that
    `has_function`; unchanged when it names none. None present: a
    SpecError listing them all, with `close`'s did-you-mean for the first."""
    names = probe.target.alternatives
    if not names:
        return probe
    chosen = next((name for name in names if has_function(name)), None)
    if chosen is None:
        raise SpecError(none_present(names, list(close(names[0])) if close is not None else []), col=1)
    if chosen == probe.target.symbol:
        return probe
    return dataclasses.replace(probe, target=dataclasses.replace(probe.target, symbol=chosen))


def none_present(names: tuple[str, ...] | list[str], close: list[str]) -> str:
    """The one line for alternatives of which this kernel has none."""
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return f"this kernel has none of the functions {', '.join(names)}{hint}"


def table_name(probe: Probe, matched: int = 0) -> str:
    """A probe's name in the probe table: its name, and for alternatives
    the one it runs on (`cache_alloc on kmem_cache_alloc_noprof (of 2)`);
    for a wildcard how many functions (events) it matched, `tcp_*:c (120)`:
    its bound `members`, else `matched` (what its stats say: a replay's
    probes were not bound), nothing while neither is known; and the gate
    it counts inside, `within __x64_sys_read`."""
    gate = f" within {probe.within}" if probe.within is not None else ""
    if probe.since is not None:
        gate += f" since {probe.since.spec_text}"
    if probe.target.is_wildcard:
        count = len(probe.members) if probe.members is not None else matched
        return (f"{probe.name} ({count:,})" if count else probe.name) + gate
    chosen = chosen_text(probe)
    return (f"{probe.name} on {chosen}" if chosen else probe.name) + gate


def chosen_text(probe: Probe) -> str:
    """What a probe runs on, for the probe table and the event detail:
    `kmem_cache_alloc_noprof (of 2)` for alternatives, else "" (its spec says it)."""
    target = probe.target
    if not target.alternatives:
        return ""
    return f"{target.symbol} (of {len(target.alternatives)})"
