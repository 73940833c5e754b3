"""The counting probe's program (generic/counter.py), as far as the host
can check it: instructions that jump only forward and inside, and which
hits name their process: 1 in COMM_EVERY of any run of counts, spread so
that no periodic workload aliases with it. Its counts on a kernel:
tests/kernel/test_fentry.py::test_a_counting_probe_runs_its_own_program."""

from __future__ import annotations

import struct

from ktui.kernel.codegen.runtime import COMM_EVERY
from ktui.kernel.generic.counter import assemble, sampled

HELPERS = {1: "map_lookup_elem", 2: "map_update_elem", 14: "get_current_pid_tgid", 16: "get_current_comm",
           80: "get_current_cgroup_id"}


def insns(code: bytes):
    for at in range(0, len(code), 8):
        op, regs, off, imm = struct.unpack_from("<BBhi", code, at)
        yield at // 8, op, regs & 0xF, regs >> 4, off, imm


def test_the_program_jumps_forward_inside_and_calls_only_its_helpers():
    for pid in (None, 1234):
        code = assemble(7, 3, 4, 5, 6, pid)
        count = len(code) // 8
        assert code[-8:] == struct.pack("<BBhi", 0x95, 0, 0, 0)  # exit
        for at, op, dst, src, off, imm in insns(code):
            if op & 0x07 == 0x05 and op not in (0x85, 0x95):  # a jump
                assert 0 <= off and at + 1 + off < count, (at, op, off)
            if op == 0x85:
                assert imm in HELPERS, imm


def test_one_in_comm_every_of_any_run_of_counts_is_sampled():
    for start in (1024, 10**6, 2**40):
        for length in (640, 6400, 64000):
            n = sum(sampled(seen) for seen in range(start, start + length))
            assert abs(n - length / COMM_EVERY) <= 3, (start, length, n)


def test_no_period_aliases_with_the_sample():
    """A stride would: two processes taking turns (a pipe's two ends) with
    every 64th count sampled would name one of them only."""
    for period in (2, 3, 8, 64):
        counts = [0] * period
        for seen in range(10**6, 10**6 + 64000):
            if sampled(seen):
                counts[seen % period] += 1
        expect = 64000 / COMM_EVERY / period
        assert all(abs(c - expect) <= 0.2 * expect + 3 for c in counts), (period, counts)
