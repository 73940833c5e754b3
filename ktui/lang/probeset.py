"""YAML probe sets: load and validate them, save them back.

A probe set file looks like this (see probesets/ for real ones):

    name: vfs
    description: File reads and writes
    filter: {pid: 1234, comm: nginx}     # optional, applied in the kernel
    maxactive: 64                        # optional: for every return probe
    probes:
      - spec: vfs_read:c:a3              # compact form, as on the command line
        label: read_size                 # optional, unique within the set
        filter: a3 > 4096                # optional filter expression
        enabled: true                    # optional (default true)
        sample: 10                       # optional: emit 1 event in N
        rate_limit: 1000                 # optional: max events/s per CPU
        maxactive: 128                   # optional, return probes only:
                                         # calls followed at once (1..4096)
        errno: off                       # optional, return probes only: count
                                         # errnos (on) or not (off); by
                                         # default as BTF's return type says
      - spec: syscalls/sys_enter_openat:t:filename:ustring   # a tracepoint:
        filter: flags > 0                # its fields by name (docs/probe-language.md)
      - spec: /usr/lib/x86_64-linux-gnu/libc.so.6:malloc:c:a1   # a user function
                                         # (a uprobe): a1..a6, registers, retval
      - function: vfs_write              # long form: function or address,
        kind: return                     # kind, and a list of fetches
        fetch: [retval:s64]
      - tracepoint: sched/sched_process_exec   # long form of a tracepoint
        fetch: [filename, args.pid]      # (kind t is implied)
      - function: [__kmalloc_noprof, __kmalloc]   # alternatives: the first
        fetch: [a1]                      # this kernel has (lang.alternatives)
      - binary: /usr/lib/x86_64-linux-gnu/libc.so.6   # long form of a user
        function: malloc                 # function (or address: 0x...)
      - binary: /usr/bin/python3.11      # long form of a USDT probe point
        usdt: python:function__entry     # (PROVIDER:NAME; kind usdt implied)
      - function: 'tcp_*'                # a wildcard: every function it
                                         # matches (quoted: YAML reads * and [)

A bare string in `probes:` is taken as a compact spec, and a spec may start
with the probe's label (`reads=vfs_read:c:a3`). An optional key set to null
means "not set".

Loading is hostile-input safe: only ever a `ProbeSetError` whose str() is
`file:line:col: message`, in bounded time and memory. That is why the YAML is
composed into a node tree (with the safe loader, aliases refused and nesting
bounded) and never constructed into Python objects by PyYAML: walking the
nodes ourselves keeps every position, catches the duplicate keys PyYAML would
silently merge, and lets no tag pick a constructor.

`load_probeset` raises the first error it meets; `check_probeset` (for
`ktui check`) reads on past an error in a top-level key, in a probe or in
one key of a probe, and returns every error in file order.
"""

from __future__ import annotations

import dataclasses
import os
from typing import NoReturn

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ktui.lang import grammar, limits, spans, wildcards
from ktui.lang.filters import parse_filter
from ktui.lang.aggregate import AGG_MAX_KEYS_MAX, AGG_MAX_KEYS_MIN, check_aggregate, split_fetches
from ktui.lang.attach_rules import text_obstacle
from ktui.lang.model import (
    ATTACH_MODES,
    WILDCARD_CHARS,
    Aggregate,
    GateSpan,
    Kind,
    Probe,
    ProbeSet,
    ProbeSetError,
    SpecError,
    Target,
)
from ktui.lang.bind import Kernel, bind_probe
from ktui.lang.grammar import parse_raw
from ktui.lang.spec import parse_fetch, parse_spec, parse_spec_clauses, parse_target, validate_probe
from ktui.lang.user_probes import (
    USDT_MAXACTIVE,
    USER_ERRNO,
    USER_MAXACTIVE,
    check_user_aggregate,
    user_attach_problem,
)
from ktui.lang.yamlnodes import (
    FAILED,
    INT,
    MAX_FILE_BYTES,
    SEQ,
    STR,
    NodeReader,
    compose,
    decode_utf8,
    describe,
    fail_at,
    read_bounded,
    too_big,
)

