"""What a probe's fetches and filter refer to (its arguments, comm).

Filter names are resolved by `ktui.lang.names.resolve`, as everywhere."""

from __future__ import annotations

from ktui.lang.model import And, Arg, Deref, Field, Not, Or, Probe, SpecError, positional
from ktui.lang.names import Resolved, resolve


def _uses(probe: Probe, fetch_pred, name_pred) -> bool:
    """Whether a fetch expression satisfies `fetch_pred`, or a filter name
    resolves (in this probe) to something that satisfies `name_pred`."""
    def walk_expr(expr) -> bool:
        if isinstance(expr, Deref):
            return walk_expr(expr.inner)
        return fetch_pred(expr)

    aggregated = probe.agg.fetches() if probe.agg is not None else ()
    if any(walk_expr(positional(f.expr)) for f in probe.fetches + aggregated):
        return True

    def resolves(operand) -> bool:
        if not isinstance(operand, Field):
            return False
        try:
            return name_pred(resolve(probe, operand.name))
        except SpecError:  # not a valid filter: codegen refuses it where it is compiled
            return False

    def walk_filter(node) -> bool:
        if node is None:
            return False
        if isinstance(node, (And, Or)):
            return walk_filter(node.left) or walk_filter(node.right)
        if isinstance(node, Not):
            return walk_filter(node.operand)
        return resolves(node.left) or resolves(node.right)

    return walk_filter(probe.filter)


def uses_args(probe: Probe) -> bool:
    """A fetch reads an argument, or a filter name is one (not a fetch of that name)."""
    def is_arg(ref: Resolved) -> bool:
        return ref.fetch_index is None and isinstance(ref.expr, Arg)

    return _uses(probe, lambda expr: isinstance(expr, Arg), is_arg)


def filter_uses_comm(probe: Probe) -> bool:
    return _uses(probe, lambda expr: False, lambda ref: ref.is_comm)
