"""What keeps a probe off fentry/fexit, as far as its text says.

fentry/fexit programs get the function's arguments as an array of u64 (the
trampoline saved them), not the registers: a probe that reads a register,
or sits at an offset or a raw address (no BTF function there), needs an
int3 kprobe. The kernel's own reasons (no BTF, too many arguments, the BTF
deny list, a module function) are the kernel layer's (kernel/attach/attach_choice).
`attach: fentry` on a probe with one of these reasons is an error when the
probe set is read; with `auto` the probe goes by kprobe. A wildcard
(`tcp_*`) always goes by kprobe: one kprobe_multi link, or one kprobe per
function where the kernel has no kprobe_multi. A user function
(`PATH:FUNCTION`) never goes by fentry: it is a uprobe whatever is said.
"""

from __future__ import annotations

from ktui.lang import names
from ktui.lang.wildcards import NO_FENTRY
from ktui.lang.model import ATTACH_MODES, Compare, Deref, Field, FilterExpr, Named, Not, Probe, Reg, SpecError

__all__ = ["ATTACH_MODES", "effective_mode", "text_obstacle"]


def text_obstacle(probe: Probe) -> str:
    """Why the probe's text needs a kprobe ("" when nothing does)."""
    target = probe.target
    if target.is_user:
        return "a user function is probed by a uprobe: fentry is for kernel functions"
    if target.address is not None:
        return "an address has no BTF function to attach fentry to"
    if target.is_wildcard:
        return NO_FENTRY
    if target.offset:
        return "fentry attaches at a function's entry, not at an offset"
    for fetch in probe.fetches:
        reg = _register(fetch.expr)
        if reg is not None:
            return f"it reads register {fetch.expr}: fentry sees arguments, not registers"
    if probe.filter is not None:
        for name in _filter_names(probe.filter):
            try:
                resolved = names.resolve(probe, name)
            except (SpecError, names.UnknownName):
                continue  # an unknown name is the checks' to report
            if _register(resolved.expr) is not None:
                return f"its filter reads register {name}: fentry sees arguments, not registers"
    return ""


def effective_mode(probe: Probe, set_mode: str, default: str) -> str:
    """The probe's own `attach:`, else its set's, else `default`."""
    return probe.attach or set_mode or default


def _register(expr) -> Reg | None:
    while isinstance(expr, Deref):
        expr = expr.inner
    if isinstance(expr, Named):
        return None  # a parameter: read from the argument array under fentry
    return expr if isinstance(expr, Reg) else None


def _filter_names(node: FilterExpr):
    if isinstance(node, Compare):
        for operand in (node.left, node.right):
            if isinstance(operand, Field):
                yield operand.name
    elif isinstance(node, Not):
        yield from _filter_names(node.operand)
    else:
        yield from _filter_names(node.left)
        yield from _filter_names(node.right)
