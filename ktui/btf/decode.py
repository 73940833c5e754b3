"""One BTF blob: its header, strings and records, walked once.

BTF records have no index: the n-th type starts where the (n-1)-th ends,
and a record's length depends on its kind and its `vlen`. `walk()` finds
every start in one pass over the type section, kept as 32-bit words in an
`array`. Measured before choosing (docs/benchmarks-history.md, "BTF decoding"):
this plain loop walks the 6.1 kernel's 100,810 types in about 1 s in the
emulated VM, as fast as calling libbpf's btf__type_by_id() through ctypes
once per type, while numpy's import alone costs 4.5 s there and its
vectorised walk was slower still; `bpftool -j btf dump` plus json.load took
20 s. After the walk, records are decoded only when asked for.

A module's BTF is split BTF: its type ids continue after vmlinux's, its
string offsets after vmlinux's string section, and its records refer to
vmlinux types freely. A RawBtf made with `base=` answers for both.

A malformed blob raises BtfError with one line saying where; nothing here
trusts a length or an id it has not checked.
"""

from __future__ import annotations

import struct
import sys
from array import array

from typing import TYPE_CHECKING

from ktui.btf.errors import BtfError  # (defined there, kept importable from here)
from ktui.btf.kinds import LINKAGE, WRAPPERS, Kind

if TYPE_CHECKING:
    from ktui.btf.types import Type

MAGIC = 0xEB9F
HEADER = struct.Struct("<HBBIIIII")  # magic, version, flags, hdr_len, type_off/len, str_off/len
HEADER_MIN = HEADER.size
MAX_KIND = max(Kind)

# Words after the 3-word btf_type header: a fixed part by kind, and a part
# per vlen item (members, enum values, params, datasec entries).
_FIXED = {Kind.INT: 1, Kind.ARRAY: 3, Kind.VAR: 1, Kind.DECL_TAG: 1}
_PER_ITEM = {Kind.STRUCT: 3, Kind.UNION: 3, Kind.ENUM: 2, Kind.FUNC_PROTO: 2, Kind.DATASEC: 3,
             Kind.ENUM64: 3}
# Indexed by the 5-bit kind field. An unknown kind gets a length no blob can
# have, so the fast walk overshoots and the careful walk names the culprit.
_BAD = 1 << 40
_WORDS_FIXED = [3 + _FIXED.get(k, 0) if 1 <= k <= MAX_KIND else _BAD for k in range(32)]
_WORDS_PER_ITEM = [_PER_ITEM.get(k, 0) if 1 <= k <= MAX_KIND else 0 for k in range(32)]

INT_SIGNED, INT_CHAR, INT_BOOL = 1, 2, 4


