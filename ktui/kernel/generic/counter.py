"""The counting probe's own program: a few hand-assembled instructions.

A call probe with no fetch, no filter and no aggregation (plan F_BARE)
asks only "is it called, how often, by whom": the commonest first
question, and the one people compare with funccount. Through the
dispatcher and the generic program its hit made six helper calls and a
tail call (the attach cookie twice, the plan, the scratch-free count's
per-CPU lookup, which 6.1 does not inline, and a random number); here it
makes one, as funccount with `-p` does:

    pid = bpf_get_current_pid_tgid() >> 32      the set-wide filters:
    --pid given: pid == PID, else pid not one of ktui's (ktui_exclude)
    seen = atomic_fetch_add(&ktui_bare_hits[SLOT], 1)
    who made it: every hit while seen < COMM_EXACT (exact), then 1 in
    COMM_EVERY, weighted COMM_EVERY, into ktui_bare_comms[SLOT, cgroup, comm]
    (who.py: one update gives both the top comms and the top cgroups)

The slot is an immediate (each probe loads its own copy, as it loads its
own dispatcher: so the kernel's run-time statistics stay the probe's) and
the counter a plain array, whose lookup the verifier inlines; funccount
counts the same way. Which hits name their process is chosen by a hash of
`seen` (Fibonacci hashing: the top bits of seen * 2^64/phi), not by a
stride, which a periodic workload (two processes taking turns on a pipe)
would alias with, and not by bpf_get_prandom_u32, a helper call per hit.

The same instructions load as a kprobe program or, for one kernel
function, as an fentry program (no context is read), which needs neither
the generic program nor its tracing variant: a counting probe by fentry
attaches at once. A probe's plan never changes while its slot lives
(an edit is a remove and an add), so a slot runs this program or the
dispatcher for all its life.
"""

from __future__ import annotations

import struct

from ktui.kernel.maps import bpfsys
from ktui.kernel.maps.bpfasm import (CALL, GET_CURRENT_PID_TGID, JEQ_K, JNE_K, MAP_LOOKUP_ELEM, R0, R1, R2,
                                     R3, R4, R7, R8, R10, Asm, insn)
from ktui.kernel.codegen.runtime import COMM_EVERY, COMM_EXACT
from ktui.kernel.generic.abi import COMM_KEYS, EXCLUDED_PIDS, MAX_PROBES
from ktui.kernel.generic.who import COMM_KEY, Hitters, forget_slot, hitters_by_slot

MAP_UPDATE_ELEM = 2
GET_CURRENT_COMM = 16
GET_CURRENT_CGROUP_ID = 80
BPF_NOEXIST = 1
EEXIST = 17

_LDX_W = 0x61
_STX_DW = 0x7B
_JEQ_X = 0x1D
_JLT_K = 0xA5  # unsigned <
_MUL64_X = 0x2F
_RSH64_K = 0x77
_ATOMIC_DW = 0xDB  # BPF_STX | BPF_DW | BPF_ATOMIC (5.12+ with BPF_FETCH)
_BPF_ADD = 0x00
_BPF_FETCH = 0x01
_LD_IMM64 = 0x18

# 2^64 / the golden ratio: consecutive counts hash to well-spread values
_GOLDEN = 0x9E3779B97F4A7C15
_EVERY_SHIFT = 64 - (COMM_EVERY.bit_length() - 1)  # the top log2(COMM_EVERY) bits

# stack: the slot key at -4; the who key (who.COMM_KEY) at -40: slot, pad
# (-36), cgroup id (-32), comm (-24..-8); a value at -48
_KEY, _CKEY, _VALUE = -4, -40, -48
_PAD, _CGROUP, _COMM = _CKEY + 4, _CKEY + 8, _CKEY + 16


def _ld_imm64(dst: int, value: int) -> bytes:
    return insn(_LD_IMM64, dst, imm=_s32(value & 0xFFFFFFFF)) + insn(0, imm=_s32(value >> 32))


