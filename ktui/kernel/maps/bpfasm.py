"""BPF instructions by hand, for programs of a dozen instructions.

The feature probes (feature_probes.py) load tiny programs to ask the
kernel what it has; a compiler would cost seconds and need headers, and
every instruction here is one of a handful. An `Asm` collects
instructions and labels; `code()` resolves forward jumps. Encodings:
include/uapi/linux/bpf.h (struct bpf_insn: code, dst:4 src:4, off, imm).
"""

from __future__ import annotations

import struct

from ktui.kernel.maps.bpfsys import BPF_PSEUDO_MAP_FD

R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10 = range(11)

LD_IMM64 = 0x18
LDX_DW = 0x79
ST_W = 0x62
ST_DW = 0x7A
STX_DW = 0x7B
MOV64_K = 0xB7
MOV64_X = 0xBF
MOV32_X = 0xBC  # 32-bit move: zero-extends (the low half of a u64)
ADD64_K = 0x07
JA = 0x05
JEQ_K = 0x15
JNE_K = 0x55
CALL = 0x85
EXIT = 0x95

# helpers (enum bpf_func_id)
MAP_LOOKUP_ELEM = 1
GET_CURRENT_PID_TGID = 14
RINGBUF_OUTPUT = 130
TASK_STORAGE_GET = 156
GET_CURRENT_TASK_BTF = 158
GET_ATTACH_COOKIE = 174
GET_FUNC_ARG = 183
GET_FUNC_RET = 184


def insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


class Asm:
    """Instructions in order; `jump(op, reg, imm, label)` jumps forward to
    `label(name)` when `reg op imm`."""

    def __init__(self) -> None:
        self._items: list[tuple] = []

    def emit(self, *raw: bytes) -> "Asm":
        for one in raw:
            self._items.append(("raw", one))
        return self

    def mov(self, dst: int, src: int) -> "Asm":
        return self.emit(insn(MOV64_X, dst, src))

    def mov_imm(self, dst: int, imm: int) -> "Asm":
        return self.emit(insn(MOV64_K, dst, imm=imm))

    def add_imm(self, dst: int, imm: int) -> "Asm":
        return self.emit(insn(ADD64_K, dst, imm=imm))

    def load(self, dst: int, src: int, off: int) -> "Asm":
        """dst = *(u64 *)(src + off)"""
        return self.emit(insn(LDX_DW, dst, src, off))

    def store(self, dst: int, off: int, src: int) -> "Asm":
        """*(u64 *)(dst + off) = src"""
        return self.emit(insn(STX_DW, dst, src, off))

    def store_imm(self, dst: int, off: int, imm: int, word: bool = False) -> "Asm":
        """*(u64 *)(dst + off) = imm (a u32 with `word`)"""
        return self.emit(insn(ST_W if word else ST_DW, dst, 0, off, imm))

    def map_fd(self, dst: int, fd: int) -> "Asm":
        """dst = the map of `fd` (a 16-byte load the verifier rewrites)."""
        return self.emit(insn(LD_IMM64, dst, BPF_PSEUDO_MAP_FD, 0, fd), insn(0))

    def call(self, helper: int) -> "Asm":
        return self.emit(insn(CALL, imm=helper))

    def exit(self) -> "Asm":
        return self.emit(insn(EXIT))

    def jump(self, op: int, reg: int, imm: int, label: str, src: int = 0) -> "Asm":
        """Forward to `label` when `reg op imm` (a BPF_K op), or `reg op
        src` (a BPF_X op)."""
        self._items.append(("jump", (op, reg, src, imm, label)))
        return self

    def goto(self, label: str) -> "Asm":
        return self.jump(JA, 0, 0, label)

    def label(self, name: str) -> "Asm":
        self._items.append(("label", name))
        return self

    def code(self) -> bytes:
        at: dict[str, int] = {}
        pos = 0
        for kind, value in self._items:
            if kind == "label":
                at[value] = pos
            else:
                pos += len(value) // 8 if kind == "raw" else 1
        out, pos = [], 0
        for kind, value in self._items:
            if kind == "raw":
                out.append(value)
                pos += len(value) // 8
            elif kind == "jump":
                op, reg, src, imm, name = value
                pos += 1
                if at[name] < pos:
                    raise ValueError(f"jump to {name} goes backwards")
                out.append(insn(op, reg, src, at[name] - pos, imm))
        return b"".join(out)


def return_zero() -> bytes:
    """r0 = 0; exit: a program that only has to load or attach."""
    return Asm().mov_imm(R0, 0).exit().code()
