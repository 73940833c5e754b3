"""Reading a YAML file as a node tree, safely and with positions, and
typed values out of the tree (`NodeReader`), each error located.

The safe loader composes nodes only (no tag ever picks a constructor),
aliases are refused, and depth, node count and file size are bounded (a
number's length by `ktui.lang.numbers`), so any input costs bounded time and
memory. Every failure is a ProbeSetError at file:line:col."""

from __future__ import annotations

import difflib
import os
import re
import stat
from typing import Callable, NoReturn

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ktui.lang import chars, limits
from ktui.lang.model import ProbeSetError, SpecError
from ktui.lang.numbers import parse_int

MAX_FILE_BYTES = 1024 * 1024  # refused before parsing
MAX_DEPTH = 16  # the schema needs 4 levels; anything deeper is not a probe set
MAX_NODES = 20_000  # YAML values in one file: a large set has a few hundred

TAG = "tag:yaml.org,2002:"
STR, INT, BOOL, NULL, FLOAT = (TAG + t for t in ("str", "int", "bool", "null", "float"))
MAP, SEQ = TAG + "map", TAG + "seq"
# What a user wrote, for "expected a string, got ..." messages.
TAG_NAMES = {
    STR: "a string", INT: "an integer", BOOL: "a boolean", NULL: "null",
    FLOAT: "a number", TAG + "timestamp": "a date", TAG + "binary": "binary data",
    MAP: "a mapping", SEQ: "a list",
}
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
BOOL_WORDS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}