def _s32(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


def _lookup(a: Asm, fd: int, key_off: int) -> None:
    """r0 = the value of the key at r10 + key_off in map `fd` (or 0)."""
    a.map_fd(R1, fd).mov(R2, R10).add_imm(R2, key_off).call(MAP_LOOKUP_ELEM)


def sampled(seen: int) -> bool:
    """Whether the hit counted as `seen` (its count before it) names its
    process, past the exact first ones: the program's test, in Python."""
    return ((seen * _GOLDEN) & (2**64 - 1)) >> _EVERY_SHIFT == 0


def assemble(slot: int, hits_fd: int, comms_fd: int, dropped_fd: int, exclude_fd: int,
             pid: int | None) -> bytes:
    a = Asm()
    a.call(GET_CURRENT_PID_TGID)
    a.emit(insn(_RSH64_K, R0, imm=32))
    if pid is not None:
        # one process: ktui's own are another (the exclusion is for a set
        # that watches every process)
        a.jump(JNE_K, R0, pid, "out")
    else:
        a.mov(R7, R0)
        a.jump(JEQ_K, R7, 0, "count")  # the idle task's hits count; 0 is an unused place below
        a.store_imm(R10, _KEY, 0, word=True)
        _lookup(a, exclude_fd, _KEY)
        a.jump(JEQ_K, R0, 0, "out")
        for i in range(EXCLUDED_PIDS):
            a.emit(insn(_LDX_W, R1, R0, 4 * i))
            a.jump(_JEQ_X, R1, 0, "out", src=R7)
    a.label("count")
    a.store_imm(R10, _KEY, slot, word=True)
    _lookup(a, hits_fd, _KEY)
    a.jump(JEQ_K, R0, 0, "out")
    a.mov_imm(R1, 1)
    a.emit(insn(_ATOMIC_DW, R0, R1, 0, _BPF_ADD | _BPF_FETCH))  # r1 = the count before this hit
    a.mov_imm(R8, 1)
    a.jump(_JLT_K, R1, COMM_EXACT, "who")
    a.emit(_ld_imm64(R2, _GOLDEN), insn(_MUL64_X, R1, R2), insn(_RSH64_K, R1, imm=_EVERY_SHIFT))
    a.jump(JNE_K, R1, 0, "out")
    a.mov_imm(R8, COMM_EVERY)
    a.label("who")  # r8: the weight of this hit's process
    a.store_imm(R10, _CKEY, slot, word=True)
    a.store_imm(R10, _PAD, 0, word=True)  # the key is hashed as bytes: none left as it was
    a.call(GET_CURRENT_CGROUP_ID).store(R10, _CGROUP, R0)
    a.mov(R1, R10).add_imm(R1, _COMM).mov_imm(R2, 16).call(GET_CURRENT_COMM)
    _lookup(a, comms_fd, _CKEY)
    a.jump(JEQ_K, R0, 0, "new")
    a.emit(insn(_ATOMIC_DW, R0, R8, 0, _BPF_ADD))
    a.goto("out")
    a.label("new")
    a.emit(insn(_STX_DW, R10, R8, _VALUE))
    a.map_fd(R1, comms_fd).mov(R2, R10).add_imm(R2, _CKEY)
    a.mov(R3, R10).add_imm(R3, _VALUE).mov_imm(R4, BPF_NOEXIST).call(MAP_UPDATE_ELEM)
    a.jump(JEQ_K, R0, 0, "out")
    a.jump(JNE_K, R0, -EEXIST, "dropped")
    # another CPU put the key in first: add to it
    _lookup(a, comms_fd, _CKEY)
    a.jump(JEQ_K, R0, 0, "dropped")
    a.emit(insn(_ATOMIC_DW, R0, R8, 0, _BPF_ADD))
    a.goto("out")
    a.label("dropped")  # no room for another process: counted, as the generic program does
    _lookup(a, dropped_fd, _KEY)
    a.jump(JEQ_K, R0, 0, "out")
    a.mov_imm(R1, 1)
    a.emit(insn(_ATOMIC_DW, R0, R1, 0, _BPF_ADD))
    a.label("out")
    a.mov_imm(R0, 0).exit()
    return a.code()


class Counters:
    """The counting probes' maps (shared by every such probe of a session,
    indexed by slot) and their programs, one copy per probe (`load`)."""

    def __init__(self, exclude_fd: int, pid: int | None) -> None:
        self.exclude_fd = exclude_fd
        self.pid = pid
        fds: list[int] = []
        try:
            self.hits_fd = bpfsys.map_create(bpfsys.BPF_MAP_TYPE_ARRAY, 4, 8, MAX_PROBES, name="ktui_bare_hits")
            fds.append(self.hits_fd)
            self.comms_fd = bpfsys.map_create(bpfsys.BPF_MAP_TYPE_HASH, COMM_KEY.size, 8, COMM_KEYS,
                                              name="ktui_bare_comms")
            fds.append(self.comms_fd)
            self.dropped_fd = bpfsys.map_create(bpfsys.BPF_MAP_TYPE_ARRAY, 4, 8, MAX_PROBES,
                                                name="ktui_bare_drop")
            fds.append(self.dropped_fd)
        except BaseException:
            for fd in fds:
                _close(fd)
            raise

    def load(self, slot: int, name: str, btf_id: int = 0, attach_type: int = 0) -> int:
        """The counting program of `slot` (its fd; the caller closes it):
        a kprobe program, or with `btf_id` an fentry program for that
        kernel function. Raises OSError (a kernel before 5.12 has no
        atomic fetch-and-add: the caller keeps the dispatcher)."""
        insns = assemble(slot, self.hits_fd, self.comms_fd, self.dropped_fd, self.exclude_fd, self.pid)
        if btf_id:
            return bpfsys.prog_load(insns, name=name, log_size=1 << 16, prog_type=bpfsys.BPF_PROG_TYPE_TRACING,
                                    expected_attach_type=attach_type, attach_btf_id=btf_id)
        return bpfsys.prog_load(insns, name=name, log_size=1 << 16)

    def clear(self, index: int, reused: bool) -> None:
        """A slot starts from zero: its count, and (`reused`) its processes."""
        key = struct.pack("<I", index)
        bpfsys.map_update(self.hits_fd, key, bytes(8))
        bpfsys.map_update(self.dropped_fd, key, bytes(8))
        if reused:
            forget_slot(self.comms_fd, index)

    def hits(self, count: int):
        """The first `count` slots' counts (a numpy array)."""
        import numpy as np

        return np.frombuffer(bpfsys.array_lookup_all(self.hits_fd, count, 8), dtype=np.uint64)

    def hitters(self) -> dict[int, Hitters]:
        """Every slot's sampled hits by comm and by cgroup."""
        return hitters_by_slot(self.comms_fd)

    def close(self) -> None:
        for fd in (self.hits_fd, self.comms_fd, self.dropped_fd):
            _close(fd)


def _close(fd: int) -> None:
    import os

    try:
        os.close(fd)
    except OSError:
        pass
