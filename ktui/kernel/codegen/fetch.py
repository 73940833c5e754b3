"""C for one probe's fetches (registers, arguments, dereferences, strings)
and for its filter, from the parse tree: never from user text."""

from __future__ import annotations

from ktui.kernel.codegen.runtime import comment_safe, str_equals
from ktui.lang.limits import STRING_MAX, TASK_COMM_LEN
from ktui.lang.model import (
    ARG_REGISTERS,
    And,
    Arg,
    Builtin,
    Compare,
    Deref,
    Field,
    FilterExpr,
    IntLit,
    Kind,
    Not,
    Or,
    Probe,
    Reg,
    RetVal,
    SpecError,
    StrLit,
    positional,
)
from ktui.lang.names import resolve
from ktui.record.layout import ProbeLayout, Slot


class FetchGen:
    """C for one probe's fetches and filter."""

    def __init__(self, probe: Probe, layout: ProbeLayout, comm: str = "e->comm") -> None:
        self.probe = probe
        self.layout = layout
        self.comm = comm  # the C char array holding comm, where one was read
        self.ret = probe.kind is Kind.RETURN
        self.tmp = 0

    # -- values

    def arg(self, n: int) -> str:
        if self.ret:
            return f"args[{n - 1}]"
        return f"ctx->{ARG_REGISTERS[n - 1]}"

    def raw(self, expr) -> str:
        """C expression for the 64-bit value of a non-deref fetch."""
        expr = positional(expr)  # a name unbound here is a bug upstream: ValueError, not C
        if isinstance(expr, Arg):
            return self.arg(expr.index)
        if isinstance(expr, Reg):
            return f"ctx->{expr.name}"
        if isinstance(expr, RetVal):
            return "PT_REGS_RC(ctx)"
        if isinstance(expr, Builtin):
            return {"pid": "(u64)(pid_tgid >> 32)", "tid": "(u64)(u32)pid_tgid",
                    "cpu": "(u64)bpf_get_smp_processor_id()"}[expr.name]
        raise AssertionError(expr)

    def address(self, expr, out: list[str]) -> str:
        """A C variable holding the value of `expr` used as an address (u64);
        derefs on the way read 8-byte kernel pointers."""
        if isinstance(expr, Deref):
            inner = self.address(expr.inner, out)
            var = self.new_tmp()
            out.append(f"    u64 {var} = 0;")
            out.append(
                f"    bpf_probe_read_kernel(&{var}, sizeof({var}), "
                f"(void *)({inner} + ({expr.offset}LL)));"
            )
            return var
        var = self.new_tmp()
        out.append(f"    u64 {var} = {self.raw(expr)};")
        return var

    def new_tmp(self) -> str:
        self.tmp += 1
        return f"t{self.tmp}"

    def fetch_lines(self, indices) -> list[str]:
        """The fetches `indices` (of probe.fetches), in order; the header's
        (comm, pid, tid, cpu) are written with the header."""
        out: list[str] = []
        for i in sorted(indices):
            slot = self.layout.slots[i]
            if slot.kind == "header":
                continue
            out += self.fetch_slot(i, slot)
        return out

    def filter_fetches(self, node: FilterExpr | None) -> set[int]:
        """The fetches (indices of probe.fetches) whose stored value the
        filter reads: they run before it, every other fetch after it."""
        found: set[int] = set()

        def walk(n) -> None:
            if isinstance(n, (And, Or)):
                walk(n.left)
                walk(n.right)
            elif isinstance(n, Not):
                walk(n.operand)
            elif isinstance(n, Compare):
                for operand in (n.left, n.right):
                    if isinstance(operand, Field):
                        index = resolve(self.probe, operand.name).fetch_index
                        if index is not None and self.layout.slots[index].kind != "header":
                            found.add(index)

        if node is not None:
            walk(node)
        return found

    def fetch_slot(self, i: int, slot: Slot) -> list[str]:
        fetch = slot.fetch
        typ = fetch.effective_type
        dest = f"e->payload + {slot.offset}"
        out = [f"    /* {comment_safe(str(fetch))} */"]
        expr = positional(fetch.expr)  # a name reads what the kernel's BTF says it is
        if slot.kind == "str":
            if isinstance(expr, Deref):
                base = self.address(expr.inner, out)
                addr = f"({base} + ({expr.offset}LL))"
            else:
                addr = self.address(expr, out)
            helper = "bpf_probe_read_user_str" if typ == "ustring" else "bpf_probe_read_kernel_str"
            out.append(f"    ktui_clear_string({dest});")
            out.append(f"    {helper}({dest}, {STRING_MAX}, (void *){addr});")
            return out
        width = 64 if typ == "symbol" else int(typ[1:])
        if isinstance(expr, Deref):
            base = self.address(expr.inner, out)
            var = self.new_tmp()
            out.append(f"    u{width} {var} = 0;")
            out.append(
                f"    bpf_probe_read_kernel(&{var}, sizeof({var}), "
                f"(void *)({base} + ({expr.offset}LL)));"
            )
            value = var
        else:
            value = f"({self.raw(expr)})"
        if slot.kind == "sint":
            c = f"(s64)(s{width})({value})"
        else:
            c = f"(u64)(u{width})({value})"
        out.append(f"    u64 v{i} = {c};")
        out.append(f"    *(u64 *)({dest}) = v{i}; /* an 8-byte aligned slot: one store */")
        return out

    # -- filter

    def filter_c(self, node: FilterExpr) -> str:
        if isinstance(node, And):
            return f"({self.filter_c(node.left)}) && ({self.filter_c(node.right)})"
        if isinstance(node, Or):
            return f"({self.filter_c(node.left)}) || ({self.filter_c(node.right)})"
        if isinstance(node, Not):
            return f"!({self.filter_c(node.operand)})"
        if isinstance(node, Compare):
            return self.compare_c(node)
        raise AssertionError(node)

    def compare_c(self, node: Compare) -> str:
        left, right = node.left, node.right
        if isinstance(left, StrLit) or isinstance(right, StrLit):
            field, lit = (right, left) if isinstance(left, StrLit) else (left, right)
            if not isinstance(field, Field) or not isinstance(lit, StrLit):
                raise SpecError(f"cannot compare {left} with {right}")
            array, capacity = self.string_field(field)
            eq = str_equals(array, lit.value, capacity)
            if node.op == "==":
                return f"({eq})"
            if node.op == "!=":
                return f"!({eq})"
            raise SpecError(f"strings compare only with == and !=, not {node.op}")
        lval, lsigned = self.int_operand(left)
        rval, rsigned = self.int_operand(right)
        cast = "(s64)" if (lsigned or rsigned) else "(u64)"
        return f"{cast}{lval} {node.op} {cast}{rval}"

    def int_operand(self, operand) -> tuple[str, bool]:
        if isinstance(operand, IntLit):
            v = operand.value
            if v < 0:
                return f"({v}LL)", True
            return f"{v}ULL", False
        if isinstance(operand, Field):
            return self.int_field(operand.name)
        raise SpecError(f"cannot use {operand} as a number")

    def int_field(self, name: str) -> tuple[str, bool]:
        """C for a filter name used as a number, and whether it is signed."""
        ref = resolve(self.probe, name)
        if ref.is_string:
            raise SpecError(f"{name} is a string: compare it with a string literal")
        if ref.fetch_index is not None:
            slot = self.layout.slots[ref.fetch_index]
            if slot.kind == "header":  # pid, tid, cpu: read again, not stored
                return self.raw(slot.fetch.expr), False
            return f"v{ref.fetch_index}", slot.kind == "sint"
        if isinstance(ref.expr, RetVal):
            return "PT_REGS_RC(ctx)", True
        if name in (self.probe.bindings or {}) and ref.type[1:].isdigit():
            # A parameter by name compares as its C type (an int's upper register bits are not its)
            sign, width = ref.type[0], ref.type[1:]
            if sign == "s":
                return f"((s64)(s{width})({self.raw(ref.expr)}))", True
            return f"((u64)(u{width})({self.raw(ref.expr)}))", False
        return self.raw(ref.expr), False

    def string_field(self, field: Field) -> tuple[str, int]:
        """The C char array a filter name compares as a string, and its size."""
        ref = resolve(self.probe, field.name)
        if ref.is_comm:
            return self.comm, TASK_COMM_LEN
        if ref.is_string and ref.fetch_index is not None:
            slot = self.layout.slots[ref.fetch_index]
            return f"((char *)(e->payload + {slot.offset}))", STRING_MAX
        raise SpecError(f"{field.name} is not a string: compare it with a number")
