"""What a probe on a user function (a uprobe, `PATH:FUNCTION:c`) may say
that a kernel probe's rules do not already decide.

A user function has no BTF here (ktui reads the kernel's, not a binary's
DWARF), so its values are positional: a1..a6 (the SysV registers), other
registers, retval, the builtins and `+OFF(...)` reads, which the kernel
side makes from user memory. What belongs to kernel functions is refused
in one line: parameters by name, `errno:` (a user function returns no
kernel errno), `maxactive:` (the kernel has none for uretprobes: it
follows a task's user returns up to a fixed depth) and a probe's own
`attach: kprobe|fentry` (a uprobe is neither; a set-wide `attach:` does
not apply to it). Where the file and its symbols are read:
`ktui.kernel.symbols.uprobe_target`.
"""

from __future__ import annotations

from ktui.lang.model import Aggregate, Kind, Probe, SpecError, has_names

USER_NO_BTF = "a user function has no BTF here: use a1..a6, registers, retval"
USER_ERRNO = "errno: a user function returns no kernel errno (leave errno: out)"
USER_MAXACTIVE = ("maxactive: a user return probe has none (the kernel follows a task's user returns "
                  "itself, up to a fixed depth); leave maxactive: out")


USDT_MAXACTIVE = "maxactive: a USDT probe has no return to follow; leave maxactive: out"


def user_attach_problem(mode: str, what: str = "a user function") -> str:
    """Why a probe's own `attach: MODE` cannot apply to a user function
    (or `what` else of a user file) ("": it can)."""
    if mode in ("kprobe", "fentry"):
        return (f"attach: {mode} is for kernel functions; {what} attaches as a uprobe "
                "(leave attach: out)")
    return ""


def check_user_options(probe: Probe) -> None:
    """The options and aggregations of a user probe (its fetches are
    checked with their columns by `checks.check_probe`)."""
    if probe.errno and probe.kind is Kind.RETURN:
        raise SpecError(USER_ERRNO)
    usdt = probe.kind is Kind.USDT
    if probe.maxactive:
        raise SpecError(USDT_MAXACTIVE if usdt else USER_MAXACTIVE)
    problem = user_attach_problem(probe.attach, "a USDT probe" if usdt else "a user function")
    if problem:
        raise SpecError(problem)
    if probe.agg is not None:
        check_user_aggregate(probe.agg)


def check_user_aggregate(agg: Aggregate) -> None:
    for what, fetches in (("hist", (agg.hist,)), ("sum", (agg.sum,)), ("count", agg.keys), ("hist", agg.hist_keys)):
        for fetch in fetches:
            if fetch is not None and has_names(fetch.expr):
                raise SpecError(f"{what}: {fetch}: {USER_NO_BTF}")