TOP_KEYS = ("name", "description", "filter", "maxactive", "attach", "probes")
SET_FILTER_KEYS = ("pid", "comm", "cgroup")
GATE_KEYS = ("from", "to")  # `within: {from: START, to: END}`, a gate between two events
PROBE_KEYS = (
    "spec", "function", "address", "tracepoint", "usdt", "binary", "kind", "fetch",
    "label", "filter", "enabled", "sample", "rate_limit", "maxactive", "attach", "errno",
    "hist", "count", "sum", "max_keys", "stack", "within", "since",
)
AGG_KEYS = ("hist", "count", "sum", "max_keys", "stack")
KIND_WORDS = {
    "c": Kind.CALL, "call": Kind.CALL, "kprobe": Kind.CALL,
    "r": Kind.RETURN, "return": Kind.RETURN, "kretprobe": Kind.RETURN,
    "t": Kind.TRACEPOINT, "tracepoint": Kind.TRACEPOINT,
    "usdt": Kind.USDT,
}
FORMS = ("spec", "function", "address", "tracepoint", "usdt")  # what a probe attaches to: one of them
FORM_WORDS = "spec:, function:, address:, tracepoint: or usdt:"
LONG_FORMS = "function:, address:, tracepoint: or usdt:"
BINARY_FORMS = ("function", "address", "usdt")  # what `binary:` goes with: a thing in that file
BINARY_EXAMPLE = "/usr/lib/x86_64-linux-gnu/libc.so.6"
USDT_FORM_EXAMPLE = "binary: /usr/bin/python3.11 with usdt: python:function__entry"



# ---------------------------------------------------------------- loading


def load_probeset(path: str | os.PathLike[str], kernel: "Kernel | None" = None) -> ProbeSet:
    """Load and validate the probe set in the file `path`; raise its first
    error. With `kernel`, names in probes are bound to its BTF (`lang.bind`)
    and a name it does not know is an error located in the file."""
    source = os.fspath(path)
    return loads_probeset(read_bounded(source), source=source, kernel=kernel)


def loads_probeset(text: str | bytes, source: str = "<string>", kernel: "Kernel | None" = None) -> ProbeSet:
    """Load and validate a probe set from YAML text (str, or bytes in UTF-8)."""
    return _SetReader(source, kernel=kernel).read(_compose(text, source))


def check_probeset(path: str | os.PathLike[str], kernel: "Kernel | None" = None) -> tuple[ProbeSet | None, list[ProbeSetError]]:
    """Every error in the file `path`, in file order (`ktui check`), and the
    probe set when there is none. Reading goes on past an error in a
    top-level key or in one probe (past an unknown key inside a probe too),
    so a misspelt key does not hide a bad filter further down."""
    source = os.fspath(path)
    try:
        text = read_bounded(source)
    except ProbeSetError as err:
        return None, [err]
    return checks_probeset(text, source, kernel)


def checks_probeset(text: str | bytes, source: str = "<string>",
                    kernel: "Kernel | None" = None) -> tuple[ProbeSet | None, list[ProbeSetError]]:
    """`check_probeset` on YAML text."""
    try:
        root = _compose(text, source)
    except ProbeSetError as err:
        return None, [err]
    reader = _SetReader(source, collect=True, kernel=kernel)
    probeset = None
    try:
        probeset = reader.read(root)
    except ProbeSetError as err:  # one it could not read past
        reader.errors.append(err)
    errors = sorted(reader.errors, key=lambda e: (e.line or 0, e.col or 0))
    return (None if errors else probeset), errors


def _compose(text: str | bytes, source: str) -> Node | None:
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = decode_utf8(bytes(text), source)
    if not isinstance(text, str):
        raise TypeError(f"loads_probeset takes str or bytes, not {type(text).__name__}")
    if len(text) > MAX_FILE_BYTES:
        raise ProbeSetError(too_big(len(text)), source=source, line=1, col=1)
    return compose(text, source)


