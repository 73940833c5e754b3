"""Where each probe's target is written in a probe set file.

Checks made after loading (a function name the running kernel does not
have) must point at the name in the file, as every other error does. The
probe set is composed again, with the same bounded reader, and the n-th
entry of `probes:` gives the line and column of its compact spec or of its
`function:` or `tracepoint:` value (of the target itself, past a `LABEL=`). A position is
the entry's own where the text is not verbatim in the file (escapes,
folded scalars).

`probe_targets` also reads each entry's function name on its own, so that
`ktui check` can ask the kernel about it even when something else in that
probe, or in the set, has an error. A user function (`PATH:SYMBOL`) is
given apart (`user`), with no `symbol`: it is looked up in its file, never
in the kernel.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ktui.lang.grammar import Scanner, SpecSpan, scan_probe_label, scan_target
from ktui.lang.model import KtuiError, SpecError, Target
from ktui.lang.spec import parse_target
from ktui.lang.yamlnodes import compose, content_offset, decode_utf8, read_bounded


class ProbeTarget(NamedTuple):
    """One entry of `probes:`: where its target is written (1-based), the
    function it names (None: an address, or a target that does not read),
    the lines the entry spans (an error on them is this probe's), and the
    text that names it in messages (as the probe set reader's errors do).
    `user`: a user function's target (its `symbol` is then None: it is
    no kernel function), and `user_col` where its SYMBOL or 0xADDR is."""

    line: int
    col: int
    symbol: str | None
    lines: range
    written: str
    user: Target | None = None
    user_col: int | None = None
    alternatives: tuple[str, ...] = ()  # `function: [a, b]` or `a|b`: `symbol` is None then
    user_line: int | None = None  # the line of `user_col` where it is not `line` (`binary:` + `function:`)


def target_positions(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """(line, column), 1-based, of each probe's target, in file order."""
    return [(t.line, t.col) for t in probe_targets(path)]


def probe_targets(path: str | os.PathLike[str]) -> list[ProbeTarget]:
    """Each entry of `probes:`, in file order. It does not report errors of
    its own (the reader does): what does not read has no symbol, and a
    file that does not compose has no entries."""
    source = os.fspath(path)
    try:
        root = compose(decode_utf8(read_bounded(source), source), source)
    except KtuiError:  # the probe set reader reports it
        return []
    if not isinstance(root, MappingNode):
        return []
    probes = next((v for k, v in root.value if isinstance(k, ScalarNode) and k.value == "probes"), None)
    if not isinstance(probes, SequenceNode):
        return []
    starts = [item.start_mark.line + 1 for item in probes.value]
    ends = starts[1:] + [probes.end_mark.line + 2]  # an entry runs to the next one
    return [_target(item, range(start, max(end, start + 1))) for item, start, end in zip(probes.value, starts, ends)]


def _target(item: Node, lines: range) -> ProbeTarget:
    node, form, binary = item, "spec", None
    if isinstance(item, MappingNode):
        for key, value in item.value:
            if isinstance(key, ScalarNode) and key.value in ("spec", "function", "address", "tracepoint", "usdt"):
                node, form = value, key.value
                break
        binary = next((v for k, v in item.value if isinstance(k, ScalarNode) and k.value == "binary"), None)
    if isinstance(node, SequenceNode) and form == "function" and len(node.value) == 1:
        node = node.value[0]  # a list of one: that function
    line, col = node.start_mark.line + 1, node.start_mark.column + 1
    if isinstance(binary, ScalarNode) and isinstance(node, ScalarNode) and form in ("function", "address", "usdt"):
        return _binary_target(binary, node, lines)
    if isinstance(node, SequenceNode) and form == "function":
        return _alternatives(node, lines)
    if not isinstance(node, ScalarNode) or form == "address":
        return ProbeTarget(line, col, None, lines, _written(node))
    target, at, symbol_at = _target_of(node.value, form)
    offset = content_offset(node)
    verbatim = offset is not None
    if verbatim:
        col += offset + at
    if target is not None and target.is_user:
        user_col = col + (symbol_at - at) if verbatim else col
        return ProbeTarget(line, col, None, lines, _written(node), target, user_col)
    if target is not None and target.alternatives:
        return ProbeTarget(line, col, None, lines, _written(node), alternatives=target.alternatives)
    return ProbeTarget(line, col, None if target is None else target.symbol, lines, _written(node))


def _binary_target(binary: ScalarNode, node: ScalarNode, lines: range) -> ProbeTarget:
    """`binary: PATH` + `function: NAME` (or `address:`): a user function,
    at the path, its SYMBOL at the function's value."""
    line, col = binary.start_mark.line + 1, binary.start_mark.column + 1
    offset = content_offset(binary)
    col += offset or 0
    try:
        target = parse_target(f"{binary.value}:{node.value}")
    except SpecError:
        return ProbeTarget(line, col, None, lines, _written(node))
    if not target.is_user:
        return ProbeTarget(line, col, None, lines, _written(node))
    symbol_col = node.start_mark.column + 1 + (content_offset(node) or 0)
    return ProbeTarget(line, col, None, lines, _written(node), target, symbol_col,
                       user_line=node.start_mark.line + 1)


def _alternatives(node: SequenceNode, lines: range) -> ProbeTarget:
    """`function: [a, b]`: where the list is, and the names that read."""
    line, col = node.start_mark.line + 1, node.start_mark.column + 1
    names = tuple(item.value.strip() for item in node.value if isinstance(item, ScalarNode))
    written = "[" + ", ".join(names) + "]"
    return ProbeTarget(line, col, None, lines, written if len(written) <= 48 else written[:45] + "...",
                       alternatives=names)


def _written(node: Node) -> str:
    text = node.value if isinstance(node, ScalarNode) else "?"
    return text if len(text) <= 48 else text[:45] + "..."


def _target_of(text: str, form: str) -> tuple[Target | None, int, int]:
    """The target a spec (`[LABEL=]TARGET:...`) or a `function:` value
    names, where it starts in `text` and where a user function's SYMBOL
    starts (0-based; the target's start when there is none)."""
    sc, span = Scanner(text, form), SpecSpan()
    sc.skip_ws()
    start = sc.pos
    try:
        if form == "spec":
            scan_probe_label(sc, span)
        target = scan_target(sc, span)
    except SpecError:
        return None, start, start
    at = span.target - 1
    return target, at, (span.symbol - 1) if span.symbol is not None else at
