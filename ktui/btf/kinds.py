"""BTF kind numbers and the groups of kinds decoding and rendering need.

Apart from ktui.btf.types so that listing functions, which never builds a
decoded record, does not pay for creating twenty dataclasses at import
(30 ms on the host, over a second in the emulated VM).
"""

from __future__ import annotations

import enum


class Kind(enum.IntEnum):
    VOID = 0  # type id 0 only: BTF_KIND_UNKN never has a record
    INT = 1
    PTR = 2
    ARRAY = 3
    STRUCT = 4
    UNION = 5
    ENUM = 6
    FWD = 7
    TYPEDEF = 8
    VOLATILE = 9
    CONST = 10
    RESTRICT = 11
    FUNC = 12
    FUNC_PROTO = 13
    VAR = 14
    DATASEC = 15
    FLOAT = 16
    DECL_TAG = 17
    TYPE_TAG = 18
    ENUM64 = 19


# Kinds that only wrap another type: a typedef names it, the others qualify it.
WRAPPERS = frozenset({Kind.TYPEDEF, Kind.VOLATILE, Kind.CONST, Kind.RESTRICT, Kind.TYPE_TAG})
QUALIFIERS = {Kind.CONST: "const", Kind.VOLATILE: "volatile", Kind.RESTRICT: "restrict"}

# BTF_FUNC_STATIC, BTF_FUNC_GLOBAL, BTF_FUNC_EXTERN
LINKAGE = ("static", "global", "extern")