class _SetReader(NodeReader):
    """Walks one composed document into a ProbeSet (see NodeReader for
    failing at the first error or collecting them)."""

    def __init__(self, source: str, *, collect: bool = False, kernel: "Kernel | None" = None) -> None:
        super().__init__(source, collect=collect)
        self.set_attach = ""  # the set's `attach:`, once read: its probes are checked against it
        self.kernel = kernel  # binds names in probes to its BTF when given

    # -- the document

    def read(self, root: Node | None) -> ProbeSet | None:
        if root is None:
            fail_at(self.source, None, "empty probe set: expected a mapping with name: and probes:")
        if not isinstance(root, MappingNode):
            self.check_tag(root, "")
            self.fail(root, f"a probe set is a mapping with name: and probes:, got {describe(root)}")
        items = self.mapping(root, TOP_KEYS, "probe set", "")
        for required in ("name", "probes"):
            if required not in items:
                self.report(root, f"missing key '{required}'" + (
                    ": a probe set needs at least one probe" if required == "probes" else ""))
        name = description = ""
        pid = comm = cgroup = None
        probes: tuple[Probe, ...] = ()
        if "name" in items:
            name = self.attempt(self.line_string, items["name"][1], "name", "", limits.check_set_name)
        if "description" in items and not self.is_null(items["description"][1]):
            description = self.attempt(self.string, items["description"][1], "description", "")
        if "filter" in items and not self.is_null(items["filter"][1]):
            set_filter = self.attempt(self.set_filter, items["filter"][1])
            pid, comm, cgroup = (None, None, None) if set_filter is FAILED else set_filter
        maxactive = 0
        if "maxactive" in items and not self.is_null(items["maxactive"][1]):
            maxactive = self.attempt(self.maxactive, items["maxactive"][1], "")
        attach = ""
        if "attach" in items and not self.is_null(items["attach"][1]):
            attach = self.attempt(self.attach_mode, items["attach"][1], "")
        self.set_attach = attach if attach is not FAILED else ""
        if "probes" in items:
            probes = self.attempt(self.probes, items["probes"][1])
        if self.errors:
            return None  # collecting: the errors say what is wrong
        return ProbeSet(name=name, description=description, probes=with_set_maxactive(probes, maxactive),
                        pid=pid, comm=comm, cgroup=cgroup, source=self.source, maxactive=maxactive,
                        attach=attach)

    def attach_mode(self, node: Node, prefix: str) -> str:
        """`attach: auto|kprobe|fentry` (how probes enter the kernel)."""
        value = self.string(node, "attach", prefix)
        if value not in ATTACH_MODES:
            self.fail(node, f"attach: expected one of {', '.join(ATTACH_MODES)}, got {value[:40]!r}", prefix)
        return value

    def maxactive(self, node: Node, prefix: str) -> int:
        return self.integer(node, "maxactive", prefix, limits.MAXACTIVE_MIN, limits.MAXACTIVE_MAX)

    def set_filter(self, node: Node) -> tuple[int | None, str | None, str | None]:
        items = self.mapping(node, SET_FILTER_KEYS, "filter", "")
        pid = comm = cgroup = None
        if "pid" in items and not self.is_null(items["pid"][1]):
            pid = self.attempt(self.integer, items["pid"][1], "filter.pid", "", limits.PID_MIN, limits.PID_MAX)
        if "comm" in items and not self.is_null(items["comm"][1]):
            comm = self.attempt(self.line_string, items["comm"][1], "filter.comm", "", limits.check_comm)
        if "cgroup" in items and not self.is_null(items["cgroup"][1]):
            cgroup = self.attempt(self.line_string, items["cgroup"][1], "filter.cgroup", "", limits.check_cgroup)
        return pid, comm, cgroup

    def probes(self, node: Node) -> tuple[Probe, ...]:
        self.check_tag(node, "")
        if not isinstance(node, SequenceNode) or node.tag != SEQ:
            self.fail(node, f"probes: expected a list, got {describe(node)}")
        if not node.value:
            self.fail(node, "a probe set needs at least one probe")
        probes: list[Probe] = []
        first_use: dict[str, int] = {}
        for number, item in enumerate(node.value, start=1):
            read = self.attempt(self.probe, item, number)
            if read is FAILED:
                continue
            probe, name_node = read
            if probe.name in first_use:
                self.report(name_node, f"label '{probe.name}' is already used by probe "
                            f"{first_use[probe.name]}; labels must be unique in a set",
                            _probe_prefix(number, item))
            first_use.setdefault(probe.name, number)
            probes.append(probe)
        return tuple(probes)

    # -- one probe

    def probe(self, node: Node, number: int) -> tuple[Probe, Node] | object:
        """The probe and the node that gives its name (for duplicate labels),
        or FAILED when collecting and it had errors."""
        prefix = _probe_prefix(number, node)
        if isinstance(node, ScalarNode) and node.tag == STR:
            probe = self.finish(self.compact(node, prefix), {}, prefix, node)
            return FAILED if probe is FAILED else (probe, node)
        items = self.mapping(node, PROBE_KEYS, "probe", prefix)
        forms = sorted((key for key in FORMS if key in items), key=lambda k: items[k][0].start_mark.index)
        if not forms and "binary" in items:
            self.fail(items["binary"][0], "binary: needs function:, address: or usdt: (which function "
                      "or USDT probe point of the file to probe)", prefix)
        if not forms:
            self.fail(node, f"a probe needs one of {FORM_WORDS}", prefix)
        if len(forms) > 1:
            self.fail(items[forms[1]][0], f"give only one of {FORM_WORDS} "
                      f"(this probe has {forms[0]}: and {forms[1]}:)", prefix)
        if "binary" in items and forms[0] not in BINARY_FORMS:
            self.fail(items["binary"][0], f"binary: goes with function:, address: or usdt: (a function "
                      f"or probe point of that file); {_BINARY_NOT_WITH[forms[0]]}", prefix)
        if forms[0] == "usdt" and "binary" not in items:
            self.fail(items["usdt"][0], f"usdt: needs binary: (the file whose probe point it is), "
                      f"e.g. {USDT_FORM_EXAMPLE}", prefix)
        if forms[0] == "spec":
            for long_only in ("kind", "fetch"):
                if long_only in items:
                    self.report(items[long_only][0], f"{long_only}: belongs to the long form "
                                f"({LONG_FORMS}); with spec: write it in the spec", prefix)
            where = items["spec"][1]
            probe = self.attempt(self.compact, self.scalar_string(where, "spec", prefix), prefix)
            labelled = "label" in items and not self.is_null(items["label"][1])
            if labelled and probe is not FAILED and probe.label is not None:
                self.report(items["label"][0], f'label: the spec already labels this probe "{probe.label}"; '
                            "give the label once", prefix)
                del items["label"]
        else:
            where = items[forms[0]][1]
            probe = self.attempt(self.long_form, items, forms[0], prefix)
        name_node = items["label"][1] if "label" in items else where
        probe = self.finish(probe, items, prefix, where)
        return FAILED if probe is FAILED else (probe, name_node)

    def compact(self, node: ScalarNode, prefix: str) -> Probe:
        try:
            return parse_spec_clauses(node.value)
        except SpecError as err:
            self.fail_inside(node, err, prefix + "spec: ")

    def span_start(self, node: Node, prefix: str) -> Probe:
        """`since: START`: a span's start, a probe of its own (lang.spans),
        bound to the kernel's names where the set is checked against one."""
        scalar = self.scalar_string(node, "since", prefix)
        try:
            start = parse_spec(scalar.value)
            return bind_probe(start, self.kernel) if self.kernel is not None else start
        except SpecError as err:
            self.fail_inside(scalar, err, prefix + "since: ")

    def gate(self, node: Node, prefix: str) -> "str | GateSpan":
        """`within: FUNC`, or a gate between two events, `within: {from:
        START, to: END}` (lang.spans): each end a probe alone, located at
        its own text when bad, bound to the kernel's names where the set is
        checked against one."""
        if isinstance(node, SequenceNode):
            self.fail(node, "within: a kernel function's name, or {from: START, to: END} (a gate between "
                      "two events), not a list", prefix)
        if not isinstance(node, MappingNode):
            return self.line_string(node, "within", prefix, limits.check_within)
        items = self.mapping(node, GATE_KEYS, "within", prefix)
        missing = [key for key in GATE_KEYS if key not in items or self.is_null(items[key][1])]
        if missing:
            self.fail(node, f"within: missing '{missing[0]}': a gate between two events is "
                      "{from: START, to: END}, e.g. {from: syscalls/sys_enter_read:t, to: syscalls/sys_exit_read:t}",
                      prefix)
        ends = []
        for key in GATE_KEYS:
            scalar = self.scalar_string(items[key][1], f"within.{key}", prefix)
            try:
                ends.append(parse_spec(scalar.value))
            except SpecError as err:
                self.fail_inside(scalar, err, f"{prefix}within.{key}: ")
        try:
            spans.check_gate_ends(*ends)
        except SpecError as err:
            self.fail(node, err.message, prefix)
        if self.kernel is not None:
            for index, key in enumerate(GATE_KEYS):
                try:
                    ends[index] = bind_probe(ends[index], self.kernel)
                except SpecError as err:
                    self.fail_inside(items[key][1], err, f"{prefix}within.{key}: ")  # type: ignore[arg-type]
        return GateSpan(*ends)

    def long_form(self, items: dict[str, tuple[Node, Node]], form: str, prefix: str) -> Probe:
        node = items[form][1]
        if "binary" in items:
            target = self.user_target(items["binary"][1], node, form, prefix)
        elif form == "function" and isinstance(node, SequenceNode):
            target = self.alternatives(node, prefix)
        else:
            target = self.target(node, form, prefix)
        # `tracepoint:` implies kind t, `usdt:` kind usdt, as `function:` implies c
        kind = {"tracepoint": Kind.TRACEPOINT, "usdt": Kind.USDT}.get(form, Kind.CALL)
        if "kind" in items and not self.is_null(items["kind"][1]):
            kind = self.kind(items["kind"][1], form, prefix)
        fetches = ()
        if "fetch" in items and not self.is_null(items["fetch"][1]):
            fetches = self.fetches(items["fetch"][1], prefix, kind)
        return Probe(target=target, kind=kind, fetches=fetches)

    def kind(self, node: Node, form: str, prefix: str) -> Kind:
        """`kind:` of the long form, which must suit the form: t and only t
        for a tracepoint."""
        word = self.string(node, "kind", prefix)
        if word.strip().lower() not in KIND_WORDS:
            self.fail(node, f"kind: unknown kind {word!r}; use one of " + ", ".join(KIND_WORDS), prefix)
        kind = KIND_WORDS[word.strip().lower()]
        if form == "tracepoint" and kind is not Kind.TRACEPOINT:
            self.fail(node, f"kind: a tracepoint takes kind t (or no kind:), got {word.strip()!r}", prefix)
        if form != "tracepoint" and kind is Kind.TRACEPOINT:
            self.fail(node, f"kind: t is for a tracepoint: write tracepoint: CATEGORY/NAME "
                      f"instead of {form}:", prefix)
        if form == "usdt" and kind is not Kind.USDT:
            self.fail(node, f"kind: a USDT probe point takes kind usdt (or no kind:), got {word.strip()!r}; "
                      "it has no return", prefix)
        if form != "usdt" and kind is Kind.USDT:
            self.fail(node, f"kind: usdt is for a USDT probe point: write {USDT_FORM_EXAMPLE}", prefix)
        return kind

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
        if form == "function" and target.tracepoint is not None:
            self.fail(node, f"function: {target} is a tracepoint (CATEGORY/NAME): use tracepoint:", prefix)
        if form == "tracepoint" and target.tracepoint is None:
            self.fail(node, "tracepoint: expected CATEGORY/NAME such as syscalls/sys_enter_openat "
                      "(use function: or address: for a kernel function)", prefix)
        return target

    def alternatives(self, node: SequenceNode, prefix: str) -> Target:
        """`function: [a, b, ...]`: kernel functions of which the first this
        kernel has is probed (`lang.alternatives`); as the spec `a|b` reads them."""
        self.check_tag(node, prefix)
        if node.tag != SEQ or not node.value:
            self.fail(node, "function: expected a function or a list of alternatives, e.g. "
                      "[__kmalloc_noprof, __kmalloc]", prefix)
        scalars = [self.scalar_string(item, "function", prefix) for item in node.value]
        if len(scalars) == 1:
            return self.target(scalars[0], "function", prefix)
        written = []
        for scalar in scalars:
            target = self.target(scalar, "function", prefix)
            if target.is_user or target.offset or target.alternatives:
                self.fail(scalar, "function: alternatives are kernel functions, each named whole "
                          "(no offset, no PATH:, no |)", prefix)
            written.append(scalar)
        try:
            return parse_target("|".join(s.value.strip() for s in written))
        except SpecError as err:  # a repeated name, or too many: at the name it is about
            at, index = 0, 0
            for index, scalar in enumerate(written):
                if err.col is None or err.col <= at + len(scalar.value.strip()) + 1:
                    break
                at += len(scalar.value.strip()) + 1
            self.fail(written[index], f"function: {err.message}", prefix)

    def user_target(self, binary: Node, node: Node, form: str, prefix: str) -> Target:
        """`binary: PATH` with `function: NAME[+OFF]`, `address: 0xADDR` or
        `usdt: PROVIDER:NAME`: the user function `PATH:NAME[+OFF]`
        (`PATH:0xADDR`) or probe point `PATH:PROVIDER:NAME`, as the spec
        writes it, each error at the key it is about."""
        path_node = self.scalar_string(binary, "binary", prefix)
        path = path_node.value
        if not path.startswith("/"):
            self.fail(path_node, f"binary: expected an absolute path, e.g. {BINARY_EXAMPLE} (the "
                      "kernel sets a uprobe on the file itself: no search path, no working directory)",
                      prefix)
        odd = next((c for c in path if c in ": \t"), None)
        if odd is not None:
            self.fail_inside(path_node, SpecError(
                f"a path with {'a blank' if odd != ':' else repr(odd)} in it cannot be probed: the "
                "compact form (PATH:FUNCTION:c) ends the path there; probe it through a symlink "
                "without one", col=path.index(odd) + 1), prefix + "binary: ")
        if isinstance(node, SequenceNode):
            self.fail(node, "function: alternatives are for kernel functions; a binary's function "
                      "is named once" if form == "function" else f"{form}: expected one PROVIDER:NAME, "
                      "e.g. python:function__entry", prefix)
        scalar = self.scalar(node, form, prefix, "an address" if form == "address" else "a string")
        if form == "address" and scalar.tag == INT:
            where = f"0x{self.integer(node, 'address', prefix, 1, 2**64 - 1):x}"
        else:
            where = self.string(node, form, prefix)
            if where.lstrip().startswith("/"):
                alone = "probe point alone (e.g. python:function__entry)" if form == "usdt" else \
                    f"{form} alone (e.g. malloc)"
                self.fail(scalar, f"{form}: with binary: name the {alone}, the file is binary:'s", prefix)
            if form == "usdt" and where.count(":") != 1:
                self.fail(scalar, "usdt: expected PROVIDER:NAME, e.g. python:function__entry "
                          "(`ktui list --usdt PATH` lists them)", prefix)
            if form == "usdt":
                self.usdt_name(scalar, path, where, prefix)
        try:
            target = parse_target(f"{path}:{where}")
        except SpecError as err:
            if err.col is not None and err.col > len(path) + 1:
                if scalar.tag == INT:
                    self.fail(scalar, f"{form}: {err.message}", prefix)
                self.fail_inside(scalar, SpecError(err.message, col=err.col - len(path) - 1),
                                 prefix + f"{form}: ")
            self.fail_inside(path_node, err, prefix + "binary: ")
        if form == "address" and target.address is None:
            self.fail(node, "address: expected an address in the file such as 0x1139 "
                      "(use function: for a function)", prefix)
        if form == "function" and target.address is not None:
            self.fail(node, "function: expected a function such as malloc (use address: for an address)",
                      prefix)
        if form == "function" and target.usdt is not None:
            self.fail(node, f"function: {target.usdt} is a USDT probe point (PROVIDER:NAME): use usdt:",
                      prefix)
        if form == "usdt" and target.usdt is None:
            self.fail(node, "usdt: expected PROVIDER:NAME, e.g. python:function__entry (its NAME may "
                      "not be c, r, t or usdt)", prefix)
        return target

    def usdt_name(self, scalar: ScalarNode, path: str, where: str, prefix: str) -> None:
        """What `usdt: PROVIDER:NAME` cannot be, said here rather than as the
        compact form's parse of `PATH:PROVIDER:NAME` would."""
        if any(c in where for c in WILDCARD_CHARS):
            self.fail(scalar, "usdt: " + wildcards.only_kernel(path, "", usdt=True), prefix)
        if where.partition(":")[2].strip() in grammar.KIND_WORDS:
            self.fail(scalar, f"usdt: a probe point named {where.partition(':')[2].strip()} cannot be "
                      "probed: the compact form reads that word as the kind", prefix)

    def fetches(self, node: Node, prefix: str, kind: Kind) -> tuple:
        """`fetch:` is a list of fetch strings, or one string of them split
        by commas; read as `kind` reads them (a tracepoint's `flags` is a field)."""
        if isinstance(node, ScalarNode):
            scalar = self.scalar_string(node, "fetch", prefix)
            return tuple(self.fetch(scalar, piece, start, prefix, kind)
                         for piece, start in split_fetches(scalar.value))
        self.check_tag(node, prefix)
        if not isinstance(node, SequenceNode) or node.tag != SEQ:
            self.fail(node, f"fetch: expected a list of strings, got {describe(node)}", prefix)
        result = []
        for item in node.value:
            scalar = self.scalar_string(item, "fetch", prefix)
            result.append(self.fetch(scalar, scalar.value, 0, prefix, kind))
        return tuple(result)

    def fetch(self, node: ScalarNode, text: str, start: int, prefix: str, kind: Kind):
        try:
            return parse_fetch(text, kind)
        except SpecError as err:
            self.fail_inside(node, err, prefix + "fetch: ", start)

    def finish(self, probe: Probe, items: dict[str, tuple[Node, Node]],
               prefix: str, target_node: Node) -> Probe:
        """Fill in what follows the target, then let the spec layer validate
        it. When collecting, each key is read even after another failed (or
        the target did: `probe` is then FAILED), and FAILED is returned if
        anything in this probe did."""
        kind = None if probe is FAILED else probe.kind  # a tracepoint's names are its fields
        readers = {
            "label": lambda node: self.line_string(node, "label", prefix, limits.check_probe_label),
            "filter": lambda node: self.probe_filter(self.scalar_string(node, "filter", prefix), prefix),
            "enabled": lambda node: self.boolean(node, "enabled", prefix),
            "sample": lambda node: self.integer(node, "sample", prefix, limits.COUNT_MIN, limits.COUNT_MAX),
            "rate_limit": lambda node: self.integer(node, "rate_limit", prefix, limits.COUNT_MIN, limits.COUNT_MAX),
            "maxactive": lambda node: self.maxactive(node, prefix),
            "attach": lambda node: self.attach_mode(node, prefix),
            "errno": lambda node: _errno_mode(self.switch(node, "errno", prefix)),
            "hist": lambda node: self.agg_keys(node, prefix, kind, "hist"),
            "sum": lambda node: self.agg_fetch(node, "sum", prefix, kind),
            "count": lambda node: self.agg_keys(node, prefix, kind, "count"),
            "max_keys": lambda node: self.integer(node, "max_keys", prefix, AGG_MAX_KEYS_MIN, AGG_MAX_KEYS_MAX),
            "stack": lambda node: self.scalar_string(node, "stack", prefix).value.strip(),
            "within": lambda node: self.gate(node, prefix),
            "since": lambda node: self.span_start(node, prefix),
        }
        errors_before = len(self.errors)
        changes: dict[str, object] = {}
        for key, (_, value_node) in items.items():
            if key in readers and not self.is_null(value_node):
                value = self.attempt(readers[key], value_node)
                if value is not FAILED:
                    changes[key] = value
        if probe is FAILED:
            return FAILED
        if probe.target.is_user and ("maxactive" in changes or user_attach_problem(changes.get("attach", ""))
                                     or ("errno" in changes and probe.kind is Kind.RETURN)):
            key = next(k for k in ("maxactive", "errno", "attach") if k in changes)
            usdt = probe.kind is Kind.USDT
            what = "a USDT probe" if usdt else "a user function"
            why = ({"maxactive": USDT_MAXACTIVE if usdt else USER_MAXACTIVE, "errno": USER_ERRNO}.get(key)
                   or user_attach_problem(changes[key], what))
            self.attempt(self.fail, items[key][0], why, prefix)
            return FAILED
        if "maxactive" in changes and probe.kind is not Kind.RETURN:
            self.attempt(self.fail, items["maxactive"][0], "maxactive: only a return probe (:r) has one "
                         "(the calls its kretprobe follows at once)", prefix)
            return FAILED
        if "errno" in changes and probe.kind is not Kind.RETURN:
            self.attempt(self.fail, items["errno"][0], "errno: only a return probe (:r) has errnos "
                         "(its return value)", prefix)
            return FAILED
        if probe.kind is Kind.TRACEPOINT and changes.get("attach") in ("kprobe", "fentry"):
            self.attempt(self.fail, items["attach"][0], f"attach: {changes['attach']} is for kernel "
                         "functions; a tracepoint attaches as a tracepoint (leave attach: out)", prefix)
            return FAILED
        agg = {key: changes.pop(key) for key in AGG_KEYS if key in changes}
        if agg:
            agg_probe = self.attempt(self.with_aggregate, probe, agg, items, prefix)
            if agg_probe is FAILED:
                return FAILED
            probe = agg_probe
        probe = dataclasses.replace(probe, **changes)
        if probe.since is not None and "since" in changes:
            try:
                spans.check_span(probe, probe.since)
            except SpecError as err:
                self.attempt(self.fail, items["since"][0], err.message, prefix)
                return FAILED
        forced = items["attach"][0] if "attach" in changes else None
        # A set-wide `attach:` is for its kprobes: it does not apply to a
        # tracepoint, nor to a user function (a uprobe).
        if ((changes.get("attach") or self.set_attach) == "fentry" and probe.kind is not Kind.TRACEPOINT
                and not probe.target.is_user):
            why = text_obstacle(probe)
            if why:
                where = forced if forced is not None else target_node
                whose = "" if forced is not None else " (the set's)"
                self.attempt(self.fail, where, f"attach: fentry{whose}: not for this probe: {why}", prefix)
                return FAILED
        filter_node = items["filter"][1] if "filter" in changes else None
        try:
            validate_probe(probe, filter_text=None if filter_node is None else filter_node.value)
            if self.kernel is not None:
                probe = bind_probe(probe, self.kernel,
                                   filter_text=None if filter_node is None else filter_node.value)
        except SpecError as err:
            self.attempt(self.fail_validation, err, probe, items, prefix, target_node, filter_node)
        return FAILED if len(self.errors) > errors_before else probe

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
        if "fetch" in items and err.col is not None and not err.message.startswith("filter:"):
            self.fail_in_fetch_list(items["fetch"][1], probe, err, prefix)
        if "fetch" in items and ("fetch" in err.message or "retval" in err.message):
            self.fail(items["fetch"][1], err.message, prefix + "fetch: ")
        if "kind" in items and "return probe" in err.message:
            self.fail(items["kind"][1], err.message, prefix + "kind: ")
        self.fail(target_node, err.message, prefix)

    def fail_in_fetch_list(self, node: Node, probe: Probe, err: SpecError, prefix: str) -> None:
        """An error whose column points into the canonical spec text, at a
        fetch written in a `fetch:` list or string: point at it there."""
        try:
            spans = parse_raw(probe.spec_text)[1].fetches
        except SpecError:
            return
        assert err.col is not None
        index = max((i for i, s in enumerate(spans) if s.start <= err.col), default=None)
        if index is None:
            return
        within = err.col - spans[index].start + 1  # the column inside that fetch's text
        located = SpecError(err.message, col=within)
        if isinstance(node, SequenceNode) and index < len(node.value) and isinstance(node.value[index], ScalarNode):
            self.fail_inside(node.value[index], located, prefix + "fetch: ")
        if isinstance(node, ScalarNode):
            pieces = split_fetches(node.value)
            if index < len(pieces):
                self.fail_inside(node, located, prefix + "fetch: ", pieces[index][1])

    def agg_fetch(self, node: Node, key: str, prefix: str, kind: Kind | None = None):
        scalar = self.scalar_string(node, key, prefix)
        try:
            return _agg_fetch(scalar.value, kind)
        except SpecError as err:
            self.fail_inside(scalar, err, prefix + f"{key}: ")

    def agg_keys(self, node: Node, prefix: str, kind: Kind | None = None, key: str = "count") -> tuple:
        """`count:` is a list of fetches, or one string of them split by
        commas; so is `hist:`, its value first, then its keys (one fetch:
        the histogram without keys, as always)."""
        if isinstance(node, ScalarNode):
            scalar = self.scalar_string(node, key, prefix)
            pieces = [(piece, start, scalar) for piece, start in split_fetches(scalar.value)]
        else:
            self.check_tag(node, prefix)
            if not isinstance(node, SequenceNode) or node.tag != SEQ:
                self.fail(node, f"{key}: expected a list of fetches, got {describe(node)}", prefix)
            pieces = []
            for item in node.value:
                scalar = self.scalar_string(item, key, prefix)
                pieces.append((scalar.value, 0, scalar))
        if key == "hist" and not pieces:
            self.fail(node, "hist: expected a fetch (a1, retval, ...), then its keys if any", prefix)
        fetches = []
        for piece, start, scalar in pieces:
            try:
                fetches.append(_agg_fetch(piece, kind))
            except SpecError as err:
                self.fail_inside(scalar, err, prefix + f"{key}: ", start)
        return tuple(fetches)

    def with_aggregate(self, probe: Probe, agg: dict, items: dict[str, tuple[Node, Node]],
                       prefix: str) -> Probe:
        """The probe with its hist/count/sum keys, checked against its kind;
        an error names the first aggregation key given."""
        base = probe.agg or Aggregate()
        hist = agg.get("hist")  # the value, then the keys (agg_keys)
        merged = Aggregate(hist=hist[0] if hist else base.hist, keys=agg.get("count", base.keys),
                           sum=agg.get("sum", base.sum), max_keys=agg.get("max_keys", base.max_keys),
                           stack=agg.get("stack", base.stack),
                           hist_keys=tuple(hist[1:]) if hist else base.hist_keys)
        try:
            # a span's end has a latency too: its `since:` is read with the other keys
            check_aggregate(merged, probe.kind, probe.timed or "since" in items)
            if probe.target.is_user:
                check_user_aggregate(merged)
            wildcards.check_aggregate(probe, merged)
        except SpecError as err:
            key = next((k for k in AGG_KEYS if k in agg and err.message.startswith(k)),
                       next(k for k in AGG_KEYS if k in agg))
            message = err.message if err.message.startswith(key) else f"{key}: {err.message}"
            self.fail(items[key][1], message, prefix)
        return dataclasses.replace(probe, agg=merged)

    def probe_filter(self, scalar: ScalarNode, prefix: str):
        if not scalar.value.strip():
            self.fail(scalar, "filter: must not be empty (leave the key out for no filter)", prefix)
        try:
            return parse_filter(scalar.value)
        except SpecError as err:
            self.fail_inside(scalar, err, prefix + "filter: ")


