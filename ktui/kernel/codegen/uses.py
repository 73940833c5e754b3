"""What a probe's fetches and filter refer to (its arguments, comm)."""

from __future__ import annotations

from ktui.lang.model import And, Arg, Deref, Field, Not, Or, Probe

ARG_NAMES = ("a1", "a2", "a3", "a4", "a5", "a6")


def _uses(probe: Probe, pred) -> bool:
    """Whether a fetch expression or a filter field satisfies `pred`."""
    def walk_expr(expr) -> bool:
        if isinstance(expr, Deref):
            return walk_expr(expr.inner)
        return pred(expr)

    if any(walk_expr(f.expr) for f in probe.fetches):
        return True

    def walk_filter(node) -> bool:
        if node is None:
            return False
        if isinstance(node, (And, Or)):
            return walk_filter(node.left) or walk_filter(node.right)
        if isinstance(node, Not):
            return walk_filter(node.operand)
        return any(isinstance(o, Field) and pred(o) for o in (node.left, node.right))

    return walk_filter(probe.filter)


def uses_args(probe: Probe) -> bool:
    fetch_names = {f.name for f in probe.fetches}

    def is_arg(x) -> bool:
        if isinstance(x, Arg):
            return True
        return isinstance(x, Field) and x.name in ARG_NAMES and x.name not in fetch_names

    return _uses(probe, is_arg)


def filter_uses_comm(probe: Probe) -> bool:
    return _uses(probe, lambda x: isinstance(x, Field) and x.name == "comm")

