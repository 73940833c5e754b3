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
import re
import stat
import tempfile
from pathlib import Path
from typing import NoReturn

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from . import chars
from .filters import parse_filter
from .model import Kind, Probe, ProbeSet, ProbeSetError, SpecError, Target
from .spec import parse_fetch, parse_spec, parse_target, validate_probe

MAX_FILE_BYTES = 1024 * 1024  # refused before parsing
MAX_DEPTH = 16  # the schema needs 4 levels; anything deeper is not a probe set
MAX_NODES = 20_000  # YAML values in one file: a large set has a few hundred
MAX_NUMBER_CHARS = 40  # enough for any 64-bit number written with underscores
MAX_NAME_CHARS = 128
MAX_LABEL_CHARS = 64
COMM_MAX_BYTES = 15  # TASK_COMM_LEN - 1
PID_MAX = 4 * 1024 * 1024  # PID_MAX_LIMIT on 64-bit kernels
COUNT_MAX = 2**32 - 1  # sample / rate_limit end up as u32 in the kernel

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

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _BOOL, _NULL, _FLOAT = (_TAG + t for t in ("str", "int", "bool", "null", "float"))
_MAP, _SEQ = _TAG + "map", _TAG + "seq"
# What a user wrote, for "expected a string, got ..." messages.
_TAG_NAMES = {
    _STR: "a string", _INT: "an integer", _BOOL: "a boolean", _NULL: "null",
    _FLOAT: "a number", _TAG + "timestamp": "a date", _TAG + "binary": "binary data",
    _MAP: "a mapping", _SEQ: "a list",
}
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_BOOL_WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}


# ---------------------------------------------------------------- loading


def load_probeset(path: str | os.PathLike[str]) -> ProbeSet:
    """Load and validate the probe set in the file `path`."""
    source = os.fspath(path)
    return loads_probeset(_read_bounded(source), source=source)


def loads_probeset(text: str | bytes, source: str = "<string>") -> ProbeSet:
    """Load and validate a probe set from YAML text (str, or bytes in UTF-8)."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = _decode(bytes(text), source)
    if not isinstance(text, str):
        raise TypeError(f"loads_probeset takes str or bytes, not {type(text).__name__}")
    if len(text) > MAX_FILE_BYTES:
        raise ProbeSetError(_too_big(len(text)), source=source, line=1, col=1)
    root = _compose(text, source)
    return _SetReader(source).read(root)


def _read_bounded(source: str) -> bytes:
    """The file's bytes, refusing anything but a regular file of at most 1 MiB.

    O_NONBLOCK keeps a FIFO from hanging us; reading one byte past the limit
    catches files that grow, and /proc-style files that report size 0."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise ProbeSetError(f"cannot open: {err.strerror}", source=source) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ProbeSetError("not a regular file", source=source)
        if info.st_size > MAX_FILE_BYTES:
            raise ProbeSetError(_too_big(info.st_size), source=source, line=1, col=1)
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as err:
        raise ProbeSetError(f"cannot read: {err.strerror}", source=source) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_FILE_BYTES:
        raise ProbeSetError(_too_big(len(data)), source=source, line=1, col=1)
    return data


def _too_big(size: int) -> str:
    return f"file too large ({size} bytes); a probe set is at most {MAX_FILE_BYTES} bytes"


