"""Decoded BTF records, one frozen dataclass per kind of type.

The layouts are the kernel's (include/uapi/linux/btf.h,
Documentation/bpf/btf.rst): every record is a 12-byte `struct btf_type`
(name offset, info word, size or type) followed by data that depends on
its kind. Type id 0 is `void` and has no record. Sizes are in bytes,
member offsets in bits (a bitfield's offset need not be a whole byte).
"""

from __future__ import annotations

from dataclasses import dataclass

from ktui.btf.kinds import LINKAGE, QUALIFIERS, WRAPPERS, Kind  # noqa: F401 (re-exported)


@dataclass(frozen=True, slots=True)
class Type:
    id: int
    kind: Kind
    name: str  # "" when anonymous


@dataclass(frozen=True, slots=True)
class Void(Type):
    pass


@dataclass(frozen=True, slots=True)
class Int(Type):
    size: int
    bits: int
    bit_offset: int
    signed: bool
    char: bool
    bool: bool


@dataclass(frozen=True, slots=True)
class Float(Type):
    size: int


@dataclass(frozen=True, slots=True)
class Ptr(Type):
    type: int


@dataclass(frozen=True, slots=True)
class Array(Type):
    type: int  # the element type
    index_type: int
    nelems: int


@dataclass(frozen=True, slots=True)
class Member:
    name: str  # "" for an anonymous struct or union member
    type: int
    bit_offset: int  # from the start of the enclosing struct
    bitfield_size: int  # 0 unless a bitfield


@dataclass(frozen=True, slots=True)
class Composite(Type):
    """A struct or a union (`kind` says which)."""

    size: int
    members: tuple[Member, ...]


@dataclass(frozen=True, slots=True)
class EnumValue:
    name: str
    value: int


@dataclass(frozen=True, slots=True)
class Enum(Type):
    """ENUM (32-bit values) and ENUM64 alike."""

    size: int
    signed: bool
    values: tuple[EnumValue, ...]


@dataclass(frozen=True, slots=True)
class Fwd(Type):
    union: bool


@dataclass(frozen=True, slots=True)
class Ref(Type):
    """A typedef, a qualifier (const, volatile, restrict) or a type tag."""

    type: int


@dataclass(frozen=True, slots=True)
class Func(Type):
    type: int  # its FUNC_PROTO
    linkage: str


@dataclass(frozen=True, slots=True)
class Param:
    name: str  # "" when BTF has no name for it
    type: int


@dataclass(frozen=True, slots=True)
class FuncProto(Type):
    ret: int
    params: tuple[Param, ...]
    variadic: bool


@dataclass(frozen=True, slots=True)
class Var(Type):
    type: int
    linkage: int


@dataclass(frozen=True, slots=True)
class SecVar:
    type: int
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class Datasec(Type):
    size: int
    vars: tuple[SecVar, ...]


@dataclass(frozen=True, slots=True)
class DeclTag(Type):
    type: int
    component: int  # -1: the tag is on the type itself


VOID = Void(0, Kind.VOID, "void")
