"""What the running kernel says of a probe that parses: is its function
there and probe-able, and do its names exist (BTF)? The add dialog asks
this off the UI thread as the user types, so that `vfs_raed` or
`file->f_pso` is caught before anything compiles or attaches. A user
function (`PATH:FUNCTION`) is looked up in its file instead, never among
the kernel's functions.

Plain Python (no Textual): the answers come from the same function index
the browser and the completion use, loaded once.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from ktui.btf.decode import BtfError
from ktui.kernel.symbols.ksyms import close_names
from ktui.kernel.symbols.uprobe_target import UprobeTargetError, check_probe_target
from ktui.lang import wildcards
from ktui.lang.alternatives import choose_alternative
from ktui.lang.limits import WILDCARD_MAX_MULTI
from ktui.lang.bind import bind_probe
from ktui.lang.grammar import parse_raw
from ktui.lang.kernel_names import KernelNames
from ktui.lang.model import Probe, SpecError
from ktui.screens.browse_model import FunctionIndex

log = logging.getLogger(__name__)

# Verdicts of `ktui list` a probe cannot attach with (kernel/symbols/catalog.py).
REFUSED = {
    "notrace": "is notrace (not in available_filter_functions): this kernel's kprobe events refuse it",
    "blacklisted": "is on the kernel's kprobe blacklist: it cannot be probed",
    "copy-only": "has no symbol of its own, only compiler copies: probe a copy, with positional fetches",
    "no-symbol": "has no symbol: it was inlined into its callers, or is init code already freed",
}


class KernelProblem(NamedTuple):
    field: str  # "spec" or "filter": the dialog field the column counts in
    error: SpecError
    fatal: bool = True  # False: a warning (a module not loaded yet)


class ProbeCheck:
    """`problem(probe, spec_text)` -> a KernelProblem or None. Blocking
    (it may load the index): call it from a worker thread."""

    def __init__(self, index: FunctionIndex) -> None:
        self.index = index
        self._names: KernelNames | None = None

    def problem(self, probe: Probe, spec_text: str) -> KernelProblem | None:
        if probe.target.is_user:
            return _user_function_problem(probe, spec_text)
        functions = self.index.load()
        if functions.catalog is None or not functions.entries:
            return None  # no kernel to ask (replay, or the catalog failed): the session decides
        if probe.target.alternatives:  # the one this kernel has is what is checked
            try:
                probe = choose_alternative(probe, functions.entries.__contains__,
                                           lambda name: close_names(name, set(functions.entries)))
            except SpecError as err:
                return KernelProblem("spec", SpecError(err.message, col=_target_col(spec_text)))
        symbol = probe.target.symbol
        if probe.target.is_wildcard:
            # its members are the session's to match and bind: here only whether any, and not too many
            return _pattern_problem(probe, functions, spec_text)
        if symbol is not None:
            found = self._function_problem(symbol, functions, spec_text)
            if found is not None:
                return found
        btf = functions.catalog.src.btf
        if functions.btf_problem is not None or btf is None:
            return None  # names then fail on add, with the reason
        if self._names is None:
            self._names = KernelNames(btf)
        try:
            bind_probe(probe, self._names, text=spec_text)
        except SpecError as err:
            field = "filter" if err.message.startswith("filter:") else "spec"
            return KernelProblem(field, err)
        except (BtfError, OSError) as err:
            log.warning("checking %s against BTF: %s", probe.spec_text, err)
        return None

    def _function_problem(self, symbol: str, functions, spec_text: str) -> KernelProblem | None:
        col = _target_col(spec_text)
        entry = functions.entries.get(symbol)
        if entry is None:
            close = close_names(symbol, set(functions.entries))
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            return KernelProblem("spec", SpecError(f"unknown kernel function {symbol!r}{hint}", col=col))
        why = REFUSED.get(entry.verdict)
        if why is not None:
            return KernelProblem("spec", SpecError(f"{symbol} {why}", col=col))
        if entry.verdict == "not-loaded":
            return KernelProblem("spec", SpecError(
                f"{symbol} is in module {entry.module}, which is not loaded (modprobe it first)",
                col=col), fatal=False)
        return None


def _pattern_problem(probe: Probe, functions, spec_text: str) -> KernelProblem | None:
    """A wildcard kernel function (`tcp_*`) against the functions that can
    take a kprobe (a tracepoint pattern is the session's to match): none,
    or more than one kprobe_multi link takes, is refused at the target."""
    if probe.target.tracepoint is not None or probe.target.symbol is None:
        return None
    pattern = probe.target.symbol
    names = [name for name, entry in functions.entries.items() if entry.verdict not in REFUSED]
    matched = wildcards.expand(pattern, names)
    col = _target_col(spec_text)
    if not matched:
        message = wildcards.matches_nothing(pattern, wildcards.FUNCTIONS, wildcards.close_patterns(pattern, names))
        return KernelProblem("spec", SpecError(message, col=col))
    if len(matched) > WILDCARD_MAX_MULTI:
        message = wildcards.too_many(pattern, len(matched), WILDCARD_MAX_MULTI, wildcards.FUNCTIONS, matched)
        return KernelProblem("spec", SpecError(message, col=col))
    return None


def _user_function_problem(probe: Probe, spec_text: str) -> KernelProblem | None:
    """Its file's refusal, at the path or at the function. (Notes, such as
    a library probed without --pid, are the session's to log: the dialog
    does not know the session's pid.)"""
    try:
        check_probe_target(probe, None)
    except UprobeTargetError as err:
        try:
            span = parse_raw(spec_text)[1]
            col = span.symbol if err.part == "function" and span.symbol else span.target
        except SpecError:
            col = None
        return KernelProblem("spec", SpecError(err.message, col=col))
    return None


def _target_col(spec_text: str) -> int | None:
    try:
        return parse_raw(spec_text)[1].target
    except SpecError:
        return None
