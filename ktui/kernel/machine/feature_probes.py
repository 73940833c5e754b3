"""The probes behind kernel features: tiny programs loaded, attached and run.

Each probe does what ktui would do with the feature, on a function this
thread can make the kernel run, and checks the program saw what it should:

- kprobes sit on TRIGGER, the getppid system call: `os.getppid()` here
  runs them (their programs only count hits of this thread);
- fentry/fexit programs sit on TEST_TARGET, bpf_fentry_test1(1) == 2,
  which the kernel runs for BPF_PROG_TEST_RUN of a tracing program, as
  the kernel's own selftests do;
- a kprobe on NESTED_TARGET, which the map-update system call runs with
  BPF programs already blocked on that CPU (bpf_disable_instrumentation):
  a nested hit the kernel skips, counted in the program's recursion
  misses from 6.7, not before. A second, program-less kprobe counts the
  hits, so "not counted" is told from "never hit".

An answer is "no" only when the kernel refused or failed the feature
itself (an unknown helper or map type, EOPNOTSUPP, a cookie read back
wrong); a probe that could not run (EPERM without privilege, lockdown, a
test function missing from this kernel) is unknown. Every fd a probe
opens is closed before it returns: nothing stays attached.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import threading
from contextlib import ExitStack
from typing import Callable

from ktui.kernel.maps import bpfsys
from ktui.kernel.attach import kprobe_pmu
from ktui.kernel.maps.bpfasm import (
    GET_ATTACH_COOKIE, GET_CURRENT_PID_TGID, GET_CURRENT_TASK_BTF, GET_FUNC_ARG, GET_FUNC_RET,
    JEQ_K, JNE_K, MAP_LOOKUP_ELEM, MOV32_X, R0, R1, R2, R3, R4, R6, R8, R10, RINGBUF_OUTPUT,
    TASK_STORAGE_GET, Asm, insn, return_zero,
)
from ktui.kernel.maps.bpfsys import BpfError
from ktui.kernel.machine.features import NAMES, Finding

TRIGGER = "__x64_sys_getppid"
TEST_TARGET = "bpf_fentry_test1"
TEST_ARG, TEST_RET = 1, 2  # bpf_fentry_test1(1) returns 2 (net/bpf/test_run.c)
NESTED_TARGET = "array_map_update_elem"
COOKIE = 0x6B74756900C0FFEE
BPF_RB_NO_WAKEUP = 1
ENOTSUPP = 524  # the kernel's own "not supported" (trampolines, BTF)
MAX_TRACE_ARGS = 12  # MAX_BPF_FUNC_ARGS: what a trampoline takes once it takes more than 6
SLOTS = 4  # u64 results a probe program can write
NOT_PERMITTED = "bpf(2) not permitted: needs root (or CAP_BPF and CAP_PERFMON), and no lockdown"


class Unknown(Exception):
    """The probe could not ask: its message says why."""


class No(Exception):
    """The kernel refused the feature itself: its message says how."""


def probe_all(names: set[str] | None = None, *, btf_opener: Callable | None = None) -> dict[str, Finding]:
    """The findings for `names` (default: all), each probe on its own: one
    that fails does not stop the others."""
    probe = Prober(btf_opener)
    out = {}
    for name in NAMES:
        if names is not None and name not in names:
            continue
        out[name] = probe.run(name)
    return out


def _refusal(exc: OSError) -> Finding:
    """A failed bpf(2) or perf call that the probe did not expect: unknown.
    A refusal for want of privilege reads the same for every probe (so
    `ktui doctor` says it once)."""
    if exc.errno in (errno.EPERM, errno.EACCES):
        return Finding(None, NOT_PERMITTED)
    return Finding(None, _one_line(exc))


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    log = getattr(exc, "log", "")
    if log:
        lines = [ln for ln in log.splitlines() if ln.strip() and not ln.startswith(("processed", "verification"))]
        if lines:
            text += f" ({lines[-1].strip()})"
    return text


def _unknown_helper(exc: BpfError) -> bool:
    """The verifier's words for a helper this kernel does not have, or does
    not give this program type (libbpf_probe_bpf_helper reads the same)."""
    return "unknown func" in exc.log or "invalid func" in exc.log


class Prober:
    def __init__(self, btf_opener: Callable | None = None) -> None:
        self.tid = threading.get_native_id()
        self._btf_opener = btf_opener
        self._kernel_btf = None
        self._btf_tried = False

    def run(self, name: str) -> Finding:
        with ExitStack() as fds:
            self.fds = fds
            try:
                return getattr(self, f"probe_{name}")()
            except Unknown as exc:
                return Finding(None, str(exc))
            except No as exc:
                return Finding(False, str(exc))
            except OSError as exc:
                return _refusal(exc)
            except Exception as exc:  # noqa: BLE001 - a BTF that does not read, a probe's own bug: not a "no"
                return Finding(None, f"{name}: the probe failed: {exc!r}")

    # ------------------------------------------------------------ helpers

    def _own(self, fd: int) -> int:
        self.fds.callback(_close, fd)
        return fd

    def _results(self) -> int:
        """An array of one value: SLOTS u64s a probe program writes."""
        return self._own(bpfsys.map_create(bpfsys.BPF_MAP_TYPE_ARRAY, 4, 8 * SLOTS, 1, name="ktui_probe"))

    @staticmethod
    def _read(results: int) -> tuple[int, ...]:
        raw = bpfsys.map_lookup(results, b"\0\0\0\0", 8 * SLOTS)
        return struct.unpack(f"<{SLOTS}Q", raw) if raw else (0,) * SLOTS

    def _program(self, results: int, body: Callable[[Asm], None]) -> bytes:
        """On a hit of this thread: `body`, with r6 = ctx and r8 = the
        results (slot i at r8 + 8 i). Other threads' hits do nothing."""
        a = Asm()
        a.mov(R6, R1)
        a.call(GET_CURRENT_PID_TGID)
        a.emit(insn(MOV32_X, R0, R0))  # the thread id: the low half
        a.jump(JNE_K, R0, self.tid, "out")
        a.store_imm(R10, -4, 0, word=True)
        a.map_fd(R1, results)
        a.mov(R2, R10).add_imm(R2, -4)
        a.call(MAP_LOOKUP_ELEM)
        a.jump(JEQ_K, R0, 0, "out")
        a.mov(R8, R0)
        body(a)
        a.label("out")
        a.mov_imm(R0, 0).exit()
        return a.code()

    def _load(self, insns: bytes, **kwargs) -> int:
        """A program (a kprobe one unless `prog_type` says), its verifier log
        kept for the error."""
        return self._own(bpfsys.prog_load(insns, name="ktui_feature", log_size=1 << 16, **kwargs))

    def _load_helper(self, insns: bytes, helper: str, kind: str, **kwargs) -> int:
        """Load a program that calls `helper`: No if the kernel does not
        offer it to `kind` programs."""
        try:
            return self._load(insns, **kwargs)
        except BpfError as exc:
            if _unknown_helper(exc):
                raise No(f"{helper} is not offered to {kind} programs") from None
            raise

    def _kprobe(self, prog: int, symbol: str = TRIGGER) -> int:
        """A kprobe on `symbol` running `prog`, enabled (closed with the probe)."""
        perf = self._open_kprobe(symbol)
        kprobe_pmu.ioctl(perf, kprobe_pmu.PERF_EVENT_IOC_SET_BPF, prog)
        kprobe_pmu.ioctl(perf, kprobe_pmu.PERF_EVENT_IOC_ENABLE, 0)
        return perf

    def _open_kprobe(self, symbol: str, **where) -> int:
        try:
            return self._own(kprobe_pmu.open_kprobe(symbol, 0, False, **where))
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.EACCES):
                raise
            raise Unknown(f"no kprobe on {symbol}: {exc.strerror or exc}") from None

    def _btf(self):
        """vmlinux's BTF (KernelBtf), opened once; None where it cannot be."""
        if not self._btf_tried:
            self._btf_tried = True
            if self._btf_opener is not None:
                self._kernel_btf = self._btf_opener()
            else:
                from ktui.btf.index import KernelBtf

                self._kernel_btf = KernelBtf()
        return self._kernel_btf

    def _btf_id(self, name: str) -> int:
        btf = self._btf()
        problem = btf.problem() if btf is not None else "no BTF"
        if problem:
            raise No(f"fentry/fexit need the kernel's BTF: {problem}")
        ids = btf.function_ids(name)
        if len(ids) != 1:
            raise Unknown(f"{name} is not in this kernel's BTF: nothing to test fentry on")
        return ids[0]

    def _tracing(self, insns: bytes, attach_type: int, helper: str = "") -> int:
        """A fentry/fexit program for TEST_TARGET."""
        kwargs = dict(prog_type=bpfsys.BPF_PROG_TYPE_TRACING, expected_attach_type=attach_type,
                      attach_btf_id=self._btf_id(TEST_TARGET))
        if helper:
            return self._load_helper(insns, helper, "fentry/fexit", **kwargs)
        return self._load(insns, **kwargs)

    def _test_run(self, prog: int) -> None:
        """bpf_fentry_test1(1) and its siblings run, and with them every
        program attached to them."""
        try:
            bpfsys.prog_test_run(prog)
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.EACCES):
                raise
            raise Unknown(f"no test run of a tracing program ({exc.strerror}): nothing calls {TEST_TARGET}") from None

    # ------------------------------------------------------------ the probes

    def probe_ringbuf(self) -> Finding:
        try:
            self._own(bpfsys.map_create(bpfsys.BPF_MAP_TYPE_RINGBUF, 0, 0, mmap.PAGESIZE, name="ktui_probe"))
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                raise No("BPF_MAP_TYPE_RINGBUF refused (EINVAL)") from None
            raise
        return Finding(True, "a ring buffer map was made")

    def probe_ringbuf_no_wakeup(self) -> Finding:
        try:
            ring = self._own(bpfsys.map_create(bpfsys.BPF_MAP_TYPE_RINGBUF, 0, 0, mmap.PAGESIZE,
                                               name="ktui_probe"))
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                raise No("no ring buffer") from None
            raise
        results = self._results()

        def body(a: Asm) -> None:
            a.store_imm(R10, -16, 0x6B747569)
            a.map_fd(R1, ring).mov(R2, R10).add_imm(R2, -16).mov_imm(R3, 8).mov_imm(R4, BPF_RB_NO_WAKEUP)
            a.call(RINGBUF_OUTPUT)
            a.store(R8, 0, R0).store_imm(R8, 8, 1)

        prog = self._load(self._program(results, body))
        self._kprobe(prog)
        os.getppid()
        rc, ran = struct.unpack("<qQ", struct.pack("<QQ", *self._read(results)[:2]))
        if not ran:
            raise Unknown(f"the kprobe on {TRIGGER} did not run")
        if rc != 0:
            raise No(f"bpf_ringbuf_output with BPF_RB_NO_WAKEUP returned {rc}")
        written = _ring_producer(ring)
        if written <= 0:
            raise No("bpf_ringbuf_output returned 0 but wrote nothing")
        return Finding(True, "a kprobe wrote a record with BPF_RB_NO_WAKEUP")

    def probe_kprobe_cookie(self) -> Finding:
        results = self._results()

        def body(a: Asm) -> None:
            a.mov(R1, R6).call(GET_ATTACH_COOKIE).store(R8, 0, R0).store_imm(R8, 8, 1)

        prog = self._load_helper(self._program(results, body), "bpf_get_attach_cookie", "kprobe")
        perf = self._open_kprobe(TRIGGER)
        try:
            self._own(bpfsys.link_perf_event(prog, perf, COOKIE))
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                raise No("BPF_LINK_CREATE takes no perf event (no perf links)") from None
            raise
        kprobe_pmu.ioctl(perf, kprobe_pmu.PERF_EVENT_IOC_ENABLE, 0)
        os.getppid()
        cookie, ran = self._read(results)[:2]
        if not ran:
            raise Unknown(f"the kprobe on {TRIGGER} did not run")
        if cookie != COOKIE:
            raise No(f"a kprobe read its cookie as {cookie:#x}, not {COOKIE:#x}")
        return Finding(True, "a kprobe read back its link's cookie")

    def probe_fentry(self) -> Finding:
        self._btf_id(TEST_TARGET)  # without BTF there is no fentry, privilege or not
        results = self._results()
        entry = self._tracing(self._program(results, lambda a: a.store_imm(R8, 0, 1)), bpfsys.BPF_TRACE_FENTRY)

        def exit_body(a: Asm) -> None:  # ctx: the argument, then the return value
            a.load(R1, R6, 8).store(R8, 8, R1)

        leave = self._tracing(self._program(results, exit_body), bpfsys.BPF_TRACE_FEXIT)
        for prog in (entry, leave):
            try:
                self._own(bpfsys.attach_tracing(prog))
            except OSError as exc:
                if exc.errno in (errno.EPERM, errno.EACCES):
                    raise
                raise No(f"the kernel refused a trampoline on {TEST_TARGET}: {_one_line(exc)}") from None
        self._test_run(entry)
        entered, ret = self._read(results)[:2]
        if not entered:
            raise No(f"fentry on {TEST_TARGET} attached but did not run")
        if ret & 0xFFFFFFFF != TEST_RET:
            raise No(f"fexit on {TEST_TARGET} read the return value as {ret:#x}, not {TEST_RET}")
        return Finding(True, f"fentry and fexit ran on {TEST_TARGET}")

    def probe_tracing_cookie(self) -> Finding:
        self._btf_id(TEST_TARGET)
        results = self._results()

        def body(a: Asm) -> None:
            a.mov(R1, R6).call(GET_ATTACH_COOKIE).store(R8, 0, R0).store_imm(R8, 8, 1)

        prog = self._tracing(self._program(results, body), bpfsys.BPF_TRACE_FENTRY, "bpf_get_attach_cookie")
        self._own(bpfsys.link_tracing(prog, bpfsys.BPF_TRACE_FENTRY, COOKIE))
        self._test_run(prog)
        cookie, ran = self._read(results)[:2]
        if not ran:
            raise Unknown(f"fentry on {TEST_TARGET} did not run")
        if cookie != COOKIE:
            raise No(f"fentry read its cookie as {cookie:#x}, not {COOKIE:#x}")
        return Finding(True, "fentry read back its link's cookie")

    def probe_func_arg(self) -> Finding:
        self._btf_id(TEST_TARGET)
        results = self._results()

        def body(a: Asm) -> None:
            a.store_imm(R10, -16, 0)
            a.mov(R1, R6).mov_imm(R2, 0).mov(R3, R10).add_imm(R3, -16).call(GET_FUNC_ARG)
            a.store(R8, 16, R0).load(R1, R10, -16).store(R8, 0, R1)
            a.store_imm(R10, -24, 0)
            a.mov(R1, R6).mov(R2, R10).add_imm(R2, -24).call(GET_FUNC_RET)
            a.store(R8, 24, R0).load(R1, R10, -24).store(R8, 8, R1)

        prog = self._tracing(self._program(results, body), bpfsys.BPF_TRACE_FEXIT, "bpf_get_func_arg")
        self._own(bpfsys.attach_tracing(prog))
        self._test_run(prog)
        arg, ret, arg_rc, ret_rc = self._read(results)
        if not (arg or ret or arg_rc or ret_rc):
            raise Unknown(f"fexit on {TEST_TARGET} did not run")
        if (arg & 0xFFFFFFFF, ret & 0xFFFFFFFF, arg_rc, ret_rc) != (TEST_ARG, TEST_RET, 0, 0):
            raise No(f"bpf_get_func_arg/ret read {arg:#x}/{ret:#x} (returned {arg_rc}, {ret_rc}), "
                     f"not {TEST_ARG}/{TEST_RET}")
        return Finding(True, f"fexit read {TEST_TARGET}'s argument and return value")

    def probe_trace_args(self) -> Finding:
        btf = self._btf()
        if btf is None or btf.problem():
            raise No(f"fentry/fexit need the kernel's BTF: {btf.problem() if btf is not None else 'no BTF'}")
        from ktui.kernel.attach.attach_choice import many_args_target

        target = many_args_target(btf, MAX_TRACE_ARGS)
        if target is None:
            raise Unknown("no function of 7 to 12 plain arguments in BTF to try a trampoline on")
        name, btf_id, nargs = target
        try:
            prog = self._load(return_zero(), prog_type=bpfsys.BPF_PROG_TYPE_TRACING,
                              expected_attach_type=bpfsys.BPF_TRACE_FENTRY, attach_btf_id=btf_id)
            self._own(bpfsys.attach_tracing(prog))
        except OSError as exc:
            if exc.errno in (errno.EPERM, errno.EACCES):
                raise
            return Finding(False, f"a trampoline on {name} ({nargs} arguments) was refused: "
                                  f"{_one_line(exc)}", 6)
        return Finding(True, f"a trampoline attached to {name} ({nargs} arguments)", MAX_TRACE_ARGS)

    def probe_task_storage(self) -> Finding:
        btf = self._own(bpfsys.btf_load(_int_btf()))
        try:
            storage = self._own(bpfsys.map_create(bpfsys.BPF_MAP_TYPE_TASK_STORAGE, 4, 8, 0,
                                                  bpfsys.BPF_F_NO_PREALLOC, name="ktui_probe",
                                                  btf=(btf, 1, 2)))
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                raise No("BPF_MAP_TYPE_TASK_STORAGE refused (EINVAL)") from None
            raise
        a = Asm().call(GET_CURRENT_TASK_BTF).mov(R2, R0).map_fd(R1, storage).mov_imm(R3, 0).mov_imm(R4, 0)
        a.call(TASK_STORAGE_GET).mov_imm(R0, 0).exit()
        self._load_helper(a.code(), "bpf_task_storage_get", "kprobe")
        return Finding(True, "a kprobe program with bpf_task_storage_get loaded")

    def probe_kprobe_multi(self) -> Finding:
        prog = self._load(return_zero(), expected_attach_type=bpfsys.BPF_TRACE_KPROBE_MULTI)
        try:
            # on a function ftrace knows (kprobe_multi goes through fprobe,
            # ftrace: the getppid syscall wrapper is not one on 6.1)
            self._own(bpfsys.link_kprobe_multi(prog, [TEST_TARGET]))
        except OSError as exc:
            if exc.errno == errno.EOPNOTSUPP:
                raise No("EOPNOTSUPP: the kernel is built without CONFIG_FPROBE") from None
            if exc.errno == errno.EINVAL:
                raise No("BPF_LINK_CREATE refused BPF_TRACE_KPROBE_MULTI (EINVAL)") from None
            raise
        return Finding(True, f"a kprobe_multi link on {TEST_TARGET} was made")

    def probe_kprobe_recursion_misses(self) -> Finding:
        array = self._own(bpfsys.map_create(bpfsys.BPF_MAP_TYPE_ARRAY, 4, 8, 1, name="ktui_probe"))
        prog = self._load(return_zero())
        self._kprobe(prog, NESTED_TARGET)
        # the witness: a kprobe of its own, no program, counting this thread's hits
        witness = self._open_kprobe(NESTED_TARGET, pid=self.tid, cpu=-1)
        kprobe_pmu.ioctl(witness, kprobe_pmu.PERF_EVENT_IOC_ENABLE, 0)
        for _ in range(3):
            bpfsys.map_update(array, b"\0\0\0\0", bytes(8))
        hits = struct.unpack("<Q", os.read(witness, 8))[0]
        misses = bpfsys.prog_run(prog).recursion_misses
        if misses:
            return Finding(True, f"kprobe hits inside a map update (BPF blocked): {misses} counted")
        if not hits:
            raise Unknown(f"the kprobe on {NESTED_TARGET} did not fire in a map update")
        return Finding(False, f"{hits} nested hit(s) on {NESTED_TARGET}: program skipped, no miss counted")

    def probe_tracing_recursion_misses(self) -> Finding:
        prog = self._load(return_zero())
        size = bpfsys.prog_info_size(prog)
        if size >= bpfsys.PROG_INFO_SIZE:
            return Finding(True, "bpf_prog_info has recursion_misses")
        return Finding(False, f"bpf_prog_info ends at {size} bytes, before recursion_misses")

    def probe_run_stats(self) -> Finding:
        try:
            _close(bpfsys.enable_stats())
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                raise No("BPF_ENABLE_STATS refused (EINVAL)") from None
            raise
        return Finding(True, "BPF_ENABLE_STATS turned on and off")

    def probe_batch_lookup(self) -> Finding:
        array = self._own(bpfsys.map_create(bpfsys.BPF_MAP_TYPE_ARRAY, 4, 8, 1, name="ktui_probe"))
        try:
            bpfsys.array_lookup_all(array, 1, 8)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOTSUP, ENOTSUPP):
                raise No(f"BPF_MAP_LOOKUP_BATCH refused ({exc.strerror})") from None
            raise
        return Finding(True, "an array was read in one batch")


def _ring_producer(ring: int) -> int:
    """Bytes written to the ring so far: the producer position (page 1)."""
    page = mmap.PAGESIZE
    mapping = mmap.mmap(ring, page, mmap.MAP_SHARED, mmap.PROT_READ, offset=page)
    try:
        return struct.unpack_from("<Q", mapping, 0)[0]
    finally:
        mapping.close()


def _int_btf() -> bytes:
    """The smallest BTF a task storage map takes: [1] int (its key),
    [2] long (its value)."""
    strings = b"\0int\0long\0"
    kind_int = 1 << 24
    signed = 1 << 24
    types = struct.pack("<IIII", 1, kind_int, 4, signed | 32) + struct.pack("<IIII", 5, kind_int, 8, signed | 64)
    header = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(strings))
    return header + types + strings


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass

