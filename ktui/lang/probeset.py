"""YAML probe sets: load and validate them, save them back.

A probe set file looks like this (see probesets/ for real ones):

    name: vfs
    description: File reads and writes
    filter: {pid: 1234, comm: nginx}     # optional, applied in the kernel
    probes:
      - spec: vfs_read:c:a3              # compact form, as on the command line
        label: read_size                 # optional, unique within the set
        filter: a3 > 4096                # optional filter expression
        enabled: true                    # optional (default true)
        sample: 10                       # optional: emit 1 event in N
        rate_limit: 1000                 # optional: max events/s per CPU
      - function: vfs_write              # long form: function or address,
        kind: return                     # kind, and a list of fetches
        fetch: [retval:s64]

A bare string in `probes:` is taken as a compact spec. An optional key set to
null means "not set".

Loading is hostile-input safe: only ever a `ProbeSetError` whose str() is
`file:line:col: message`, in bounded time and memory. That is why the YAML is
composed into a node tree (with the safe loader, aliases refused and nesting
bounded) and never constructed into Python objects by PyYAML: walking the
nodes ourselves keeps every position, catches the duplicate keys PyYAML would
silently merge, and lets no tag pick a constructor.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from typing import Callable, NoReturn

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ktui.lang import limits
from ktui.lang.filters import parse_filter
from ktui.lang.model import Kind, Probe, ProbeSet, ProbeSetError, SpecError, Target
from ktui.lang.numbers import parse_int
from ktui.lang.spec import parse_fetch, parse_spec, parse_target, validate_probe
from ktui.lang.yamlnodes import (
    BOOL,
    BOOL_WORDS,
    INT,
    MAP,
    MAX_FILE_BYTES,
    NULL,
    SEQ,
    STR,
    TAG,
    compose,
    content_offset,
    decode_utf8,
    describe,
    fail_at,
    read_bounded,
    too_big,
)

TOP_KEYS = ("name", "description", "filter", "probes")
SET_FILTER_KEYS = ("pid", "comm")
PROBE_KEYS = (
    "spec", "function", "address", "kind", "fetch",
    "label", "filter", "enabled", "sample", "rate_limit",
)
KIND_WORDS = {
    "c": Kind.CALL, "call": Kind.CALL, "kprobe": Kind.CALL,
    "r": Kind.RETURN, "return": Kind.RETURN, "kretprobe": Kind.RETURN,
}



# ---------------------------------------------------------------- loading


def load_probeset(path: str | os.PathLike[str]) -> ProbeSet:
    """Load and validate the probe set in the file `path`."""
    source = os.fspath(path)
    return loads_probeset(read_bounded(source), source=source)


def loads_probeset(text: str | bytes, source: str = "<string>") -> ProbeSet:
    """Load and validate a probe set from YAML text (str, or bytes in UTF-8)."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = decode_utf8(bytes(text), source)
    if not isinstance(text, str):
        raise TypeError(f"loads_probeset takes str or bytes, not {type(text).__name__}")
    if len(text) > MAX_FILE_BYTES:
        raise ProbeSetError(too_big(len(text)), source=source, line=1, col=1)
    root = compose(text, source)
    return _SetReader(source).read(root)


