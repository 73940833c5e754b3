"""The parsed, frozen data model shared by every layer of ktui.

Text (a spec string, a YAML file) is parsed into these dataclasses by
`ktui.lang.spec` and `ktui.lang.probeset`; `ktui.kernel.codegen` turns them into C. Nothing
here imports Textual or Rich, and nothing here knows about the kernel.

Every node prints back to its canonical text with `str()`, and parsing that
text again gives an equal object (the round-trip property the tests check).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Union


class KtuiError(Exception):
    """Every error ktui reports to a user: one line, optionally located.

    `str(err)` gives `file:line:col: message` when a location is known, so
    the CLI and the dashboard can print it as is, never a traceback.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        col: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.source = source
        self.line = line
        self.col = col

    def located(
        self, *, source: str | None = None, line: int | None = None, col: int | None = None
    ) -> "KtuiError":
        """A copy of this error with a location filled in where it had none."""
        return type(self)(
            self.message,
            source=self.source if self.source is not None else source,
            line=self.line if self.line is not None else line,
            col=self.col if self.col is not None else col,
        )

    def __str__(self) -> str:
        where = [str(p) for p in (self.source, self.line, self.col) if p is not None]
        return ":".join(where + [" " + self.message]) if where else self.message


class SpecError(KtuiError):
    """A probe spec or filter expression does not parse. `col` is 1-based."""


class ProbeSetError(KtuiError):
    """A YAML probe set is invalid."""


class Kind(enum.Enum):
    CALL = "c"  # kprobe (a uprobe on a user function) at entry, or at an offset / address
    RETURN = "r"  # kretprobe, or uretprobe (ktui adds an entry probe to measure latency)
    TRACEPOINT = "t"  # a static tracepoint (tracefs events/CATEGORY/NAME): fields by name
    USDT = "usdt"  # a USDT probe point of a user binary (its .note.stapsdt): a uprobe there


