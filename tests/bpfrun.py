"""Run a hand-assembled BPF program (kernel/generic/counter.py's) on the
host: the few instructions and helpers such a program uses, over maps
held in dicts, so a test can see which keys one hit writes. Not a
verifier: what the kernel refuses is for the kernel tests."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

M64 = (1 << 64) - 1
STACK, STACK_SIZE = 0x1000_0000, 512
VALUES = 0x2000_0000  # map values: one 4 KiB region each
EEXIST, E2BIG = 17, 7


@dataclass
class Map:
    key_size: int
    value_size: int
    max_entries: int
    array: bool = False
    items: dict[bytes, int] = field(default_factory=dict)  # key -> a value's address


@dataclass
class Task:
    """The task the hit runs in: what its helpers return."""

    pid_tgid: int = (42 << 32) | 42
    comm: bytes = b"dd"
    cgroup: int = 7


class Machine:
    def __init__(self) -> None:
        self.maps: dict[int, Map] = {}
        self.mem: dict[int, bytearray] = {}

    def map(self, fd: int, key_size: int, value_size: int, max_entries: int, *, array: bool = False) -> Map:
        m = self.maps[fd] = Map(key_size, value_size, max_entries, array)
        if array:
            for i in range(max_entries):
                m.items[struct.pack("<I", i)] = self._alloc(bytes(value_size))
        return m

    def value(self, fd: int, key: bytes) -> bytes | None:
        at = self.maps[fd].items.get(key)
        return None if at is None else bytes(self.mem[at][:self.maps[fd].value_size])

    def entries(self, fd: int) -> dict[bytes, bytes]:
        return {k: self.value(fd, k) for k in self.maps[fd].items}

    def _alloc(self, data: bytes) -> int:
        at = VALUES + 0x1000 * len(self.mem)
        self.mem[at] = bytearray(data) + bytearray(0x1000 - len(data))
        return at

    def _where(self, addr: int) -> tuple[bytearray, int]:
        for base, buf in self.mem.items():
            if base <= addr < base + len(buf):
                return buf, addr - base
        raise AssertionError(f"access outside any memory: {addr:#x}")

    def _read(self, addr: int, size: int) -> bytes:
        buf, off = self._where(addr)
        return bytes(buf[off:off + size])

    def _write(self, addr: int, data: bytes) -> None:
        buf, off = self._where(addr)
        buf[off:off + len(data)] = data

    def run(self, code: bytes, task: Task) -> int:
        self.mem.setdefault(STACK, bytearray(STACK_SIZE))
        r = [0] * 11
        r[10] = STACK + STACK_SIZE
        pc, n = 0, len(code) // 8
        while pc < n:
            op, regs, off, imm = struct.unpack_from("<BBhi", code, pc * 8)
            dst, src = regs & 0xF, regs >> 4
            pc += 1
            cls = op & 7
            if op == 0x18:  # ld_imm64 (a map fd as is)
                hi = struct.unpack_from("<i", code, pc * 8 + 4)[0]
                r[dst] = ((hi & 0xFFFFFFFF) << 32 | (imm & 0xFFFFFFFF)) if src == 0 else imm
                pc += 1
            elif op == 0x95:
                return r[0]
            elif op == 0x85:
                r[0] = self._helper(imm, r, task) & M64
            elif cls == 7:  # alu64
                val = r[src] if op & 8 else imm & M64
                r[dst] = _alu(op & 0xF0, r[dst], val)
            elif cls == 5:  # jumps
                val = r[src] if op & 8 else imm & M64
                if _taken(op & 0xF0, r[dst], val):
                    pc += off
            elif cls == 1:  # ldx
                size = {0x00: 4, 0x18: 8, 0x08: 2, 0x10: 1}[op & 0x18]
                r[dst] = int.from_bytes(self._read(r[src] + off, size), "little")
            elif cls in (2, 3) and op & 0xE0 == 0xC0:  # atomic
                assert imm in (0, 1), imm
                old = int.from_bytes(self._read(r[dst] + off, 8), "little")
                self._write(r[dst] + off, ((old + r[src]) & M64).to_bytes(8, "little"))
                if imm & 1:
                    r[src] = old
            elif cls in (2, 3):  # st, stx
                size = {0x00: 4, 0x18: 8, 0x08: 2, 0x10: 1}[op & 0x18]
                val = r[src] if cls == 3 else imm & M64
                self._write(r[dst] + off, (val & ((1 << 8 * size) - 1)).to_bytes(size, "little"))
            else:
                raise AssertionError(f"opcode {op:#x} not emulated")
        raise AssertionError("ran off the end")

    def _helper(self, helper: int, r: list[int], task: Task) -> int:
        if helper == 14:
            return task.pid_tgid
        if helper == 80:
            return task.cgroup
        if helper == 16:
            self._write(r[1], task.comm[:r[2] - 1].ljust(r[2], b"\0"))
            return 0
        m = self.maps[r[1]]
        key = self._read(r[2], m.key_size)
        if helper == 1:
            return m.items.get(key, 0)
        if helper == 2:
            if r[4] == 1 and key in m.items:
                return -EEXIST
            if key not in m.items and len(m.items) >= m.max_entries:
                return -E2BIG
            m.items[key] = self._alloc(self._read(r[3], m.value_size))
            return 0
        raise AssertionError(f"helper {helper} not emulated")


def _alu(op: int, a: int, b: int) -> int:
    if op == 0xB0:
        return b
    if op == 0x00:
        return (a + b) & M64
    if op == 0x20:
        return (a * b) & M64
    if op == 0x70:
        return a >> (b & 63)
    if op == 0x50:
        return a & b
    raise AssertionError(f"alu op {op:#x} not emulated")


def _taken(op: int, a: int, b: int) -> bool:
    return {0x00: True, 0x10: a == b, 0x50: a != b, 0xA0: a < b, 0x20: a > b}[op]