def _printable(text: str) -> str:
    """Names reach terminals: a control character in a crafted blob must not."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(c if c.isascii() and c.isprintable() else "?" for c in text)


class RawBtf:
    """The records of one blob; ids below `first_id` belong to `base`."""

    def __init__(self, data: bytes, *, base: RawBtf | None = None, source: str = "BTF") -> None:
        self.source = source
        self.base = base
        self.data = data
        if len(data) < HEADER_MIN:
            raise BtfError(f"{source}: {len(data)} bytes, too short for a BTF header")
        magic, version, _flags, hdr_len, type_off, type_len, str_off, str_len = \
            HEADER.unpack_from(data, 0)
        if magic != MAGIC:
            if magic == 0x9FEB:
                raise BtfError(f"{source}: big-endian BTF is not supported")
            raise BtfError(f"{source}: not BTF (magic 0x{magic:04x}, expected 0xeb9f)")
        if version != 1:
            raise BtfError(f"{source}: BTF version {version} is not supported (only 1)")
        if hdr_len < HEADER_MIN or hdr_len > len(data):
            raise BtfError(f"{source}: header length {hdr_len} is impossible")
        types_at, strs_at = hdr_len + type_off, hdr_len + str_off
        if type_off % 4 or type_len % 4 or types_at + type_len > len(data):
            raise BtfError(f"{source}: type section ({type_len} bytes at {type_off}) "
                           "is misaligned or outside the blob")
        if strs_at + str_len > len(data):
            raise BtfError(f"{source}: string section ({str_len} bytes at {str_off}) is outside the blob")
        if str_len and data[strs_at + str_len - 1] != 0:
            raise BtfError(f"{source}: string section does not end with a NUL byte")
        if base is None and str_len and data[strs_at] != 0:
            raise BtfError(f"{source}: string section does not start with an empty string")
        self._strs_at, self._strs_end = strs_at, strs_at + str_len
        self.str_base = base.str_end if base is not None else 0
        self.str_end = self.str_base + str_len
        self.first_id = base.end_id if base is not None else 1
        self.words = array("I", data[types_at:types_at + type_len])
        if sys.byteorder == "big":
            self.words.byteswap()
        self.starts, self.func_ids = walk(self.words, self.first_id, source)
        self.end_id = self.first_id + len(self.starts)
        self._names: dict[int, str] = {}
        self._strings: str | None = None
        self._clean = False  # no string in the section needs _printable()
        self._types: dict[int, Type] = {}

    # ------------------------------------------------------------ strings
    def string(self, off: int) -> str:
        """The NUL-terminated string at `off` of the (combined) string section."""
        found = self._names.get(off)
        if found is not None:
            return found
        if off < self.str_base:
            assert self.base is not None
            found = self.base.string(off)
        else:
            local = off - self.str_base
            text = self._text()
            if local >= len(text):
                raise BtfError(f"{self.source}: string offset {off} is outside the string section")
            found = text[local:text.index("\0", local)]  # the section ends with NUL
            if not self._clean:
                found = _printable(found)
        self._names[off] = found
        return found

    def _text(self) -> str:
        """The string section as one str, decoded once: 50,000 names decoded
        one by one cost more than the whole section at once."""
        if self._strings is None:
            self._strings = self.data[self._strs_at:self._strs_end].decode("ascii", "replace")
            self._clean = self._strings.replace("\0", "").isprintable()
        return self._strings

    def offsets_of(self, name: str) -> set[int]:
        """Every string offset (combined section) where `name` is a whole
        string: a find over the section, not a decode of every name."""
        found: set[int] = set()
        if self.base is not None:
            found |= self.base.offsets_of(name)
        text = self._text()
        if name == "" or "\0" in name:
            return found
        if text.startswith(name + "\0"):  # a split blob's section may start with a name
            found.add(self.str_base)
        needle = "\0" + name + "\0"
        at = text.find(needle)
        while at >= 0:
            found.add(self.str_base + at + 1)
            at = text.find(needle, at + 1)
        return found

    def funcs_named(self, name: str) -> list[int]:
        """This blob's FUNC ids called `name`, without decoding 60,000 names
        (a lookup for a fetch by name must not cost seconds under emulation)."""
        offsets = self.offsets_of(name)
        if not offsets:
            return []
        words, starts, first = self.words, self.starts, self.first_id
        return [fid for fid in self.func_ids if words[starts[fid - first]] in offsets]

    # ------------------------------------------------------------ records
    def owner(self, type_id: int) -> RawBtf:
        """The blob whose records hold `type_id` (this one or a base)."""
        blob: RawBtf | None = self
        while blob is not None:
            if type_id >= blob.first_id:
                if type_id >= blob.end_id:
                    break
                return blob
            blob = blob.base
        raise BtfError(f"{self.source}: type id {type_id} does not exist "
                       f"(ids end at {self.end_id - 1})")

    def head(self, type_id: int) -> tuple[int, int, int, int]:
        """(kind, vlen, kind_flag, size_or_type) of a record, cheaply."""
        if type_id == 0:
            return 0, 0, 0, 0
        blob = self.owner(type_id)
        i = blob.starts[type_id - blob.first_id]
        info = blob.words[i + 1]
        return info >> 24 & 31, info & 0xFFFF, info >> 31, blob.words[i + 2]

    def name_of(self, type_id: int) -> str:
        if type_id == 0:
            return "void"
        blob = self.owner(type_id)
        return blob.string(blob.words[blob.starts[type_id - blob.first_id]])

    def items(self, type_id: int) -> tuple[RawBtf, int, int]:
        """(blob, first word after the header, vlen) of a record."""
        blob = self.owner(type_id)
        i = blob.starts[type_id - blob.first_id]
        return blob, i + 3, blob.words[i + 1] & 0xFFFF

    def type(self, type_id: int) -> Type:
        """The decoded record (memoised)."""
        if type_id == 0:
            from ktui.btf.types import VOID

            return VOID
        blob = self.owner(type_id)
        found = blob._types.get(type_id)
        if found is None:
            found = blob._types[type_id] = blob._decode(type_id)
        return found

    def resolve(self, type_id: int) -> int:
        """Skip typedefs, qualifiers and type tags: the id of what is underneath."""
        for _ in range(64):
            kind, _vlen, _kflag, ref = self.head(type_id)
            if kind not in WRAPPERS:
                return type_id
            type_id = ref
        raise BtfError(f"{self.source}: type id {type_id}: typedef chain longer than 64 (a loop?)")

    def _decode(self, type_id: int) -> Type:
        from ktui.btf.types import (
            Array, Composite, Datasec, DeclTag, Enum, EnumValue, Float, Func, FuncProto, Fwd, Int,
            Member, Param, Ptr, Ref, SecVar, Var,
        )

        w = self.words
        i = self.starts[type_id - self.first_id]
        name_off, info, size_or_type = w[i], w[i + 1], w[i + 2]
        kind, vlen, kflag = Kind(info >> 24 & 31), info & 0xFFFF, info >> 31
        name = self.string(name_off)
        at = i + 3
        if kind == Kind.INT:
            enc = w[at]
            return Int(type_id, kind, name, size_or_type, enc & 0xFF, enc >> 16 & 0xFF,
                       bool(enc >> 24 & INT_SIGNED), bool(enc >> 24 & INT_CHAR), bool(enc >> 24 & INT_BOOL))
        if kind == Kind.PTR:
            return Ptr(type_id, kind, name, size_or_type)
        if kind == Kind.ARRAY:
            return Array(type_id, kind, name, w[at], w[at + 1], w[at + 2])
        if kind in (Kind.STRUCT, Kind.UNION):
            members = []
            for j in range(at, at + 3 * vlen, 3):
                off = w[j + 2]
                members.append(Member(self.string(w[j]), w[j + 1],
                                      off & 0xFFFFFF if kflag else off, off >> 24 if kflag else 0))
            return Composite(type_id, kind, name, size_or_type, tuple(members))
        if kind == Kind.ENUM:
            values = []
            for j in range(at, at + 2 * vlen, 2):
                v = w[j + 1]
                values.append(EnumValue(self.string(w[j]), v - (1 << 32) if kflag and v >> 31 else v))
            return Enum(type_id, kind, name, size_or_type, bool(kflag), tuple(values))
        if kind == Kind.ENUM64:
            values = []
            for j in range(at, at + 3 * vlen, 3):
                v = w[j + 1] | w[j + 2] << 32
                values.append(EnumValue(self.string(w[j]), v - (1 << 64) if kflag and v >> 63 else v))
            return Enum(type_id, kind, name, size_or_type, bool(kflag), tuple(values))
        if kind == Kind.FWD:
            return Fwd(type_id, kind, name, bool(kflag))
        if kind in WRAPPERS:
            return Ref(type_id, kind, name, size_or_type)
        if kind == Kind.FUNC:
            return Func(type_id, kind, name, size_or_type, LINKAGE[vlen] if vlen < 3 else str(vlen))
        if kind == Kind.FUNC_PROTO:
            params = [Param(self.string(w[j]), w[j + 1]) for j in range(at, at + 2 * vlen, 2)]
            variadic = bool(params) and params[-1] == Param("", 0)
            return FuncProto(type_id, kind, name, size_or_type,
                             tuple(params[:-1] if variadic else params), variadic)
        if kind == Kind.VAR:
            return Var(type_id, kind, name, size_or_type, w[at])
        if kind == Kind.DATASEC:
            return Datasec(type_id, kind, name, size_or_type,
                           tuple(SecVar(w[j], w[j + 1], w[j + 2]) for j in range(at, at + 3 * vlen, 3)))
        if kind == Kind.FLOAT:
            return Float(type_id, kind, name, size_or_type)
        assert kind == Kind.DECL_TAG
        comp = w[at]
        return DeclTag(type_id, kind, name, size_or_type, comp - (1 << 32) if comp >> 31 else comp)


def walk(words: array, first_id: int = 1, source: str = "BTF") -> tuple[list[int], list[int]]:
    """The word index where each record starts, and the ids of the FUNC
    records (what a function listing needs, found in the same pass)."""
    fixed, per_item = _WORDS_FIXED, _WORDS_PER_ITEM
    starts: list[int] = []
    funcs: list[int] = []
    add, add_func = starts.append, funcs.append
    n = len(words)
    i = 0
    tid = first_id
    try:
        while i < n:
            info = words[i + 1]
            kind = info >> 24 & 31
            add(i)
            if kind == 12:  # Kind.FUNC, spelt as a number: this loop is the hot path
                add_func(tid)
            tid += 1
            i += fixed[kind] + per_item[kind] * (info & 0xFFFF)
    except IndexError:
        pass
    if i != n:
        _find_bad_record(words, first_id, source)
    return starts, funcs


def _find_bad_record(words: array, first_id: int, source: str) -> None:
    """The careful walk, run only once the fast one went wrong: says which
    record is bad and why, as BtfError."""
    n = len(words)
    i, tid = 0, first_id
    while i < n:
        where = f"{source}: type id {tid} (byte {i * 4} of the type section)"
        if i + 3 > n:
            raise BtfError(f"{where}: truncated record header")
        kind = words[i + 1] >> 24 & 31
        if not 1 <= kind <= MAX_KIND:
            raise BtfError(f"{where}: unknown kind {kind}")
        length = _WORDS_FIXED[kind] + _WORDS_PER_ITEM[kind] * (words[i + 1] & 0xFFFF)
        if i + length > n:
            raise BtfError(f"{where}: {Kind(kind).name} record runs past the type section")
        i += length
        tid += 1
    # Not reached: the fast walk stops short only where the loop above raises.
    raise BtfError(f"{source}: type section does not end on a record boundary")
