"""Where each probe's target is written in a probe set file.

Checks made after loading (a function name the running kernel does not
have) must point at the name in the file, as every other error does. The
probe set is composed again, with the same bounded reader, and the n-th
entry of `probes:` gives the line and column of its compact spec or of its
`function:` value. A position is None where the text is not verbatim in the
file (escapes, folded scalars): the error then points at the probe's entry.
"""

from __future__ import annotations

import os

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ktui.lang.yamlnodes import compose, content_offset, decode_utf8, read_bounded


def target_positions(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """(line, column), 1-based, of each probe's target, in file order. Call
    it on a file that loaded: it does not report errors of its own."""
    source = os.fspath(path)
    root = compose(decode_utf8(read_bounded(source), source), source)
    if not isinstance(root, MappingNode):
        return []
    probes = next((v for k, v in root.value if isinstance(k, ScalarNode) and k.value == "probes"), None)
    if not isinstance(probes, SequenceNode):
        return []
    return [_position(item) for item in probes.value]


def _position(item: Node) -> tuple[int, int]:
    node = item
    if isinstance(item, MappingNode):
        for key, value in item.value:
            if isinstance(key, ScalarNode) and key.value in ("spec", "function", "address"):
                node = value
                break
    line, col = node.start_mark.line + 1, node.start_mark.column + 1
    if isinstance(node, ScalarNode):
        offset = content_offset(node)
        if offset is not None:
            col += offset + len(node.value) - len(node.value.lstrip())
    return line, col