_BINARY_NOT_WITH = {
    "spec": "with spec: write PATH:FUNCTION:c (or PATH:PROVIDER:NAME:usdt) in the spec",
    "tracepoint": "a tracepoint is the kernel's, not a file's",
}


def with_set_maxactive(probes: tuple[Probe, ...], maxactive: int) -> tuple[Probe, ...]:
    """The set's `maxactive:` given to each return probe that sets none
    (not to a user function's: a uretprobe has none)."""
    if not maxactive:
        return probes
    return tuple(dataclasses.replace(p, maxactive=maxactive)
                 if p.kind is Kind.RETURN and not p.maxactive and not p.target.is_user else p
                 for p in probes)


def _errno_mode(word: str) -> str:
    """`errno:` as Probe.errno: `auto` is what no key says."""
    return "" if word == "auto" else word


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
        name = next((found[k] for k in (*FORMS, "label") if found.get(k)), None)
    if name is not None:
        name = name if len(name) <= 48 else name[:45] + "..."
        return f"probe {number} ({name}): "
    return f"probe {number}: "


def _agg_fetch(text: str, kind: Kind | None = None):
    """One aggregated fetch; the kind and type rules are check_aggregate's
    (but a tracepoint's names are its fields from the start: `kind`)."""
    return parse_fetch(text.strip(), kind) if text.strip() else parse_fetch(text, kind)
