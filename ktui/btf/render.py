"""Types as C would declare them, and prototypes on one line.

    vfs_read(struct file *file, char *buf, size_t count, loff_t *pos) -> ssize_t

A C declarator wraps the declared name: `int (*fn)(void *)`, `char name[16]`.
Every type therefore renders as a head and a tail around the name, and that
pair is memoised per type id: a whole kernel's prototypes share a few
thousand parameter types, so listing 50,000 functions renders each once.

Type tags (clang kernels: `__attribute__((btf_type_tag("user")))`) print
as the kernel spells them (`__user`). Kernels built with GCC, Debian's
among them, carry none: a pointer without `__user` may still point to user
memory, and nothing here guesses which.
"""

from __future__ import annotations

from ktui.btf.decode import BtfError, RawBtf
from ktui.btf.kinds import Kind

_MAX_DEPTH = 64
_HOLE = "\0"

_PTR, _ARRAY, _STRUCT, _UNION, _ENUM, _FWD, _TYPEDEF = 2, 3, 4, 5, 6, 7, 8
_FUNC_PROTO, _TYPE_TAG, _ENUM64 = 13, 18, 19
_QUAL = {9: "volatile", 10: "const", 11: "restrict"}


class Renderer:
    """C text for the types of one BTF (a base or a module on top of one)."""

    def __init__(self, btf: RawBtf) -> None:
        self.btf = btf
        self._shapes: dict[int, tuple[str, str]] = {}
        self._signatures: dict[int, str] = {}

    def type_name(self, type_id: int) -> str:
        """`struct file *`, `size_t`, `char [16]`, `void (*)(int)`."""
        head, tail = self.shape(type_id)
        return (head.rstrip() + tail) if not tail.startswith("[") else head + tail

    def declaration(self, type_id: int, name: str) -> str:
        """`struct file *file`, `char comm[16]`; the bare type when `name` is ""."""
        if not name:
            return self.type_name(type_id)
        head, tail = self.shape(type_id)
        return head + name + tail

    def shape(self, type_id: int) -> tuple[str, str]:
        """The text before and after the declared name."""
        found = self._shapes.get(type_id)
        if found is None:
            head, _, tail = self._declare(type_id, _HOLE).partition(_HOLE)
            found = self._shapes[type_id] = (head, tail)
        return found

    def params(self, proto_id: int) -> list[tuple[str, str]]:
        """(name, C type) of each parameter; ("", "...") ends a variadic one."""
        blob, at, vlen = self.btf.items(proto_id)
        w = blob.words
        out = []
        for j in range(at, at + 2 * vlen, 2):
            name_off, tid = w[j], w[j + 1]
            if tid == 0 and name_off == 0 and j == at + 2 * vlen - 2:
                out.append(("", "..."))
            else:
                out.append((blob.string(name_off), self.type_name(tid)))
        return out

    def param_list(self, proto_id: int) -> str:
        """`struct file *file, char *buf` (or `void`); the inner loop of a
        whole-kernel listing, hence the locals."""
        blob, at, vlen = self.btf.items(proto_id)
        w, string, shapes = blob.words, blob.string, self._shapes
        last = at + 2 * vlen - 2
        parts = []
        for j in range(at, last + 2, 2):
            name_off, tid = w[j], w[j + 1]
            if tid == 0 and name_off == 0 and j == last:
                parts.append("...")
            elif name_off:
                head, tail = shapes.get(tid) or self.shape(tid)
                parts.append(head + string(name_off) + tail)
            else:
                parts.append(self.type_name(tid))
        return ", ".join(parts) if parts else "void"

    def prototype(self, func_id: int) -> str:
        """`name(params) -> ret` for a FUNC record. Functions that share a
        prototype (dedup makes 56,265 functions share 25,027 on 6.18) share
        its rendering."""
        blob = self.btf
        if not blob.first_id <= func_id < blob.end_id:
            blob = blob.owner(func_id)
        i = blob.starts[func_id - blob.first_id]
        if blob.words[i + 1] >> 24 & 31 != Kind.FUNC:
            raise BtfError(f"{self.btf.source}: type id {func_id} is not a function")
        proto = blob.words[i + 2]
        sig = self._signatures.get(proto)
        if sig is None:
            if self.btf.head(proto)[0] != Kind.FUNC_PROTO:
                raise BtfError(f"{self.btf.source}: function {blob.string(blob.words[i])!r} "
                               f"has no prototype (type id {proto})")
            ret = self.btf.head(proto)[3]
            sig = self._signatures[proto] = f"({self.param_list(proto)}) -> {self.type_name(ret)}"
        return blob.string(blob.words[i]) + sig

    # ------------------------------------------------------------ the declarator
    def _declare(self, type_id: int, inner: str) -> str:
        btf = self.btf
        quals: list[str] = []  # qualifiers of the base type, printed before it
        tags: list[str] = []  # its type tags, printed after it: `char __user *`
        for _ in range(_MAX_DEPTH):
            kind, vlen, kflag, ref = btf.head(type_id)
            if kind == _PTR:
                inner = "*" + inner
                if btf.head(ref)[0] in (_ARRAY, _FUNC_PROTO):
                    inner = "(" + inner + ")"
                type_id = ref
            elif kind == _ARRAY:
                blob, at, _ = btf.items(type_id)
                inner = f"{inner}[{blob.words[at + 2]}]"
                type_id = blob.words[at]
            elif kind == _FUNC_PROTO:
                inner = f"{inner}({self.param_list(type_id)})"
                type_id = ref
            elif kind in _QUAL or kind == _TYPE_TAG:
                word = _QUAL.get(kind) or f"__{btf.name_of(type_id)}"
                if self._under_qualifiers(ref) == _PTR:
                    inner = f"{word} {inner}" if inner else word
                else:
                    (quals if kind in _QUAL else tags).append(word)
                type_id = ref
            else:
                base = self._base(type_id, kind, kflag)
                lead = " ".join(quals + [base] + tags)
                return f"{lead} {inner}" if inner else lead
        raise BtfError(f"{btf.source}: type id {type_id}: declarator nested deeper than {_MAX_DEPTH} (a loop?)")

    def _under_qualifiers(self, type_id: int) -> int:
        for _ in range(_MAX_DEPTH):
            kind, _vlen, _kflag, ref = self.btf.head(type_id)
            if kind not in _QUAL and kind != _TYPE_TAG:
                return kind
            type_id = ref
        raise BtfError(f"{self.btf.source}: type id {type_id}: qualifiers nested deeper than {_MAX_DEPTH}")

    def _base(self, type_id: int, kind: int, kflag: int) -> str:
        if type_id == 0:
            return "void"
        name = self.btf.name_of(type_id)
        if kind in (_STRUCT, _UNION):
            return f"{'struct' if kind == _STRUCT else 'union'} {name or '{...}'}"
        if kind in (_ENUM, _ENUM64):
            return f"enum {name or '{...}'}"
        if kind == _FWD:
            return f"{'union' if kflag else 'struct'} {name}"
        if kind == _TYPEDEF or name:
            return name or "?"
        return "?"
