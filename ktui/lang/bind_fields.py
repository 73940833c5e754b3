"""A tracepoint's names, bound to the fields of its record (`lang.bind`'s
other binder: a function's come from BTF, an event's from its tracefs
format, `lang.tracepoints`).

Each field becomes a read relative to the record's start:

    int dfd          (offset 16, size 8)  -> +16(record):s32
    const char * filename  :ustring       -> +0(+24(record)):ustring
    char prev_comm[16]     (offset 8)     -> +8(record):string
    __data_loc char[] filename (offset 8) -> __data_loc(+8):string
    unsigned long call_site               -> +8(record):x64

An integer keeps its C type's width and sign where the record stores it
wider (syscalls' enter events store every argument in 8 bytes: `int dfd`
must read -100 for AT_FDCWD, not 4294967196), else the field's own size
and sign; pointers, and the `unsigned long`s that name code addresses,
default to hex. A `char *` is an address until typed: `:ustring` at the
syscalls (user memory), `:string` for a kernel pointer. Dynamic and inline
char arrays are in the record, so kernel memory: `:ustring` on them is
refused, and so are arrays of anything but char (not readable yet).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ktui.lang.model import (
    INT_TYPES,
    STRING_TYPES,
    Binding,
    DataLoc,
    Deref,
    FetchExpr,
    Named,
    Probe,
    Record,
    SpecError,
)
from ktui.lang.tracepoints import TracepointError, TracepointField, TracepointFormat

# Integer C types whose width and sign are the type's own, whatever room
# the record gives them (width in bytes, signed).
_PLAIN_INTS: dict[str, tuple[int, bool]] = {
    "char": (1, True), "signed char": (1, True), "unsigned char": (1, False),
    "bool": (1, False), "_Bool": (1, False),
    "short": (2, True), "short int": (2, True), "signed short": (2, True),
    "unsigned short": (2, False), "short unsigned int": (2, False), "unsigned short int": (2, False),
    "int": (4, True), "signed int": (4, True), "signed": (4, True),
    "unsigned int": (4, False), "unsigned": (4, False),
    "long": (8, True), "long int": (8, True), "unsigned long": (8, False),
    "long unsigned int": (8, False), "unsigned long int": (8, False),
    "long long": (8, True), "long long int": (8, True), "unsigned long long": (8, False),
    **{f"{p}{s}{bits}": (bits // 8, s == "s") for p in ("", "__") for s in ("u", "s")
       for bits in (8, 16, 32, 64)},
}
# `unsigned long` fields that hold a code address (kmalloc's call_site, the
# irq events' ip): shown in hex, readable with :symbol.
_ADDRESS_NAMES = ("call_site", "ip")


@dataclass(frozen=True)
class EventFields:
    """`bind.Binder` over one event's format."""

    tracepoint: str  # `syscalls/sys_enter_openat`
    format: TracepointFormat

    @classmethod
    def of(cls, probe: Probe, kernel: object) -> "EventFields | None":
        """The binder of `probe`'s event, None where `kernel` reads no
        formats (the probe is bound where it runs). SpecError at column 1
        (the target) when the format cannot be had."""
        tracepoint = probe.target.tracepoint or ""
        if kernel is not None and not hasattr(kernel, "tracepoint_format"):
            return None
        col = 1
        if kernel is None:
            raise SpecError(f"{tracepoint}: a tracepoint's fields need its format from tracefs "
                            "(no kernel to read it from)", col=col)
        try:
            return cls(tracepoint, kernel.tracepoint_format(tracepoint))
        except TracepointError as err:
            raise SpecError(err.message, col=col) from None

    # -- bind.Binder

    def bind(self, named: Named, want: str | None, col: int | None, type_col: int | None, *,
             as_address: bool = False, known: tuple[str, ...] = ()) -> Binding:
        if named.steps:
            raise SpecError(f"{named}: a tracepoint's field has no members to name (tracefs gives "
                            "its C type as text, not a BTF type)", col=col)
        field = self.format.field(named.param)
        if field is None:
            raise SpecError(self._no_field(named.param, known), col=col)
        what = str(named)
        if as_address:
            if not _holds_address(field):
                raise SpecError(f"+OFFSET({what}) reads memory at {what}, but {what} is a "
                                f"{field.type_text}, not a pointer", col=col)
            return Binding(_at(field), "x64", field.type_text)
        return field_binding(what, field, want, col, type_col)

    def check_filter_binding(self, name: str, binding: Binding, probe: Probe) -> str | None:
        if binding.type == "ustring":
            return f"{name} is user memory: fetch it too ({probe.target}:t:...,{name}:ustring) to filter on it"
        return None  # the record is the program's to read: no fetch needed

    def _no_field(self, name: str, known: tuple[str, ...]) -> str:
        fields = self.format.field_names()
        own = [f for f in fields if not f.startswith("common_")]
        close = difflib.get_close_matches(name, list(known), n=2, cutoff=0.6)
        close += [c for c in difflib.get_close_matches(name, fields, n=3, cutoff=0.5) if c not in close]
        mean = f" (did you mean {', '.join(close)}?)" if close else ""
        return (f"{self.tracepoint} has no field {name!r}{mean}: its fields are "
                f"{', '.join(own) or '(none)'}, and common_pid, common_flags, ...")