# Fetch types, as in the kernel's kprobe_events syntax. None means "default":
# u64 for arguments and registers, s64 for retval (so errnos show negative).
INT_TYPES = ("u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "x8", "x16", "x32", "x64")
STRING_TYPES = ("string", "ustring")  # kernel / user memory, NUL-terminated, bounded
FETCH_TYPES = INT_TYPES + STRING_TYPES + ("symbol",)

# x86-64 registers by their pt_regs field name (what the C code uses).
# The parser accepts rax/eax-style names and the short pt_regs names.
REGISTERS = (
    "ax", "bx", "cx", "dx", "si", "di", "bp", "sp",
    "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
    "ip", "flags",
)
# The x86-64 SysV calling convention: a1..a6.
ARG_REGISTERS = ("di", "si", "dx", "cx", "r8", "r9")
HEADER_BUILTINS = ("comm", "pid", "tid", "cpu")  # every record's header holds them
# `func`: which of a wildcard's functions (tracepoints) the hit came from,
# shown as its name (Probe.members); 8 bytes of payload, in wildcards only.
# `cgroup`: the task's cgroup v2 id (its directory's inode), shown as the
# directory's path (lang.cgroups); 8 bytes of payload, generic engine only.
# `latency`: a timed probe's hit's latency in ns (lang.latency): a filter
# operand and a sum's value, not an event's fetch; generic engine only
BUILTINS = HEADER_BUILTINS + ("func", "cgroup", "latency")
TEXT_BUILTINS = ("comm", "func", "cgroup")  # shown as text (the kernel holds a number for func and cgroup)


def reg_display(name: str) -> str:
    """`ax` -> `rax`, `r8` -> `r8`, `flags` -> `flags`: the canonical spelling."""
    if name in ("ip", "flags") or name.startswith("r"):
        return "rip" if name == "ip" else name
    return "r" + name


# ---------------------------------------------------------------- fetches


@dataclass(frozen=True)
class Arg:
    """The n-th function argument, 1-based (`a1` .. `a6`)."""

    index: int

    def __str__(self) -> str:
        return f"a{self.index}"


@dataclass(frozen=True)
class UsdtArg:
    """The n-th argument of a USDT probe point (`a1` in `PATH:PROV:NAME:usdt`).

    Not an `Arg`: a USDT argument is wherever the compiler put it (a
    register of any width, a stack slot, a constant), which only the
    probe's note says, never the SysV registers. So the grammar makes this
    node in a USDT probe, it prints `a1` as written (the parse tree stays
    what the user wrote), and `ktui.kernel.symbols.usdt.bind_usdt` fills
    `binding` (ignored by equality, as a `Named`'s) from the note:
    `positional()` then gives what reads it (`Reg`, `Deref`, `Const`);
    unbound it refuses, rather than read a1's register by mistake."""

    index: int
    binding: "Binding | None" = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"a{self.index}"


@dataclass(frozen=True)
class Const:
    """A value known when the program was built: a USDT argument the
    compiler wrote as a constant (`4@$5`). Only a binding makes one
    (`bind_usdt`); nothing parses it."""

    value: int

    def __str__(self) -> str:
        return f"const({self.value})"


@dataclass(frozen=True)
class Reg:
    """A register, by pt_regs field name (`di`, `r8`, `ip`)."""

    name: str

    def __str__(self) -> str:
        return reg_display(self.name)


@dataclass(frozen=True)
class RetVal:
    """The return value (return probes only)."""

    def __str__(self) -> str:
        return "retval"


@dataclass(frozen=True)
class Builtin:
    """Process context every event carries anyway (comm, pid, tid, cpu), a
    wildcard hit's function (func), or the task's cgroup (cgroup)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Deref:
    """`+OFFSET(INNER)`: memory at INNER + OFFSET (kernel memory unless the
    fetch type is `ustring`; always user memory in a user probe)."""

    offset: int
    inner: "FetchExpr"

    def __str__(self) -> str:
        sign = "-" if self.offset < 0 else "+"
        return f"{sign}{abs(self.offset)}({self.inner})"


@dataclass(frozen=True)
class Step:
    """One step of a member chain: `->name` (through a pointer) or `.name`
    (a member of an embedded struct or union)."""

    op: str  # "->" or "."
    name: str

    def __str__(self) -> str:
        return f"{self.op}{self.name}"


@dataclass(frozen=True)
class Binding:
    """What a name means in the running kernel, from its BTF (`lang.bind`):
    the positional expression that reads it (None in a replay, where only
    the types are known), its default fetch type and its C type."""

    expr: "FetchExpr | None"
    type: str
    ctype: str


@dataclass(frozen=True)
class Named:
    """A parameter by its name, and members through it: `count`,
    `file->f_path.dentry`. Written `args.NAME` when NAME is a predefined
    word (`args.flags`, `args.pid`). The kernel's BTF gives it a meaning
    (`binding`, ignored by equality: the same text is the same fetch);
    until then it cannot be compiled."""

    param: str
    steps: tuple[Step, ...] = ()
    binding: Binding | None = field(default=None, compare=False)

    def __str__(self) -> str:
        from ktui.lang.names import is_reserved  # names imports this module

        # `start.x` is a span's start value (StartValue): a parameter named
        # start with a member is written args.start.x
        start_member = self.param == "start" and bool(self.steps) and self.steps[0].op == "."
        reserved = is_reserved(self.param) or self.param == "args" or start_member
        head = f"args.{self.param}" if reserved else self.param
        return head + "".join(str(s) for s in self.steps)


@dataclass(frozen=True)
class Record:
    """The start of a tracepoint's record: what its fields are read
    relative to (`+24(record)`). Only a binding makes one (`lang.bind`):
    the spec names the field."""

    def __str__(self) -> str:
        return "record"


@dataclass(frozen=True)
class DataLoc:
    """A tracepoint record's dynamic field (`__data_loc` or `__rel_loc`):
    a u32 at `offset` in the record holds `length << 16 | where`, `where`
    counting from the record's start (data_loc) or from the end of that
    u32 (rel_loc). Only a binding makes one (`lang.bind`); the spec says
    the field's name."""

    offset: int
    relative: bool = False

    def __str__(self) -> str:
        return f"{'__rel_loc' if self.relative else '__data_loc'}(+{self.offset})"


@dataclass(frozen=True)
class StartValue:
    """`start.EXPR` at a span's end: a value its START read (`start.count`,
    `start.a3`, `start.file->f_pos`), stored with the start and taken by the
    end with it (lang.spans). `inner` is EXPR as written (parsed as a
    kernel function's fetch reads it: the start's own kind reads it again,
    lang.spans.start_values); `carried` (ignored by equality, as a
    binding) is the START's fetch of it, read as the start's kind reads it
    and bound to its BTF or fields, once known: its type is this value's."""

    inner: "FetchExpr"
    carried: "Fetch | None" = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"start.{self.inner}"


FetchExpr = Union[Arg, Reg, RetVal, Builtin, Deref, Named, Record, DataLoc, UsdtArg, Const, StartValue]


def positional(expr: "FetchExpr") -> "FetchExpr":
    """`expr` with every name replaced by what its binding reads: what
    codegen and the generic program run. A name without a binding here is
    a bug in the caller (the session binds every probe before loading)."""
    if isinstance(expr, Named):
        if expr.binding is None or expr.binding.expr is None:
            raise ValueError(f"{expr} is not bound to the kernel's BTF")
        return expr.binding.expr
    if isinstance(expr, UsdtArg):
        if expr.binding is None or expr.binding.expr is None:
            raise ValueError(f"{expr} is not bound to its USDT note (bind_usdt)")
        return expr.binding.expr
    if isinstance(expr, Deref):
        inner = positional(expr.inner)
        return expr if inner is expr.inner else Deref(expr.offset, inner)
    return expr


def has_names(expr: "FetchExpr") -> bool:
    while isinstance(expr, Deref):
        expr = expr.inner
    return isinstance(expr, Named)


@dataclass(frozen=True)
class Fetch:
    """One value a probe captures: `[label=]EXPR[:type]`."""

    expr: FetchExpr
    type: str | None = None  # one of FETCH_TYPES, None = default
    label: str | None = None

    @property
    def name(self) -> str:
        """What the value is called in events, filters and the UI."""
        return self.label if self.label is not None else str(self.expr)

    @property
    def effective_type(self) -> str:
        if self.type is not None:
            return self.type
        if isinstance(self.expr, RetVal):
            return "s64"
        if isinstance(self.expr, Builtin):
            if self.expr.name == "latency":
                return "u64"  # nanoseconds: 4.3 s would not fit a u32
            return "string" if self.expr.name in TEXT_BUILTINS else "u32"
        if isinstance(self.expr, (Named, UsdtArg)) and self.expr.binding is not None:
            return self.expr.binding.type
        if isinstance(self.expr, StartValue) and self.expr.carried is not None:
            return self.expr.carried.effective_type  # the start's value, as the start read it
        return "u64"

    @property
    def ctype(self) -> str | None:
        """The C type of a fetch by name, once bound (`size_t`, `loff_t`;
        a USDT argument's note spec, `usdt -4@%edi`)."""
        if isinstance(self.expr, (Named, UsdtArg)) and self.expr.binding is not None:
            return self.expr.binding.ctype
        if isinstance(self.expr, StartValue) and self.expr.carried is not None:
            return self.expr.carried.ctype
        return None

    def __str__(self) -> str:
        text = str(self.expr)
        if self.label is not None:
            text = f"{self.label}={text}"
        if self.type is not None:
            text = f"{text}:{self.type}"
        return text


# ---------------------------------------------------------------- filters


@dataclass(frozen=True)
class Field:
    """A name in a filter: a fetch label, `aN`, `retval`, comm/pid/tid/cpu,
    or a register. Resolved against the probe by codegen."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class IntLit:
    value: int
    # a duration as written (`100ms`: value 100000000 ns, unit "ms"),
    # compared with latency only (lang.latency); "" for a plain number.
    # Printed as written; equal to the same number of ns written plainly.
    unit: str = field(default="", compare=False)

    def __str__(self) -> str:
        if self.unit:
            return f"{self.value // DURATION_UNITS[self.unit]}{self.unit}"
        return str(self.value)


# a filter's duration literals (`latency > 100ms`): nanoseconds per unit
DURATION_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


@dataclass(frozen=True)
class StrLit:
    value: str

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'


Operand = Union[Field, IntLit, StrLit]
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class Compare:
    op: str  # one of COMPARE_OPS
    left: Operand
    right: Operand

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class And:
    left: "FilterExpr"
    right: "FilterExpr"

    def __str__(self) -> str:
        return f"{_paren(self.left, And)} && {_paren(self.right, And, right=True)}"


@dataclass(frozen=True)
class Or:
    left: "FilterExpr"
    right: "FilterExpr"

    def __str__(self) -> str:
        return f"{_paren(self.left, Or)} || {_paren(self.right, Or, right=True)}"


@dataclass(frozen=True)
class Not:
    operand: "FilterExpr"

    def __str__(self) -> str:
        inner = self.operand
        if isinstance(inner, (Compare, And, Or)):
            return f"!({inner})"
        return f"!{inner}"


FilterExpr = Union[Compare, And, Or, Not]


def _paren(node: "FilterExpr", parent: type, *, right: bool = False) -> str:
    # Parenthesise a child whose operator differs from its parent's, so the
    # printed text parses back to the same tree whatever the precedence.
    # A right child with the same operator too: the parser groups a chain to
    # the left, so a && (b && c) must not print as a && b && c.
    if isinstance(node, (And, Or)) and (right or not isinstance(node, parent)):
        return f"({node})"
    return str(node)


# ---------------------------------------------------------------- probes


@dataclass(frozen=True, eq=False)
class Target:
    """Where a probe attaches: `symbol[+offset]`, a raw kernel address, a
    tracepoint `CATEGORY/NAME` (tracefs' own path: `syscalls/sys_enter_openat`),
    or, with `path`, a function of a user binary or library (a uprobe):
    `PATH:SYMBOL[+0xOFF]` or `PATH:0xADDR`, the address in the file's own
    virtual addresses (as `nm` and `objdump` print them); or, with `path`
    and `usdt` ("PROVIDER:NAME"), a USDT probe point of that file
    (`PATH:PROVIDER:NAME`, kind usdt: ktui.kernel.symbols.usdt).

    `alternatives`: kernel functions of which the first this kernel has is
    probed (`a|b`, YAML `function: [a, b]`; `lang.alternatives`). `symbol`
    is the one in use: the first until one is chosen. Equality ignores it
    then, as it ignores a binding: the same text is the same target."""

    symbol: str | None = None
    offset: int = 0
    address: int | None = None
    tracepoint: str | None = None
    path: str | None = None  # absolute; a user function's file (ktui.kernel.symbols.uprobe_target)
    alternatives: tuple[str, ...] = ()  # two or more kernel functions, in the order written
    usdt: str | None = None  # "PROVIDER:NAME" of a USDT probe point in `path`

    @property
    def usdt_provider(self) -> str:
        return (self.usdt or "").partition(":")[0]

    @property
    def usdt_name(self) -> str:
        return (self.usdt or "").partition(":")[2]

    @property
    def is_user(self) -> bool:
        """A function in a user binary or library, not in the kernel."""
        return self.path is not None

    @property
    def is_wildcard(self) -> bool:
        """A pattern (`tcp_*`, `syscalls/sys_enter_*`): one probe on every
        kernel function or tracepoint it matches (`members`, once bound)."""
        name = self.tracepoint if self.tracepoint is not None else self.symbol
        return self.path is None and name is not None and any(c in name for c in WILDCARD_CHARS)

    def _key(self) -> tuple:
        symbol = None if self.alternatives else self.symbol
        return (symbol, self.offset, self.address, self.tracepoint, self.path, self.alternatives, self.usdt)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Target):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        if self.tracepoint is not None:
            return self.tracepoint
        if self.alternatives:
            return "|".join(self.alternatives)
        if self.usdt is not None:
            where = self.usdt
        elif self.address is not None:
            where = f"0x{self.address:x}"
        elif self.offset:
            where = f"{self.symbol}+0x{self.offset:x}"
        else:
            where = str(self.symbol)
        return where if self.path is None else f"{self.path}:{where}"


ATTACH_MODES = ("auto", "kprobe", "fentry")
WILDCARD_CHARS = "*?["  # fnmatch's: a kernel function or tracepoint name with one is a pattern
ERRNO_MODES = ("", "on", "off")  # Probe.errno: "" (by BTF), or the probe set's `errno:`

AGG_KEYS_MAX = 4  # fetches a `count:` key holds
AGG_MAX_KEYS_DEFAULT = 10240  # distinct keys a probe's count map holds


@dataclass(frozen=True)
class Aggregate:
    """What a probe aggregates in the kernel (`lang.aggregate`): a log2
    histogram of an integer fetch (`hist`), hits counted by the fetched
    values (`keys`, the YAML `count:` list), and the total of an integer
    fetch per key (`sum`; one total when there are no keys). `max_keys`
    bounds the count map; keys past it are dropped and counted.
    `hist_keys`: `hist(VALUE, KEY...)`, one histogram per key, kept in the
    count map as one entry per (key, slot). A probe has one key: when
    `count` names keys too they are the same (lang.aggregate checks it)."""

    hist: "Fetch | None" = None
    keys: tuple["Fetch", ...] = ()
    sum: "Fetch | None" = None
    max_keys: int = AGG_MAX_KEYS_DEFAULT
    stack: str | None = None  # "kernel", "user" or "both": each hit's call stack counted
    hist_keys: tuple["Fetch", ...] = ()

    @property
    def counts(self) -> bool:
        """Whether the probe has a count map (keys, or a sum)."""
        return bool(self.keys) or self.sum is not None

    @property
    def key_fetches(self) -> tuple["Fetch", ...]:
        """The probe's key: count's keys, else its histogram's (the same
        when both name some): what a count, a sum and a keyed histogram
        are kept by."""
        return self.keys or self.hist_keys

    def fetches(self) -> tuple["Fetch", ...]:
        extra = tuple(f for f in (self.hist, self.sum) if f is not None)
        return extra + self.key_fetches

    def __str__(self) -> str:
        """The short form after a spec: `hist(a3) count(comm) sum(retval)`."""
        parts = []
        if self.hist is not None:
            parts.append(f"hist({','.join(str(f) for f in (self.hist,) + self.hist_keys)})")
        if self.keys:
            parts.append(f"count({','.join(str(k) for k in self.keys)})")
        if self.sum is not None:
            parts.append(f"sum({self.sum})")
        if self.max_keys != AGG_MAX_KEYS_DEFAULT:
            parts.append(f"max_keys({self.max_keys})")
        if self.stack is not None:
            parts.append(f"stack({self.stack})")
        return " ".join(parts)


@dataclass(frozen=True)
class Probe:
    """One kprobe or kretprobe with what it fetches and when it fires.

    `spec_text` is the compact form `TARGET:KIND[:FETCH,...]`; a spec may
    start with the label (`reads=vfs_read:c:a3`). The filter and the rest
    live beside it (in YAML, or `-e 'SPEC if FILTER'` on the command line).
    """

    target: Target
    kind: Kind
    fetches: tuple[Fetch, ...] = ()
    filter: FilterExpr | None = None
    label: str | None = None
    enabled: bool = True
    sample: int = 1  # emit one event in `sample` (stats still count all)
    rate_limit: int | None = None  # max events/s emitted per CPU, None = no cap
    # How it enters the kernel: "auto" (fentry/fexit where the kernel allows,
    # else a kprobe, the log saying why), "kprobe", "fentry" (forced: where
    # the kernel refuses it the probe fails with the reason), or "" (not
    # said: the set's `attach:`, else the session's default). ATTACH_MODES.
    attach: str = ""
    # Instances of a return probe's kretprobe (calls it can follow at once,
    # limits.MAXACTIVE_MIN..MAX); 0: the kernel's default. Returns past it
    # are missed, and counted (ProbeStats.missed_returns).
    maxactive: int = 0
    # Filter names that are parameters, bound to the kernel's BTF
    # (`lang.bind`): name -> Named with its binding; in a USDT probe, a1..aN
    # bound to its note (`bind_usdt`): name -> UsdtArg. None: not bound (yet).
    bindings: "dict[str, Named | UsdtArg] | None" = field(default=None, compare=False)
    # In-kernel aggregations of fetched values (hist/count/sum), or None
    agg: Aggregate | None = None
    # Whether a return probe counts errnos (ERRNO_MODES): "" decides by the
    # function's return type in BTF (`lang.errnos`), "on"/"off" as the
    # probe set says (`errno:`). Call probes have none.
    errno: str = ""
    # What BTF says the function returns, bound with the probe (`lang.bind`;
    # None: not known, no BTF): `errno_width` the bytes of the return value
    # an errno is read from (4: int-like, 8: long or a pointer's ERR_PTR,
    # 0: none can be: void, unsigned, bool, enum, struct) and `return_class`
    # its class (errnos.RETURN_CLASSES), which says why in words.
    errno_width: int | None = field(default=None, compare=False)
    return_class: str = field(default="", compare=False)
    # A wildcard's matches on this kernel (Target.is_wildcard): the kernel
    # functions or tracepoints `CATEGORY/NAME` it is attached to, sorted.
    # None: not a wildcard, or not bound yet.
    members: tuple[str, ...] | None = field(default=None, compare=False)
    # `within: FUNC` (a gate): the probe counts only while its thread is
    # inside this kernel function (ktui.kernel.session.gates), or with a
    # GateSpan `within(START .. END)`, between a START and its END in the
    # thread; None: always
    within: "str | GateSpan | None" = None
    # `since: START` (a span): the probe is a span's end, and START (a
    # probe of its own, lang.spans) its start; each hit of the end is
    # joined to its start by a key (START's fetches, matched against the
    # end's first ones; none: the thread), and counts the time between.
    # The end reads values of its start as `start.EXPR` (StartValue), in
    # its fetches, filter and aggregations. None: not a span.
    since: "Probe | None" = None

    @property
    def timed(self) -> bool:
        """Whether its hits have a latency: a return probe's (since its
        call), a span end's (since its start)."""
        return self.kind is Kind.RETURN or self.since is not None

    @property
    def uses_names(self) -> bool:
        """Whether a fetch, or an aggregation's, reads a parameter by name
        (needs BTF to run)."""
        fetches = self.fetches + (self.agg.fetches() if self.agg is not None else ())
        return any(has_names(f.expr) for f in fetches)

    @property
    def spec_text(self) -> str:
        """`TARGET:KIND[:FETCH,...]`, the probe without its label."""
        text = f"{self.target}:{self.kind.value}"
        if self.fetches:
            text += ":" + ",".join(str(f) for f in self.fetches)
        return text

    @property
    def name(self) -> str:
        return self.label if self.label is not None else self.spec_text

    @property
    def emits_events(self) -> bool:
        """A probe without fetches only counts (stats-only, nothing streamed)."""
        return bool(self.fetches)

    def __str__(self) -> str:
        """The compact form: `label=spec` when the label is a word (what the
        spec grammar takes, as perf probe's EVENT=FUNC), else the spec."""
        label = self.label
        if isinstance(label, str) and label.isascii() and label.isidentifier():
            return f"{label}={self.spec_text}"
        return self.spec_text



