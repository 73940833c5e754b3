"""From a parameter name and a member chain to what a probe must read.

The probe language (phase 2 of issue 12) names what to fetch the way the
kernel's own probe events do: `count`, `file->f_pos`,
`file->f_path.dentry->d_name.name`. This module answers, from BTF alone:

- which argument register holds a parameter (`arg_slots`): parameter i is
  not always register i. On x86-64 a struct of 9-16 bytes passed by value
  takes two registers, a bigger one goes to memory, and once the six
  argument registers are used up the rest are on the stack. Those are
  reported as such, never guessed at.
- where a member chain ends (`member_path`): each `->` reads a pointer,
  each `.` only adds an offset, so `file->f_path.dentry->d_name.name`
  becomes two reads, at byte offsets `f_path + dentry` from `file` and
  `d_name + name` from what that read returned. That is the `+OFF(FETCH)`
  chain ktui's fetches already compile to, with no user text in it.
- what the last read holds (`Leaf`): its width, its signedness, whether it
  is a pointer (printed as hex), text (char pointer or array), a bitfield
  (which bits of which bytes), an array or a struct.

Failures raise `AccessError` naming the step that failed (so the caller can
point at its column) and the names that come close. Kernels built with GCC
carry no `__user` tags: `Leaf.user` is True only when a tag says so, and
False does not mean kernel memory.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from ktui.btf.decode import RawBtf
from ktui.btf.errors import AccessError, BtfError  # (defined there, kept importable from here)
from ktui.btf.render import Renderer
from ktui.btf.types import Composite, Kind, Member, WRAPPERS

ARG_REGISTERS = 6  # rdi, rsi, rdx, rcx, r8, r9: ktui's a1..a6
WORD = 8


@dataclass(frozen=True, slots=True)
class ArgSlot:
    index: int  # the parameter's position, 0-based
    name: str
    type_id: int
    registers: tuple[int, ...]  # 1-based argument registers (a1..a6) holding it; () if none
    note: str  # why it is not in exactly one register, or ""


@dataclass(frozen=True, slots=True)
class Leaf:
    """What a fetch ends on."""

    type_id: int
    ctype: str  # as C declares it: `size_t`, `struct file *`
    kind: str  # int, enum, bool, pointer, array, struct, union, float, void, function, incomplete
    size: int  # bytes; 0 when unknown (void, incomplete)
    signed: bool
    text: bool  # a char pointer or a char array: can be read as a string
    user: bool  # a `__user` type tag says it points to user memory (clang kernels only)
    bitfield: tuple[int, int] | None = None  # (bit offset from the read address, bits)
    nelems: int = 0  # for arrays


@dataclass(frozen=True, slots=True)
class Step:
    op: str  # "->" or "."
    name: str


@dataclass(frozen=True, slots=True)
class FieldPath:
    """`+loads[-1](...+loads[1](+loads[0](PARAM))...)`: each offset is one
    memory read at (value so far + offset); every read but the last reads a
    pointer, the last reads the leaf. An array leaf (`task->comm`) is read
    where it lies: its bytes start at the last address."""

    loads: tuple[int, ...]
    leaf: Leaf


class Access:
    """Answers for one BTF (vmlinux, or a module's on top of it)."""

    def __init__(self, btf: RawBtf, renderer: Renderer | None = None) -> None:
        self.btf = btf
        self.render = renderer or Renderer(btf)

    # ------------------------------------------------------------ parameters
    def arg_slots(self, proto_id: int) -> list[ArgSlot]:
        """Where each parameter arrives, by the x86-64 SysV calling convention."""
        proto = self.btf.type(proto_id)
        if proto.kind != Kind.FUNC_PROTO:
            raise BtfError(f"{self.btf.source}: type id {proto_id} is not a prototype")
        slots = []
        used = 0
        for i, p in enumerate(proto.params):  # type: ignore[attr-defined]
            size, aggregate = self._size_class(p.type)
            words = max(1, (size + WORD - 1) // WORD)
            if aggregate and size > 2 * WORD:
                slots.append(ArgSlot(i, p.name, p.type, (), f"passed in memory ({size}-byte "
                                     f"{'union' if aggregate == 'union' else 'struct'} by value)"))
                continue
            if used + words > ARG_REGISTERS:
                slots.append(ArgSlot(i, p.name, p.type, (), "on the stack (the six argument "
                                     "registers are taken by the parameters before it)"))
                continue
            regs = tuple(range(used + 1, used + words + 1))
            used += words
            note = "" if words == 1 else (f"takes two registers (a{regs[0]}, a{regs[1]}): "
                                          f"a {size}-byte value passed by value")
            slots.append(ArgSlot(i, p.name, p.type, regs, note))
        return slots

    def param(self, proto_id: int, name: str) -> ArgSlot:
        """The slot of the parameter called `name`, or AccessError with the
        prototype and close names."""
        slots = self.arg_slots(proto_id)
        for slot in slots:
            if slot.name == name:
                return slot
        names = [s.name for s in slots if s.name]
        close = tuple(difflib.get_close_matches(name, names, n=3, cutoff=0.6))
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        params = self.render.param_list(proto_id)
        raise AccessError(f"no parameter {name!r}{hint}: the parameters are ({params})",
                          step=-1, close=close)

    def return_leaf(self, proto_id: int) -> Leaf:
        """What a prototype returns, typedefs seen through (`void` too)."""
        proto = self.btf.type(proto_id)
        if proto.kind != Kind.FUNC_PROTO:
            raise BtfError(f"{self.btf.source}: type id {proto_id} is not a prototype")
        return self.leaf(self.btf.head(proto_id)[3])

    # ------------------------------------------------------------ members
    def member_path(self, type_id: int, steps: list[Step] | tuple[Step, ...],
                    root: str = "the parameter") -> FieldPath:
        """Follow `steps` from a value of type `type_id`, a parameter's
        (called `root` in messages)."""
        loads: list[int] = []
        pending: int | None = None  # offset added since the last read; None: not in memory yet
        current = type_id
        bit_extra = None
        for i, step in enumerate(steps):
            if bit_extra is not None:
                raise AccessError(f"{self._what(root, steps, i)} is a bitfield: it has no members",
                                  step=i)
            if step.op == "->":
                target = self._pointee(current, steps, i, root)
                if pending is not None:
                    loads.append(pending)
                pending = 0
                current = target
            elif step.op == ".":
                if pending is None:
                    raise AccessError(f"`.{step.name}` on {self._what(root, steps, i)}: it is a "
                                      f"{self.render.type_name(current)}, not a struct in "
                                      "memory; use `->` through a pointer", step=i)
                kind = self._kind(self.btf.resolve(current))
                if kind == Kind.PTR:
                    raise AccessError(f"`.{step.name}` on {self._what(root, steps, i)}, a pointer "
                                      f"({self.render.type_name(current)}): use `->`", step=i)
            else:
                raise AccessError(f"unknown operator {step.op!r}", step=i)
            struct_id = self.btf.resolve(current)
            offset_bits, member = self._member(struct_id, step, steps, i, root)
            if member.bitfield_size or offset_bits % 8:
                bits = member.bitfield_size or self._int_bits(member.type)
                bit_extra = (offset_bits % 8, bits)
            assert pending is not None
            pending += offset_bits // 8
            current = member.type
        if pending is None:
            raise AccessError("no member to read", step=0)
        loads.append(pending)
        leaf = self.leaf(current)
        if bit_extra is not None:
            leaf = Leaf(leaf.type_id, leaf.ctype, leaf.kind, leaf.size, leaf.signed, False,
                        False, bit_extra, 0)
        return FieldPath(tuple(loads), leaf)

    def members(self, type_id: int) -> list[tuple[str, int, Member]]:
        """(name, bit offset, member) of every member reachable by name,
        anonymous structs and unions flattened as C does."""
        out: list[tuple[str, int, Member]] = []
        self._flatten(self.btf.resolve(type_id), 0, out, 0)
        return out

    # ------------------------------------------------------------ leaves
    def leaf(self, type_id: int) -> Leaf:
        ctype = self.render.type_name(type_id)
        user = self._has_user_tag(type_id)
        tid = self.btf.resolve(type_id)
        t = self.btf.type(tid)
        kind = t.kind
        if kind == Kind.INT:
            return Leaf(type_id, ctype, "bool" if t.bool else "int", t.size, t.signed, False, False)  # type: ignore[attr-defined]
        if kind in (Kind.ENUM, Kind.ENUM64):
            return Leaf(type_id, ctype, "enum", t.size, t.signed, False, False)  # type: ignore[attr-defined]
        if kind == Kind.PTR:
            target = self.btf.resolve(t.type)  # type: ignore[attr-defined]
            user = user or self._has_user_tag(t.type)  # type: ignore[attr-defined]
            return Leaf(type_id, ctype, "pointer", WORD, False, self._is_char(target), user)
        if kind == Kind.ARRAY:
            elem = self.btf.resolve(t.type)  # type: ignore[attr-defined]
            size = self._sizeof(tid)
            return Leaf(type_id, ctype, "array", size, False, self._is_char(elem), user,
                        nelems=t.nelems)  # type: ignore[attr-defined]
        if kind in (Kind.STRUCT, Kind.UNION):
            return Leaf(type_id, ctype, kind.name.lower(), t.size, False, False, False)  # type: ignore[attr-defined]
        if kind == Kind.FLOAT:
            return Leaf(type_id, ctype, "float", t.size, True, False, False)  # type: ignore[attr-defined]
        if kind == Kind.FUNC_PROTO:
            return Leaf(type_id, ctype, "function", 0, False, False, False)
        if kind == Kind.VOID:
            return Leaf(type_id, ctype, "void", 0, False, False, False)
        return Leaf(type_id, ctype, "incomplete", 0, False, False, False)

    # ------------------------------------------------------------ helpers
    def _kind(self, type_id: int) -> int:
        return self.btf.head(type_id)[0]

    def _pointee(self, type_id: int, steps, i: int, root: str) -> int:
        tid = self.btf.resolve(type_id)
        kind = self._kind(tid)
        if kind != Kind.PTR:
            what = self._what(root, steps, i)
            ctype = self.render.type_name(type_id)
            if kind in (Kind.STRUCT, Kind.UNION):
                raise AccessError(f"`->{steps[i].name}` on {what}, a {ctype} (not a pointer): "
                                  "use `.`", step=i)
            raise AccessError(f"`->{steps[i].name}` on {what}, a {ctype}: "
                              "not a pointer to a struct or union", step=i)
        target = self.btf.resolve(self.btf.head(tid)[3])
        if self._kind(target) not in (Kind.STRUCT, Kind.UNION, Kind.FWD):
            raise AccessError(f"`->{steps[i].name}` on {self._what(root, steps, i)}, a "
                              f"{self.render.type_name(type_id)}: not a pointer to a struct or "
                              "union", step=i)
        return target

    def _member(self, struct_id: int, step: Step, steps, i: int, root: str) -> tuple[int, Member]:
        kind = self._kind(struct_id)
        if kind == Kind.FWD:
            raise AccessError(f"{self.render.type_name(struct_id)} is only declared in this BTF, "
                              f"its members are unknown", step=i)
        if kind not in (Kind.STRUCT, Kind.UNION):
            raise AccessError(f"`{step.op}{step.name}` on {self._what(root, steps, i)}, a "
                              f"{self.render.type_name(struct_id)}: not a struct or union", step=i)
        found = self.members(struct_id)
        for name, bit_offset, member in found:
            if name == step.name:
                return bit_offset, member
        names = [n for n, _o, _m in found]
        close = tuple(difflib.get_close_matches(step.name, names, n=3, cutoff=0.6))
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise AccessError(f"{self.render.type_name(struct_id)} has no member "
                          f"{step.name!r}{hint}", step=i, close=close)

    def _flatten(self, struct_id: int, base_bits: int, out: list, depth: int) -> None:
        if depth > 32:
            raise BtfError(f"{self.btf.source}: type id {struct_id}: anonymous members nested "
                           "deeper than 32")
        t = self.btf.type(struct_id)
        if not isinstance(t, Composite):
            return
        for m in t.members:
            if m.name:
                out.append((m.name, base_bits + m.bit_offset, m))
            else:
                self._flatten(self.btf.resolve(m.type), base_bits + m.bit_offset, out, depth + 1)

    def _size_class(self, type_id: int) -> tuple[int, str]:
        """(size in bytes, "struct"/"union" when an aggregate else "")."""
        tid = self.btf.resolve(type_id)
        kind = self._kind(tid)
        if kind in (Kind.STRUCT, Kind.UNION):
            return self.btf.head(tid)[3], Kind(kind).name.lower()
        return max(self._sizeof(tid), 1), ""

    def _sizeof(self, type_id: int) -> int:
        for _ in range(64):
            tid = self.btf.resolve(type_id)
            kind, _vlen, _kflag, size_or_type = self.btf.head(tid)
            if kind in (Kind.INT, Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.ENUM64, Kind.FLOAT):
                return size_or_type
            if kind == Kind.PTR:
                return WORD
            if kind == Kind.ARRAY:
                t = self.btf.type(tid)
                return t.nelems * self._sizeof(t.type)  # type: ignore[attr-defined]
            return 0
        return 0

    def _int_bits(self, type_id: int) -> int:
        return 8 * self._sizeof(type_id)

    def _is_char(self, type_id: int) -> bool:
        kind, _vlen, _kflag, size = self.btf.head(type_id)
        return kind == Kind.INT and size == 1 and not self.btf.type(type_id).bool  # type: ignore[attr-defined]

    def _has_user_tag(self, type_id: int) -> bool:
        for _ in range(64):
            kind, _vlen, _kflag, ref = self.btf.head(type_id)
            if kind == Kind.TYPE_TAG and self.btf.name_of(type_id) == "user":
                return True
            if kind not in WRAPPERS:
                return False
            type_id = ref
        return False

    @staticmethod
    def _what(root: str, steps, i: int) -> str:
        """`file->f_path.dentry`: the chain up to (not including) step i."""
        return f"`{root}{''.join(f'{s.op}{s.name}' for s in steps[:i])}`"