class _SetReader:
    """Walks one composed document into a ProbeSet, failing at the first error."""

    def __init__(self, source: str) -> None:
        self.source = source

    # -- errors

    def fail(self, node: Node, message: str, prefix: str = "") -> NoReturn:
        fail_at(self.source, node.start_mark, prefix + message)

    def fail_inside(self, node: ScalarNode, err: SpecError, prefix: str, offset: int = 0) -> NoReturn:
        """A SpecError from parsing this scalar's text (from `offset` on):
        point at the exact character when the file has the text verbatim."""
        content = content_offset(node)
        if content is None or err.col is None:
            self.fail(node, err.message, prefix)
        fail_at(self.source, node.start_mark, prefix + err.message, content + offset + err.col - 1)

    # -- typed scalars

    def check_tag(self, node: Node, prefix: str) -> None:
        if node.tag.startswith(TAG) and node.tag[len(TAG):] in (
            "str", "int", "bool", "null", "float", "timestamp", "map", "seq", "binary",
            "set", "omap", "pairs", "merge", "value",
        ):
            return
        self.fail(node, f"unsupported YAML tag {node.tag.replace(TAG, '!!')}", prefix)

    def scalar(self, node: Node, what: str, prefix: str, expected: str = "a string") -> ScalarNode:
        self.check_tag(node, prefix)
        if not isinstance(node, ScalarNode) or node.tag in (TAG + "binary", TAG + "timestamp"):
            self.fail(node, f"{what}: expected {expected}, got {describe(node)}", prefix)
        return node

    def string(self, node: Node, what: str, prefix: str) -> str:
        scalar = self.scalar(node, what, prefix)
        if scalar.tag != STR:
            hint = f' (quote it: "{scalar.value}")' if len(scalar.value) < 40 else ""
            self.fail(node, f"{what}: expected a string, got {describe(node)}{hint}", prefix)
        return scalar.value

    def line_string(self, node: Node, what: str, prefix: str, check: Callable[[str], None]) -> str:
        """A name or a label, checked by one of the `limits` checks (the
        same ones the command line and the dialog use)."""
        value = self.string(node, what, prefix)
        try:
            check(value)
        except SpecError as err:
            self.fail_inside(node, err, f"{prefix}{what}: ")  # type: ignore[arg-type]
        return value

    def integer(self, node: Node, what: str, prefix: str, low: int, high: int) -> int:
        scalar = self.scalar(node, what, prefix, "an integer")
        if scalar.tag != INT:
            self.fail(node, f"{what}: expected an integer, got {describe(node)}", prefix)
        value = parse_int(scalar.value, yaml=True)
        if value is None:
            self.fail(node, f"{what}: cannot read {scalar.value[:40]!r} as an integer", prefix)
        if not low <= value <= high:
            self.fail(node, limits.out_of_range(what, value, low, high), prefix)
        return value

    def boolean(self, node: Node, what: str, prefix: str) -> bool:
        scalar = self.scalar(node, what, prefix, "true or false")
        value = BOOL_WORDS.get(scalar.value.lower()) if scalar.tag == BOOL else None
        if value is None:
            self.fail(node, f"{what}: expected true or false, got {describe(node)}", prefix)
        return value

    @staticmethod
    def is_null(node: Node) -> bool:
        return isinstance(node, ScalarNode) and node.tag == NULL

    # -- mappings

    def mapping(self, node: Node, allowed: tuple[str, ...], what: str,
                prefix: str) -> dict[str, tuple[Node, Node]]:
        """The (key node, value node) pairs of a mapping, by key text.
        Duplicate and unknown keys are errors (PyYAML would keep the last)."""
        self.check_tag(node, prefix)
        if not isinstance(node, MappingNode) or node.tag != MAP:
            self.fail(node, f"{what}: expected a mapping, got {describe(node)}", prefix)
        items: dict[str, tuple[Node, Node]] = {}
        for key_node, value_node in node.value:
            self.check_tag(key_node, prefix)
            if not isinstance(key_node, ScalarNode):
                self.fail(key_node, f"{what}: keys must be plain words, got {describe(key_node)}", prefix)
            key = key_node.value
            if key in items:
                first = items[key][0].start_mark.line + 1
                self.fail(key_node, f"duplicate key '{key}' (first given on line {first})", prefix)
            if key not in allowed:
                self.fail(key_node, _unknown_key(key, allowed), prefix)
            items[key] = (key_node, value_node)
        return items

    # -- the document

    def read(self, root: Node | None) -> ProbeSet:
        if root is None:
            fail_at(self.source, None, "empty probe set: expected a mapping with name: and probes:")
        if not isinstance(root, MappingNode):
            self.check_tag(root, "")
            self.fail(root, f"a probe set is a mapping with name: and probes:, got {describe(root)}")
        items = self.mapping(root, TOP_KEYS, "probe set", "")
        for required in ("name", "probes"):
            if required not in items:
                self.fail(root, f"missing key '{required}'" + (
                    ": a probe set needs at least one probe" if required == "probes" else ""))
        name = self.line_string(items["name"][1], "name", "", limits.check_set_name)
        description = ""
        if "description" in items and not self.is_null(items["description"][1]):
            description = self.string(items["description"][1], "description", "")
        pid = comm = None
        if "filter" in items and not self.is_null(items["filter"][1]):
            pid, comm = self.set_filter(items["filter"][1])
        probes = self.probes(items["probes"][1])
        return ProbeSet(name=name, description=description, probes=probes,
                        pid=pid, comm=comm, source=self.source)

    def set_filter(self, node: Node) -> tuple[int | None, str | None]:
        items = self.mapping(node, SET_FILTER_KEYS, "filter", "")
        pid = comm = None
        if "pid" in items and not self.is_null(items["pid"][1]):
            pid = self.integer(items["pid"][1], "filter.pid", "", limits.PID_MIN, limits.PID_MAX)
        if "comm" in items and not self.is_null(items["comm"][1]):
            comm = self.line_string(items["comm"][1], "filter.comm", "", limits.check_comm)
        return pid, comm

    def probes(self, node: Node) -> tuple[Probe, ...]:
        self.check_tag(node, "")
        if not isinstance(node, SequenceNode) or node.tag != SEQ:
            self.fail(node, f"probes: expected a list, got {describe(node)}")
        if not node.value:
            self.fail(node, "a probe set needs at least one probe")
        probes: list[Probe] = []
        first_use: dict[str, int] = {}
        for number, item in enumerate(node.value, start=1):
            probe, name_node = self.probe(item, number)
            if probe.name in first_use:
                self.fail(name_node, f"label '{probe.name}' is already used by probe "
                          f"{first_use[probe.name]}; labels must be unique in a set",
                          _probe_prefix(number, item))
            first_use[probe.name] = number
            probes.append(probe)
        return tuple(probes)

    # -- one probe

    def probe(self, node: Node, number: int) -> tuple[Probe, Node]:
        """The probe and the node that gives its name (for duplicate labels)."""
        prefix = _probe_prefix(number, node)
        if isinstance(node, ScalarNode) and node.tag == STR:
            return self.finish(self.compact(node, prefix), {}, prefix, node), node
        items = self.mapping(node, PROBE_KEYS, "probe", prefix)
        forms = [key for key in ("spec", "function", "address") if key in items]
        if not forms:
            self.fail(node, "a probe needs one of spec:, function: or address:", prefix)
        if len(forms) > 1:
            self.fail(items[forms[1]][0], f"give only one of spec:, function: or address: "
                      f"(this probe has {forms[0]}: and {forms[1]}:)", prefix)
        if forms[0] == "spec":
            for long_only in ("kind", "fetch"):
                if long_only in items:
                    self.fail(items[long_only][0], f"{long_only}: belongs to the long form "
                              "(function: or address:); with spec: write it in the spec", prefix)
            where = items["spec"][1]
            probe = self.compact(self.scalar_string(where, "spec", prefix), prefix)
            if probe.label is not None and "label" in items and not self.is_null(items["label"][1]):
                self.fail(items["label"][0], f'label: the spec already labels this probe "{probe.label}"; '
                          "give the label once", prefix)
        else:
            where = items[forms[0]][1]
            probe = self.long_form(items, forms[0], prefix)
        name_node = items["label"][1] if "label" in items else where
        return self.finish(probe, items, prefix, where), name_node

    def scalar_string(self, node: Node, what: str, prefix: str) -> ScalarNode:
        self.string(node, what, prefix)
        return node  # type: ignore[return-value]  # string() checked it is a scalar

    def compact(self, node: ScalarNode, prefix: str) -> Probe:
        try:
            return parse_spec(node.value)
        except SpecError as err:
            self.fail_inside(node, err, prefix + "spec: ")

    def long_form(self, items: dict[str, tuple[Node, Node]], form: str, prefix: str) -> Probe:
        target = self.target(items[form][1], form, prefix)
        kind = Kind.CALL
        if "kind" in items and not self.is_null(items["kind"][1]):
            kind_node = items["kind"][1]
            word = self.string(kind_node, "kind", prefix)
            if word.strip().lower() not in KIND_WORDS:
                self.fail(kind_node, f"kind: unknown kind {word!r}; use one of "
                          + ", ".join(KIND_WORDS), prefix)
            kind = KIND_WORDS[word.strip().lower()]
        fetches = ()
        if "fetch" in items and not self.is_null(items["fetch"][1]):
            fetches = self.fetches(items["fetch"][1], prefix)
        return Probe(target=target, kind=kind, fetches=fetches)

    def target(self, node: Node, form: str, prefix: str) -> Target:
        scalar = self.scalar(node, form, prefix, "an address" if form == "address" else "a string")
        if form == "address" and scalar.tag == INT:
            value = self.integer(node, "address", prefix, 1, 2**64 - 1)
            try:
                target = parse_target(f"0x{value:x}")
            except SpecError as err:
                self.fail(node, f"address: {err.message}", prefix)
        else:
            text = self.string(node, form, prefix)
            try:
                target = parse_target(text)
            except SpecError as err:
                self.fail_inside(scalar, err, prefix + f"{form}: ")
        if form == "address" and target.address is None:
            self.fail(node, "address: expected a kernel address such as 0xffffffff81234560 "
                      "(use function: for a symbol)", prefix)
        if form == "function" and target.address is not None:
            self.fail(node, "function: expected a symbol such as vfs_read "
                      "(use address: for an address)", prefix)
        return target

    def fetches(self, node: Node, prefix: str) -> tuple:
        """`fetch:` is a list of fetch strings, or one string of them split by commas."""
        if isinstance(node, ScalarNode):
            scalar = self.scalar_string(node, "fetch", prefix)
            return tuple(self.fetch(scalar, piece, start, prefix)
                         for piece, start in _split_fetches(scalar.value))
        self.check_tag(node, prefix)
        if not isinstance(node, SequenceNode) or node.tag != SEQ:
            self.fail(node, f"fetch: expected a list of strings, got {describe(node)}", prefix)
        result = []
        for item in node.value:
            scalar = self.scalar_string(item, "fetch", prefix)
            result.append(self.fetch(scalar, scalar.value, 0, prefix))
        return tuple(result)

    def fetch(self, node: ScalarNode, text: str, start: int, prefix: str):
        try:
            return parse_fetch(text)
        except SpecError as err:
            self.fail_inside(node, err, prefix + "fetch: ", start)

    def finish(self, probe: Probe, items: dict[str, tuple[Node, Node]],
               prefix: str, target_node: Node) -> Probe:
        """Fill in what follows the target, then let the spec layer validate it."""
        changes: dict[str, object] = {}
        filter_node = None
        for key, (_, value_node) in items.items():
            if self.is_null(value_node) or key not in ("label", "filter", "enabled", "sample", "rate_limit"):
                continue
            if key == "label":
                changes["label"] = self.line_string(value_node, "label", prefix, limits.check_probe_label)
            elif key == "filter":
                filter_node = self.scalar_string(value_node, "filter", prefix)
                changes["filter"] = self.probe_filter(filter_node, prefix)
            elif key == "enabled":
                changes["enabled"] = self.boolean(value_node, "enabled", prefix)
            else:
                changes[key] = self.integer(value_node, key, prefix, limits.COUNT_MIN, limits.COUNT_MAX)
        probe = dataclasses.replace(probe, **changes)
        try:
            validate_probe(probe, filter_text=None if filter_node is None else filter_node.value)
        except SpecError as err:
            self.fail_validation(err, probe, items, prefix, target_node, filter_node)
        return probe

    def fail_validation(self, err: SpecError, probe: Probe, items: dict[str, tuple[Node, Node]],
                        prefix: str, target_node: Node, filter_node: ScalarNode | None) -> NoReturn:
        """Locate a validate_probe error. Its column points into the filter
        text (message `filter: ...`) or into the canonical spec text, which
        is in the file only when the user wrote the compact form verbatim."""
        if filter_node is not None and err.message.startswith("filter:"):
            # The message already says "filter:".
            self.fail_inside(filter_node, err, prefix)
        written = target_node.value if isinstance(target_node, ScalarNode) else None
        if written in (probe.spec_text, str(probe)) and ("spec" in items or not items):
            # the columns count in spec_text; a label written before it shifts them
            shift = len(written) - len(probe.spec_text)
            self.fail_inside(target_node, err, prefix + "spec: ", shift)  # type: ignore[arg-type]
        if "fetch" in items and ("fetch" in err.message or "retval" in err.message):
            self.fail(items["fetch"][1], err.message, prefix + "fetch: ")
        if "kind" in items and "return probe" in err.message:
            self.fail(items["kind"][1], err.message, prefix + "kind: ")
        self.fail(target_node, err.message, prefix)

    def probe_filter(self, scalar: ScalarNode, prefix: str):
        if not scalar.value.strip():
            self.fail(scalar, "filter: must not be empty (leave the key out for no filter)", prefix)
        try:
            return parse_filter(scalar.value)
        except SpecError as err:
            self.fail_inside(scalar, err, prefix + "filter: ")


def _probe_prefix(number: int, node: Node) -> str:
    """`probe 2 (vfs_read:c:a3): `, naming it by what the user wrote."""
    name = None
    if isinstance(node, ScalarNode):
        name = node.value
    elif isinstance(node, MappingNode):
        found = {}
        for key_node, value_node in node.value:
            if isinstance(key_node, ScalarNode) and isinstance(value_node, ScalarNode):
                found.setdefault(key_node.value, value_node.value)
        name = next((found[k] for k in ("spec", "function", "address", "label") if found.get(k)), None)
    if name is not None:
        name = name if len(name) <= 48 else name[:45] + "..."
        return f"probe {number} ({name}): "
    return f"probe {number}: "


def _unknown_key(key: str, allowed: tuple[str, ...]) -> str:
    shown = key if len(key) <= 40 else key[:37] + "..."
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.7)
    if close:
        return f"unknown key '{shown}' (did you mean '{close[0]}'?)"
    return f"unknown key '{shown}'; expected one of: " + ", ".join(allowed)


def _split_fetches(text: str) -> list[tuple[str, int]]:
    """Split `a1, +0(a2):string` at top-level commas: (piece, offset in text)."""
    pieces, depth, start = [], 0, 0
    for index, char in enumerate(text + ","):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth <= 0:
            piece = text[start:index]
            stripped = piece.lstrip()
            pieces.append((stripped.rstrip(), start + len(piece) - len(stripped)))
            start = index + 1
    return pieces
