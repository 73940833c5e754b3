"""The dispatcher: a few hand-assembled BPF instructions every probe runs first.

It needs no compiler, so it is loaded and attached in the first moments of
a start, while the generic program is still compiling or loading. Each hit
tail-calls the program in its slot of a program array (`prog_array[slot]`,
slot = the attach cookie's low 16 bits): the generic program, or later a
probe's own compiled one. While a slot is empty the tail call falls
through and the dispatcher counts the hit itself, per slot and CPU, for
probes whose cookie asks for it (COOKIE_EARLY: no per-probe filter).

The handover is exact: a hit either tail-calls (and the program in the
slot counts it) or falls through (and is counted here); putting the
program into the slot is one atomic map update. Hits seen = early + the
program's own count.

Set-wide filters apply to early counts too: ktui's own processes and --pid.
A set with a --comm filter gets no early counts (COOKIE_EARLY is not set).
ktui's processes (itself, and the compile helper it starts before the first
probe: compile_child.py) are read from a map (`ktui_exclude`, EXCLUDED
pids, 0 = none), so a helper started later is left out from the moment it
is known (`exclude`).

Every probe gets programs of its own (`load()`: the same instructions,
loaded again; a return probe one for its entry half and one for its
return), all sharing the program array and the early counters. The
kernel's run-time statistics (BPF_ENABLE_STATS) and its recursion misses
are kept per program, and a tail call runs inside the program that made
it (its time is the caller's; the callee's run count stays 0), so a
probe's own dispatcher program measures exactly that probe's work:
early counting, handover and the tail-called program alike. One shared
dispatcher could not tell the probes apart. Loading these few verified
instructions costs far less than anything else a probe does.
"""

from __future__ import annotations

import struct

from ktui.kernel.maps import bpfsys
from ktui.kernel.generic.abi import COOKIE_SLOT_MASK, EXCLUDED_PIDS, MAX_PROBES

# instruction classes and codes (include/uapi/linux/bpf.h)
_LD_IMM64 = 0x18
_LDX_DW = 0x79
_LDX_W = 0x61
_ST_W = 0x62
_STX_W = 0x63
_STX_DW = 0x7B
_MOV64_X = 0xBF
_MOV64_K = 0xB7
_ADD64_K = 0x07
_AND64_K = 0x57
_RSH64_K = 0x77
_JEQ_K = 0x15
_JEQ_X = 0x1D
_JNE_K = 0x55
_CALL = 0x85
_EXIT = 0x95

_MAP_LOOKUP_ELEM = 1
_TAIL_CALL = 12
_GET_CURRENT_PID_TGID = 14
_GET_ATTACH_COOKIE = 174

EARLY_BIT = 33  # abi.COOKIE_EARLY
EXCLUDED = EXCLUDED_PIDS  # pids in ktui_exclude: ktui and its compile helper


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def _ld_map_fd(dst: int, fd: int) -> bytes:
    return _insn(_LD_IMM64, dst, bpfsys.BPF_PSEUDO_MAP_FD, 0, fd) + _insn(0)