def _at(field: TracepointField) -> FetchExpr:
    return Deref(field.offset, Record())


def _holds_address(field: TracepointField) -> bool:
    return field.loc == "" and field.array is None and (field.is_pointer or field.size == 8)


def field_binding(what: str, field: TracepointField, want: str | None, col: int | None,
                  type_col: int | None) -> Binding:
    """How `field` is read as `want` (None: its own type)."""
    text = field.type_text
    if field.loc or field.array is not None:
        return _text_binding(what, field, want, col, type_col)
    if want in STRING_TYPES:
        if not field.is_pointer:
            raise SpecError(f"{what} is a {text}, not a pointer or a char array: :{want} reads "
                            "text through a pointer", col=type_col)
        # The plan reads a string at its last address: one more hop, through the pointer.
        return Binding(Deref(0, _at(field)), want, text)
    if want == "symbol":
        if not _holds_address(field):
            raise SpecError(f"{what} is a {text}: :symbol names a code address (a pointer or an "
                            "unsigned long)", col=type_col)
        return Binding(_at(field), want, text)
    if want is not None:
        return Binding(_at(field), want, text)  # the user's width and sign
    return Binding(_at(field), default_type(what, field, col), text)


def _text_binding(what: str, field: TracepointField, want: str | None, col: int | None,
                  type_col: int | None) -> Binding:
    """A char array in the record (inline, or __data_loc/__rel_loc)."""
    if not field.is_char:
        raise SpecError(f"{what} is an array of {field.ctype}: not readable yet", col=col)
    if want == "ustring":
        raise SpecError(f"{what} is a {field.type_text} in the tracepoint's record, kernel memory: "
                        "read it as :string", col=type_col)
    if want not in (None, "string"):
        raise SpecError(f"{what} is text ({field.type_text}): read it as :string, not :{want}",
                        col=type_col)
    if field.loc:
        return Binding(DataLoc(field.offset, relative=field.loc == "rel"), "string", field.type_text)
    return Binding(_at(field), "string", field.type_text)  # the characters lie in the record


def default_type(what: str, field: TracepointField, col: int | None) -> str:
    """A scalar field's fetch type when the user gave none."""
    if field.is_pointer or (field.ctype in ("unsigned long", "long unsigned int")
                            and (field.name in _ADDRESS_NAMES or field.name.endswith("_ip"))):
        return "x64"
    plain = _PLAIN_INTS.get(" ".join(field.ctype.split()))
    if plain is not None and plain[0] < field.size:
        width, signed = plain  # stored wider than its type (a syscall's argument slot)
    else:
        width, signed = field.size, field.signed
    if width not in (1, 2, 4, 8):
        raise SpecError(f"{what} is a {field.type_text} of {field.size} bytes: ktui reads integers "
                        "of 1, 2, 4 or 8 bytes", col=col)
    kind = f"{'s' if signed else 'u'}{width * 8}"
    assert kind in INT_TYPES
    return kind


def listed_type(field: TracepointField) -> str | None:
    """What `field` reads as with no type of the user's (`ktui list` shows
    it beside the field): the binding's own rule, so the listing never says
    other than what a probe reads. None: ktui cannot read it yet."""
    try:
        return field_binding(field.name, field, None, None, None).type
    except SpecError:
        return None