def read_bounded(source: str, what: str = "a probe set") -> bytes:
    """The file's bytes, refusing anything but a regular file of at most 1 MiB
    (`what` the file is meant to be, for the message).

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
            raise ProbeSetError(too_big(info.st_size, what), source=source, line=1, col=1)
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
        raise ProbeSetError(too_big(len(data), what), source=source, line=1, col=1)
    return data


def too_big(size: int, what: str = "a probe set") -> str:
    return f"file too large ({size} bytes); {what} is at most {MAX_FILE_BYTES} bytes"


def decode_utf8(data: bytes, source: str, what: str = "a probe set") -> str:
    if len(data) > MAX_FILE_BYTES:
        raise ProbeSetError(too_big(len(data), what), source=source, line=1, col=1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line_start = data.rfind(b"\n", 0, err.start) + 1
        col = len(data[line_start:err.start].decode("utf-8", "replace")) + 1
        raise ProbeSetError(
            f"not UTF-8 text (byte 0x{data[err.start]:02x}); {what} is a YAML text file",
            source=source, line=data.count(b"\n", 0, err.start) + 1, col=col,
        ) from None


class NodeLoader(yaml.SafeLoader):
    """The safe loader, composing nodes only, refusing aliases and bounding
    depth and size.

    Aliases are refused outright (not just bounded): a probe set has no use
    for them and they are how "billion laughs" documents blow up. The node
    count bound stops a 1 MiB file of tiny values early instead of spending
    seconds composing it only to reject it."""

    def __init__(self, text: str, source: str, what: str = "a probe set") -> None:
        super().__init__(text)
        self.ktui_source = source
        self.ktui_what = what
        self.ktui_depth = 0
        self.ktui_nodes = 0

    def compose_node(self, parent: Node | None, index: object) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            fail_at(self.ktui_source, event.start_mark,
                     f"aliases (*{event.anchor}) are not allowed in {self.ktui_what}")
        self.ktui_nodes += 1
        if self.ktui_nodes > MAX_NODES:
            fail_at(self.ktui_source, self.peek_event().start_mark,
                     f"too many values (more than {MAX_NODES}); this is not {self.ktui_what}")
        self.ktui_depth += 1
        try:
            if self.ktui_depth > MAX_DEPTH:
                fail_at(self.ktui_source, self.peek_event().start_mark,
                         f"nested too deeply (more than {MAX_DEPTH} levels)")
            return super().compose_node(parent, index)
        finally:
            self.ktui_depth -= 1


def compose(text: str, source: str, what: str = "a probe set") -> Node | None:
    loader = None
    try:
        loader = NodeLoader(text, source, what)  # the reader checks characters here
        return loader.get_single_node()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        message = err.problem or err.context or "invalid YAML"
        if err.context and err.problem:
            message = f"{err.problem} ({err.context})"
        if err.context == "while scanning an alias":
            # `- *:c`: YAML reads a leading * as an alias; a wildcard probe wants quotes
            message += "; quote a value that starts with * or [ ('*:c', 'tcp_*')"
        fail_at(source, mark, f"YAML syntax error: {message}")
    except yaml.reader.ReaderError as err:
        line = text.count("\n", 0, err.position) + 1
        col = err.position - (text.rfind("\n", 0, err.position) + 1) + 1
        char = err.character if isinstance(err.character, int) else ord(str(err.character)[:1] or "\0")
        raise ProbeSetError(
            f"character U+{char:04X} is not allowed in YAML; {what} is a text file",
            source=source, line=line, col=col,
        ) from None
    except yaml.YAMLError as err:
        raise ProbeSetError(one_line(f"invalid YAML: {err}"), source=source, line=1, col=1) from None
    finally:
        if loader is not None:
            loader.dispose()


def one_line(text: str) -> str:
    """Control characters (newlines above all) escaped: errors are one line.
    Bidi and zero-width characters too: a message quoting a key or a spec
    must not show as something else (see ktui/chars.py)."""
    text = CONTROL_CHARS.sub(lambda match: f"\\x{ord(match.group()):02x}", text)
    return chars.escape_refused(text)


def fail_at(source: str, mark: yaml.Mark | None, message: str, offset: int = 0) -> NoReturn:
    message = one_line(message)
    if mark is None:
        raise ProbeSetError(message, source=source, line=1, col=1)
    raise ProbeSetError(message, source=source, line=mark.line + 1, col=mark.column + 1 + offset)


def describe(node: Node) -> str:
    if node.tag in TAG_NAMES:
        return TAG_NAMES[node.tag]
    if isinstance(node, MappingNode):
        return "a mapping"
    return "a list" if isinstance(node, SequenceNode) else "a value"


def content_offset(node: ScalarNode) -> int | None:
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


# ---------------------------------------------------------------- typed values


FAILED = object()  # what `attempt` returns for a part that had an error


class NodeReader:
    """Typed, located values out of a composed node tree.

    It fails at the first error (a ProbeSetError at file:line:col), or with
    `collect` keeps each error after which reading can go on in `errors`
    (`report` and `attempt` mark those places) and goes on."""

    def __init__(self, source: str, *, collect: bool = False) -> None:
        self.source = source
        self.collect = collect
        self.errors: list[ProbeSetError] = []

    # -- errors

    def fail(self, node: Node, message: str, prefix: str = "") -> NoReturn:
        fail_at(self.source, node.start_mark, prefix + message)

    def report(self, node: Node, message: str, prefix: str = "") -> None:
        """An error reading can go on after: raised, or kept when collecting."""
        self.attempt(self.fail, node, message, prefix)

    def attempt(self, read, *args):
        """`read(*args)`; when collecting, its error is kept and FAILED returned."""
        if not self.collect:
            return read(*args)
        try:
            return read(*args)
        except ProbeSetError as err:
            self.errors.append(err)
            return FAILED

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

    def switch(self, node: Node, what: str, prefix: str) -> str:
        """`on`, `off` (YAML's booleans: true/false, yes/no too) or `auto`."""
        scalar = self.scalar(node, what, prefix, "on or off")
        word = scalar.value.strip().lower()
        if scalar.tag == BOOL and word in BOOL_WORDS:
            return "on" if BOOL_WORDS[word] else "off"
        if scalar.tag == STR and word in ("on", "off", "auto"):
            return word
        shown = f" {scalar.value[:40]!r}" if scalar.tag == STR else ""
        self.fail(node, f"{what}: expected on, off or auto, got {describe(node)}{shown}", prefix)

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
                self.report(key_node, f"duplicate key '{key}' (first given on line {first})", prefix)
            elif key not in allowed:
                self.report(key_node, _unknown_key(key, allowed), prefix)
            else:
                items[key] = (key_node, value_node)
        return items

    def scalar_string(self, node: Node, what: str, prefix: str) -> ScalarNode:
        self.string(node, what, prefix)
        return node  # type: ignore[return-value]  # string() checked it is a scalar


def _unknown_key(key: str, allowed: tuple[str, ...]) -> str:
    shown = key if len(key) <= 40 else key[:37] + "..."
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.7)
    if close:
        return f"unknown key '{shown}' (did you mean '{close[0]}'?)"
    return f"unknown key '{shown}'; expected one of: " + ", ".join(allowed)