def assemble(prog_array_fd: int, early_fd: int, exclude_fd: int, pid: int | None) -> bytes:
    """The dispatcher's instructions. Jumps are resolved by label."""
    code: list[tuple[str, object]] = []

    def emit(raw: bytes) -> None:
        code.append(("raw", raw))

    def jump(op: int, reg: int, imm: int = 0, to: str = "out", src: int = 0) -> None:
        code.append(("jump", (op, reg, src, imm, to)))

    emit(_insn(_MOV64_X, 6, 1))  # r6 = ctx
    emit(_insn(_CALL, imm=_GET_ATTACH_COOKIE))  # r0 = cookie (r1 is ctx)
    emit(_insn(_MOV64_X, 7, 0))  # r7 = cookie
    emit(_insn(_MOV64_X, 1, 6))  # tail_call(ctx, prog_array, slot)
    emit(_ld_map_fd(2, prog_array_fd))
    emit(_insn(_MOV64_X, 3, 7))
    emit(_insn(_AND64_K, 3, imm=COOKIE_SLOT_MASK))
    emit(_insn(_CALL, imm=_TAIL_CALL))
    # Fell through: no program in this slot yet.
    emit(_insn(_MOV64_X, 1, 7))
    emit(_insn(_RSH64_K, 1, imm=EARLY_BIT))
    emit(_insn(_AND64_K, 1, imm=1))
    jump(_JEQ_K, 1, 0)  # not counted early
    emit(_insn(_CALL, imm=_GET_CURRENT_PID_TGID))
    emit(_insn(_RSH64_K, 0, imm=32))
    if pid is not None:
        jump(_JNE_K, 0, pid)
    # ktui's own processes: r8 = the process, compared with each pid of
    # ktui_exclude[0] (0: an unused place; the idle task, pid 0, counts)
    emit(_insn(_MOV64_X, 8, 0))
    jump(_JEQ_K, 8, 0, to="count")
    emit(_insn(_ST_W, 10, 0, -8, 0))
    emit(_ld_map_fd(1, exclude_fd))
    emit(_insn(_MOV64_X, 2, 10))
    emit(_insn(_ADD64_K, 2, imm=-8))
    emit(_insn(_CALL, imm=_MAP_LOOKUP_ELEM))
    jump(_JEQ_K, 0, 0)
    for i in range(EXCLUDED):
        emit(_insn(_LDX_W, 1, 0, 4 * i))
        jump(_JEQ_X, 1, src=8)
    code.append(("label", "count"))
    emit(_insn(_MOV64_X, 1, 7))  # key = slot, on the stack
    emit(_insn(_AND64_K, 1, imm=COOKIE_SLOT_MASK))
    emit(_insn(_STX_W, 10, 1, -4))
    emit(_ld_map_fd(1, early_fd))
    emit(_insn(_MOV64_X, 2, 10))
    emit(_insn(_ADD64_K, 2, imm=-4))
    emit(_insn(_CALL, imm=_MAP_LOOKUP_ELEM))
    jump(_JEQ_K, 0, 0)
    emit(_insn(_LDX_DW, 1, 0, 0))  # per-CPU value: a plain increment
    emit(_insn(_ADD64_K, 1, imm=1))
    emit(_insn(_STX_DW, 0, 1, 0))
    code.append(("label", "out"))
    emit(_insn(_MOV64_K, 0, imm=0))
    emit(_insn(_EXIT))
    # resolve: a jump's offset counts instructions (8 bytes) after it
    sizes = [len(v) // 8 if kind == "raw" else (1 if kind == "jump" else 0) for kind, v in code]
    positions, pos = [], 0
    for size in sizes:
        positions.append(pos)
        pos += size
    labels = {value: at for (kind, value), at in zip(code, positions) if kind == "label"}
    result = b""
    for (kind, value), at in zip(code, positions):
        if kind == "raw":
            result += value
        elif kind == "jump":
            op, reg, src, imm, to = value
            result += _insn(op, reg, src, labels[to] - (at + 1), imm)
    return result


def excluded_value(pids: tuple[int, ...]) -> bytes:
    """ktui_exclude's one value: EXCLUDED pids, 0 where none."""
    if len(pids) > EXCLUDED:
        raise ValueError(f"more than {EXCLUDED} processes of ktui's to leave out")
    return struct.pack(f"<{EXCLUDED}I", *pids, *([0] * (EXCLUDED - len(pids))))


class Dispatcher:
    """The program array, the early counters and the dispatcher's
    instructions, loaded once per probe program (`load`)."""

    def __init__(self, exclude_pids: tuple[int, ...], pid: int | None) -> None:
        fds: list[int] = []
        try:
            self.prog_array_fd = bpfsys.map_create(bpfsys.BPF_MAP_TYPE_PROG_ARRAY, 4, 4, MAX_PROBES,
                                                   name="ktui_slots")
            fds.append(self.prog_array_fd)
            self.early_fd = bpfsys.map_create(bpfsys.BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, MAX_PROBES,
                                              name="ktui_early")
            fds.append(self.early_fd)
            self.exclude_fd = bpfsys.map_create(bpfsys.BPF_MAP_TYPE_ARRAY, 4, 4 * EXCLUDED, 1,
                                                name="ktui_exclude")
            fds.append(self.exclude_fd)
            self.exclude(exclude_pids)
            self._insns = assemble(self.prog_array_fd, self.early_fd, self.exclude_fd, pid)
            # Loaded now so a kernel that refuses it says so at once;
            # the first probe gets it.
            self._spare: int | None = bpfsys.prog_load(self._insns, name="ktui_dispatch",
                                                       log_size=1 << 16)
        except BaseException:
            for fd in fds:
                _close(fd)
            raise

    def exclude(self, pids: tuple[int, ...]) -> None:
        """From now on, hits of these processes (ktui's) are not counted."""
        bpfsys.map_update(self.exclude_fd, struct.pack("<I", 0), excluded_value(pids))

    def load(self, name: str = "ktui_dispatch") -> int:
        """A dispatcher program of its own for one probe (its fd: the
        caller closes it once nothing is linked to it)."""
        if self._spare is not None:
            fd, self._spare = self._spare, None
            return fd
        return bpfsys.prog_load(self._insns, name=name, log_size=1 << 16)

    def route(self, slot: int, prog_fd: int) -> None:
        """From now on, hits of `slot` run `prog_fd` (one atomic update)."""
        bpfsys.map_update(self.prog_array_fd, struct.pack("<I", slot), struct.pack("<I", prog_fd))

    def unroute(self, slot: int) -> None:
        bpfsys.map_delete(self.prog_array_fd, struct.pack("<I", slot))

    def close(self) -> None:
        spare, self._spare = self._spare, None
        for fd in (spare, self.early_fd, self.exclude_fd, self.prog_array_fd):
            if fd is not None:
                _close(fd)


def _close(fd: int) -> None:
    import os

    try:
        os.close(fd)
    except OSError:
        pass