def _decode(data: bytes, source: str) -> str:
    if len(data) > MAX_FILE_BYTES:
        raise ProbeSetError(_too_big(len(data)), source=source, line=1, col=1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line_start = data.rfind(b"\n", 0, err.start) + 1
        col = len(data[line_start:err.start].decode("utf-8", "replace")) + 1
        raise ProbeSetError(
            f"not UTF-8 text (byte 0x{data[err.start]:02x}); a probe set is a YAML text file",
            source=source, line=data.count(b"\n", 0, err.start) + 1, col=col,
        ) from None


class _NodeLoader(yaml.SafeLoader):
    """The safe loader, composing nodes only, refusing aliases and bounding
    depth and size.

    Aliases are refused outright (not just bounded): a probe set has no use
    for them and they are how "billion laughs" documents blow up. The node
    count bound stops a 1 MiB file of tiny values early instead of spending
    seconds composing it only to reject it."""

    def __init__(self, text: str, source: str) -> None:
        super().__init__(text)
        self.ktui_source = source
        self.ktui_depth = 0
        self.ktui_nodes = 0

    def compose_node(self, parent: Node | None, index: object) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            _fail_at(self.ktui_source, event.start_mark,
                     f"aliases (*{event.anchor}) are not allowed in a probe set")
        self.ktui_nodes += 1
        if self.ktui_nodes > MAX_NODES:
            _fail_at(self.ktui_source, self.peek_event().start_mark,
                     f"too many values (more than {MAX_NODES}); this is not a probe set")
        self.ktui_depth += 1
        try:
            if self.ktui_depth > MAX_DEPTH:
                _fail_at(self.ktui_source, self.peek_event().start_mark,
                         f"nested too deeply (more than {MAX_DEPTH} levels)")
            return super().compose_node(parent, index)
        finally:
            self.ktui_depth -= 1


def _compose(text: str, source: str) -> Node | None:
    loader = None
    try:
        loader = _NodeLoader(text, source)  # the reader checks characters here
        return loader.get_single_node()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        message = err.problem or err.context or "invalid YAML"
        if err.context and err.problem:
            message = f"{err.problem} ({err.context})"
        _fail_at(source, mark, f"YAML syntax error: {message}")
    except yaml.reader.ReaderError as err:
        line = text.count("\n", 0, err.position) + 1
        col = err.position - (text.rfind("\n", 0, err.position) + 1) + 1
        char = err.character if isinstance(err.character, int) else ord(str(err.character)[:1] or "\0")
        raise ProbeSetError(
            f"character U+{char:04X} is not allowed in YAML; a probe set is a text file",
            source=source, line=line, col=col,
        ) from None
    except yaml.YAMLError as err:
        raise ProbeSetError(_one_line(f"invalid YAML: {err}"), source=source, line=1, col=1) from None
    finally:
        if loader is not None:
            loader.dispose()


def _one_line(text: str) -> str:
    """Control characters (newlines above all) escaped: errors are one line.
    Bidi and zero-width characters too: a message quoting a key or a spec
    must not show as something else (see ktui/chars.py)."""
    text = _CONTROL_CHARS.sub(lambda match: f"\\x{ord(match.group()):02x}", text)
    return chars.escape_refused(text)


def _fail_at(source: str, mark: yaml.Mark | None, message: str, offset: int = 0) -> NoReturn:
    message = _one_line(message)
    if mark is None:
        raise ProbeSetError(message, source=source, line=1, col=1)
    raise ProbeSetError(message, source=source, line=mark.line + 1, col=mark.column + 1 + offset)


def _what(node: Node) -> str:
    if node.tag in _TAG_NAMES:
        return _TAG_NAMES[node.tag]
    if isinstance(node, MappingNode):
        return "a mapping"
    return "a list" if isinstance(node, SequenceNode) else "a value"


def _content_offset(node: ScalarNode) -> int | None:
    """Where a scalar's text starts relative to its node, or None when the
    source text is not the value verbatim (escapes, folding, block style), so
    a column inside the value cannot be mapped to a column in the file."""
    start, end = node.start_mark, node.end_mark
    if start.buffer is None or start.line != end.line:
        return None
    raw = start.buffer[start.pointer:end.pointer]
    if node.style is None and raw == node.value:
        return 0
    if node.style in ("'", '"') and raw == node.style + node.value + node.style:
        return 1
    return None


class _SetReader:
    """Walks one composed document into a ProbeSet, failing at the first error."""

    def __init__(self, source: str) -> None:
        self.source = source

    # -- errors

    def fail(self, node: Node, message: str, prefix: str = "") -> NoReturn:
        _fail_at(self.source, node.start_mark, prefix + message)

    def fail_inside(self, node: ScalarNode, err: SpecError, prefix: str, offset: int = 0) -> NoReturn:
        """A SpecError from parsing this scalar's text (from `offset` on):
        point at the exact character when the file has the text verbatim."""
        content = _content_offset(node)
        if content is None or err.col is None:
            self.fail(node, err.message, prefix)
        _fail_at(self.source, node.start_mark, prefix + err.message, content + offset + err.col - 1)

    # -- typed scalars

    def check_tag(self, node: Node, prefix: str) -> None:
        if node.tag.startswith(_TAG) and node.tag[len(_TAG):] in (
            "str", "int", "bool", "null", "float", "timestamp", "map", "seq", "binary",
            "set", "omap", "pairs", "merge", "value",
        ):
            return
        self.fail(node, f"unsupported YAML tag {node.tag.replace(_TAG, '!!')}", prefix)

    def scalar(self, node: Node, what: str, prefix: str, expected: str = "a string") -> ScalarNode:
        self.check_tag(node, prefix)
        if not isinstance(node, ScalarNode) or node.tag in (_TAG + "binary", _TAG + "timestamp"):
            self.fail(node, f"{what}: expected {expected}, got {_what(node)}", prefix)
        return node

    def string(self, node: Node, what: str, prefix: str) -> str:
        scalar = self.scalar(node, what, prefix)
        if scalar.tag != _STR:
            hint = f' (quote it: "{scalar.value}")' if len(scalar.value) < 40 else ""
            self.fail(node, f"{what}: expected a string, got {_what(node)}{hint}", prefix)
        return scalar.value

    def line_string(self, node: Node, what: str, prefix: str, limit: int) -> str:
        """A non-empty one-line string (a name or a label) that shows as what
        it is: no control, bidi, zero-width or other invisible characters."""
        value = self.string(node, what, prefix)
        if not value.strip():
            self.fail(node, f"{what}: must not be empty", prefix)
        try:
            chars.refuse(value)
        except SpecError as err:
            self.fail_inside(node, err, f"{prefix}{what}: ")  # type: ignore[arg-type]
        if len(value) > limit:
            self.fail(node, f"{what}: too long ({len(value)} characters, at most {limit})", prefix)
        return value

    def integer(self, node: Node, what: str, prefix: str, low: int, high: int) -> int:
        scalar = self.scalar(node, what, prefix, "an integer")
        if scalar.tag != _INT:
            self.fail(node, f"{what}: expected an integer, got {_what(node)}", prefix)
        value = _parse_int(scalar.value)
        if value is None:
            self.fail(node, f"{what}: cannot read {scalar.value[:40]!r} as an integer", prefix)
        if not low <= value <= high:
            self.fail(node, f"{what}: {value} is out of range ({low}..{high})", prefix)
        return value

    def boolean(self, node: Node, what: str, prefix: str) -> bool:
        scalar = self.scalar(node, what, prefix, "true or false")
        value = _BOOL_WORDS.get(scalar.value.lower()) if scalar.tag == _BOOL else None
        if value is None:
            self.fail(node, f"{what}: expected true or false, got {_what(node)}", prefix)
        return value

    @staticmethod
    def is_null(node: Node) -> bool:
        return isinstance(node, ScalarNode) and node.tag == _NULL

    # -- mappings

    def mapping(self, node: Node, allowed: tuple[str, ...], what: str,
                prefix: str) -> dict[str, tuple[Node, Node]]:
        """The (key node, value node) pairs of a mapping, by key text.
        Duplicate and unknown keys are errors (PyYAML would keep the last)."""
        self.check_tag(node, prefix)
        if not isinstance(node, MappingNode) or node.tag != _MAP:
            self.fail(node, f"{what}: expected a mapping, got {_what(node)}", prefix)
        items: dict[str, tuple[Node, Node]] = {}
        for key_node, value_node in node.value:
            self.check_tag(key_node, prefix)
            if not isinstance(key_node, ScalarNode):
                self.fail(key_node, f"{what}: keys must be plain words, got {_what(key_node)}", prefix)
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
            _fail_at(self.source, None, "empty probe set: expected a mapping with name: and probes:")
        if not isinstance(root, MappingNode):
            self.check_tag(root, "")
            self.fail(root, f"a probe set is a mapping with name: and probes:, got {_what(root)}")
        items = self.mapping(root, TOP_KEYS, "probe set", "")
        for required in ("name", "probes"):
            if required not in items:
                self.fail(root, f"missing key '{required}'" + (
                    ": a probe set needs at least one probe" if required == "probes" else ""))
        name = self.line_string(items["name"][1], "name", "", MAX_NAME_CHARS)
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
            pid = self.integer(items["pid"][1], "filter.pid", "", 1, PID_MAX)
        if "comm" in items and not self.is_null(items["comm"][1]):
            value_node = items["comm"][1]
            comm = self.line_string(value_node, "filter.comm", "", COMM_MAX_BYTES)
            if len(comm.encode("utf-8")) > COMM_MAX_BYTES:
                self.fail(value_node, f"filter.comm: longer than {COMM_MAX_BYTES} bytes "
                          "(the kernel keeps only 15 bytes of a command name)")
        return pid, comm

    def probes(self, node: Node) -> tuple[Probe, ...]:
        self.check_tag(node, "")
        if not isinstance(node, SequenceNode) or node.tag != _SEQ:
            self.fail(node, f"probes: expected a list, got {_what(node)}")
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
        if isinstance(node, ScalarNode) and node.tag == _STR:
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
        if form == "address" and scalar.tag == _INT:
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
        if not isinstance(node, SequenceNode) or node.tag != _SEQ:
            self.fail(node, f"fetch: expected a list of strings, got {_what(node)}", prefix)
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
                changes["label"] = self.line_string(value_node, "label", prefix, MAX_LABEL_CHARS)
            elif key == "filter":
                filter_node = self.scalar_string(value_node, "filter", prefix)
                changes["filter"] = self.probe_filter(filter_node, prefix)
            elif key == "enabled":
                changes["enabled"] = self.boolean(value_node, "enabled", prefix)
            else:
                changes[key] = self.integer(value_node, key, prefix, 1, COUNT_MAX)
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
        compact = isinstance(target_node, ScalarNode) and target_node.value == probe.spec_text
        if compact and ("spec" in items or not items):
            self.fail_inside(target_node, err, prefix + "spec: ")  # type: ignore[arg-type]
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


def _parse_int(text: str) -> int | None:
    """A YAML 1.1 integer (decimal, 0x, 0o/0 octal, 0b, underscores), or None.

    Done here rather than by PyYAML so a hostile number cannot cost much:
    the length is capped and base-60 (`1:30:00`) is not supported."""
    if len(text) > MAX_NUMBER_CHARS or ":" in text:
        return None
    digits = text.replace("_", "")
    sign = -1 if digits.startswith("-") else 1
    digits = digits.lstrip("+-")
    try:
        if digits.startswith(("0x", "0X")):
            return sign * int(digits[2:], 16)
        if digits.startswith(("0b", "0B")):
            return sign * int(digits[2:], 2)
        if digits.startswith(("0o", "0O")):
            return sign * int(digits[2:], 8)
        if len(digits) > 1 and digits.startswith("0"):
            return sign * int(digits[1:], 8)
        return sign * int(digits, 10)
    except ValueError:
        return None


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


# ---------------------------------------------------------------- saving


def dumps_probeset(ps: ProbeSet) -> str:
    """The probe set as YAML that `loads_probeset` reads back equal.

    Probes are written in the compact form; defaults are left out."""
    document: dict[str, object] = {"name": ps.name}
    if ps.description:
        document["description"] = ps.description
    set_filter = {key: value for key, value in (("pid", ps.pid), ("comm", ps.comm)) if value is not None}
    if set_filter:
        document["filter"] = set_filter
    probes = []
    for probe in ps.probes:
        entry: dict[str, object] = {"spec": probe.spec_text}
        if probe.label is not None:
            entry["label"] = probe.label
        if probe.filter is not None:
            entry["filter"] = str(probe.filter)
        if not probe.enabled:
            entry["enabled"] = False
        if probe.sample != 1:
            entry["sample"] = probe.sample
        if probe.rate_limit is not None:
            entry["rate_limit"] = probe.rate_limit
        probes.append(entry)
    document["probes"] = probes
    body = yaml.safe_dump(document, sort_keys=False, allow_unicode=True,
                          default_flow_style=False, width=1_000_000)
    return "# ktui probe set\n" + body


def save_probeset(ps: ProbeSet, path: str | os.PathLike[str]) -> None:
    """Write the probe set to `path` (mode 0600), atomically.

    The text goes to a new file created exclusively in the same directory
    and is then renamed over `path`, so a reader never sees half a file and
    no symlink is followed. A `path` that is itself a symlink is refused:
    replacing it would silently turn the link into a file."""
    target = os.fspath(path)
    text = dumps_probeset(ps)
    if os.path.islink(target):
        raise ProbeSetError("refusing to save: the path is a symbolic link", source=target)
    if os.path.isdir(target):
        raise ProbeSetError("cannot save: the path is a directory", source=target)
    directory = os.path.dirname(target) or "."
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{Path(target).name}.", suffix=".tmp", dir=directory)
    except OSError as err:
        raise ProbeSetError(f"cannot save: {err.strerror}", source=target) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            os.fchmod(out.fileno(), 0o600)  # mkstemp's mode, whatever the umask
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        # rename() never follows a symlink at `target`: even one planted
        # after the check above is replaced, not written through.
        os.replace(temp, target)
    except OSError as err:
        _remove_quietly(temp)
        raise ProbeSetError(f"cannot save: {err.strerror}", source=target) from None


def _remove_quietly(path: str) -> None:
    """Clean up a temp file after a failed save; the save error is what matters."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