@dataclass(frozen=True)
class GateSpan:
    """A gate between two events of a thread, `within(START .. END)`
    (`within: {from: START, to: END}` in a probe set): each START a thread
    goes through puts it one deeper inside, each END one less (lang.spans
    check_gate_ends). START and END are probes alone, `TARGET:KIND`, of
    any kind: a kernel function's call or return, a tracepoint, a user
    function's, a USDT probe. `within(FUNC)` is the same gate from FUNC:c
    to FUNC:r, kept by one probe on FUNC."""

    start: Probe
    end: Probe

    def __str__(self) -> str:
        """`START .. END`, as `within(...)` takes it back."""
        return f"{self.start.spec_text} .. {self.end.spec_text}"


@dataclass(frozen=True)
class ProbeSet:
    name: str
    description: str = ""
    probes: tuple[Probe, ...] = ()
    pid: int | None = None  # set-wide filters, applied in the kernel
    comm: str | None = None
    # set-wide: only tasks in this cgroup v2 directory or below it (a path
    # under /sys/fs/cgroup, or relative to it: kernel/attach/cgroup_scope)
    cgroup: str | None = None
    source: str | None = field(default=None, compare=False)  # file it came from
    # the set's `maxactive:`, given to its return probes that set none (and
    # to return probes added later); 0: the kernel's default
    maxactive: int = 0
    # the set's `attach:` (ATTACH_MODES), for probes that say none; "":
    # the session's default
    attach: str = ""

    @property
    def emits_events(self) -> bool:
        """Whether a probe of the set writes events (it has fetches): then its
        buffers must be drained, or the kernel counts the events lost. A set
        that only counts never writes one."""
        return any(p.emits_events for p in self.probes)
