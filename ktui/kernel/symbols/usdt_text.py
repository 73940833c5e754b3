"""`ktui list --usdt PATH`: a file's USDT probe points, one line each,
with each argument's place as its note writes it and how ktui reads it:

    ktui:tick        a1=s32 (-4@%edi)  a2=s64 (-8@%rsi)  a3=u64 (8@%rdx)
    ktui:twice       a1=s64 (-8@%rdi)  2 sites: a1 differs
    ktui:konst       a1=s32 const (-4@$5)  a2=s32 (-4@%eax)  semaphore

An argument ktui cannot read says why (`a2=not read: an indexed place
...`); a probe inlined in several places says how many sites it has, and
which arguments differ between them (a probe cannot read those).
"""

from __future__ import annotations

from ktui.kernel.symbols.usdt import UsdtProbe
from ktui.kernel.symbols.usdt_args import ArgSpec


def probe_groups(probes: tuple[UsdtProbe, ...]) -> dict[str, list[UsdtProbe]]:
    """Sites by `provider:name`, in file order."""
    groups: dict[str, list[UsdtProbe]] = {}
    for probe in probes:
        groups.setdefault(probe.full_name, []).append(probe)
    return groups


def arg_words(arg: ArgSpec) -> str:
    if arg.expr is None:
        return f"not read: {arg.problem} ({arg.text})"
    return f"{arg.type}{' const' if arg.is_constant else ''} ({arg.text})"


def differing(sites: list[UsdtProbe]) -> list[str]:
    """The arguments (`a2`) whose place differs between sites."""
    count = max(len(s.args) for s in sites)
    return [f"a{i + 1}" for i in range(count)
            if len({s.args[i].text if i < len(s.args) else "" for s in sites}) > 1]


def usdt_lines(probes: tuple[UsdtProbe, ...]) -> str:
    groups = probe_groups(probes)
    width = max((len(name) for name in groups), default=0)
    out = []
    for name, sites in groups.items():
        words = [f"a{i}={arg_words(a)}" for i, a in enumerate(sites[0].args, 1)] or ["no arguments"]
        if len(sites) > 1:
            odd = differing(sites)
            words.append(f"{len(sites)} sites" + (f": {', '.join(odd)} differ{'s' if len(odd) == 1 else ''}"
                                                  if odd else ""))
        if sites[0].semaphore:
            words.append("semaphore")
        out.append(f"{name.ljust(width)}  {'  '.join(words)}")
    return "".join(line + "\n" for line in out)


def usdt_data(path: str, probes: tuple[UsdtProbe, ...]) -> dict:
    """`--json`: one entry per probe point with its sites' argument places."""
    entries = []
    for name, sites in probe_groups(probes).items():
        entries.append({
            "provider": sites[0].provider, "name": sites[0].name, "sites": len(sites),
            "semaphore": bool(sites[0].semaphore), "differing": differing(sites),
            "args": [{"spec": a.text, "type": a.type if a.expr is not None else None,
                      "constant": a.is_constant, "problem": a.problem or None} for a in sites[0].args],
        })
    return {"path": path, "usdt": entries}
