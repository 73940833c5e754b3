"""What a Session asks of the kernel side, as one small object.

A live session is bookkeeping around a few requests: compile a program,
load one of its functions, attach it as a kprobe, close perf fds, open the
reader of its event buffer, read its stats maps and its programs' run
counters, free it; and keep the run-time statistics on (runstats). `BccLoader` makes
them through bcc and the kprobe PMU (`kprobe_pmu`). Session takes the loader
as an argument so host tests can give it a fake kernel side
(tests/fakekernel.py) and run its locking and bookkeeping without root.
"""

from __future__ import annotations

import mmap
from typing import TYPE_CHECKING, Protocol

from ktui.kernel.attach import kprobe_pmu
from ktui.kernel.codegen import RINGBUF
from ktui.kernel.quiet import captured_stderr, log_line
from ktui.lang.model import KtuiError
from ktui.record.feed import ProbeStats

if TYPE_CHECKING:
    from ktui.kernel.codegen import Program
    from ktui.kernel.maps.bpfsys import ProgRun
    from ktui.kernel.session.unit import Unit
    from ktui.record.raw import RawRecords

BPF_PROG_TYPE_KPROBE = 2


class Reader(Protocol):
    """A batch reader of a unit's event buffer (ringbuf.RingBufReader,
    perfbuf.PerfBufReader)."""

    def drain(self) -> "RawRecords":
        """Every record in the buffer, in arrival order, grouped by size."""
        ...

    def close(self) -> None: ...


class Loader(Protocol):
    def compile(self, text: str, log_fd: int) -> object:
        """The loaded BPF object of a C program; KtuiError if refused."""
        ...

    def load(self, bpf: object, function: str) -> int:
        """The program fd of one function of `bpf`, as a kprobe program."""
        ...

    def attach(self, prog_fd: int, symbol: str | None, offset: int, retprobe: bool,
               address: int | None) -> int:
        """A kprobe (or kretprobe) running `prog_fd`: the perf fd owning it."""
        ...

    def detach(self, fds: list[int]) -> None:
        """Close perf fds. When it returns, their probes are gone: no
        program runs from them any more."""
        ...

    def open_reader(self, bpf: object, program: Program, options) -> Reader: ...

    def return_events(self):
        """The tracefs kretprobes of this process (kretprobe_events.
        ReturnEvents: return probes with a maxactive and counted misses), or
        None where no tracefs is mounted (return probes then take the PMU)."""
        ...

    def read_stats(self, unit: "Unit") -> dict[int, ProbeStats]:
        """The in-kernel counters of the unit's live probes, by probe id."""
        ...

    def free(self, bpf: object, log_fd: int) -> None:
        """Unload the programs and maps (after the unit's reader closed)."""
        ...

    def prog_runs(self, prog_fds: list[int]) -> list["ProgRun"]:
        """The kernel's run counters of each program (runstats)."""
        ...

    def enable_run_stats(self) -> int:
        """The fd that keeps the kernel's BPF run-time statistics on while
        it is open (runstats.RunTimeStats); OSError if refused."""
        ...

    def features(self, cache_dir, use_cache: bool):
        """This kernel's features (kernel/machine/features.Features): from the cache,
        or probed once (and cached, unless not `use_cache`)."""
        ...

    def generic_engine(self, *, exclude_pids: tuple[int, ...], pid: int | None, comm: str | None, features):
        """A GenericEngine (kernel/generic) for the session's probes, or None
        where there is none (a kernel without attach cookies on kprobe
        links, or one where they could not be checked; a fake)."""
        ...

    def compile_helper(self, log_fd: int, cache_dir, use_cache: bool, tracing: bool, *, func_arg_helpers: bool):
        """A compile helper (generic/compile_child.CompileHelper), started
        now, before any probe: None when the cache holds every variant the
        session may load (`tracing`: the fentry/fexit one too)."""
        ...

    def load_generic(self, log_fd: int, cache_dir, use_cache: bool, ring_bytes: int, compiler=None, *,
                     func_arg_helpers: bool):
        """The generic program loaded (kernel/generic/loader.LoadedProgram),
        its event ring buffer `ring_bytes` long (--buffer-pages); a compile
        goes to `compiler` (generic/loader.Compiler); `func_arg_helpers`: the
        kernel has bpf_get_func_arg (features)."""
        ...

    def tracing_variant(self, log_fd: int, cache_dir, use_cache: bool, compiler=None, *, func_arg_helpers: bool):
        """The generic program's fentry/fexit variant (a CompiledProgram)."""
        ...

    def cached_tracing_variant(self, cache_dir, *, func_arg_helpers: bool):
        """The fentry/fexit variant if the cache holds it (no compile), else None."""
        ...

    def tracepoint_variant(self, log_fd: int, cache_dir, use_cache: bool, compiler=None, *,
                           func_arg_helpers: bool):
        """The generic program's tracepoint variant (a CompiledProgram): shipped, cached or compiled."""
        ...

    def kernel_btf(self):
        """vmlinux's BTF (KernelBtf), or None: fentry is then never chosen."""
        ...

    def context_addresses(self, btf):
        """Where a hit's context is read on this kernel
        (kernel/symbols/interrupt_context.ContextAddresses); `btf`: the
        KernelBtf, or None."""
        ...


class BccLoader:
    """The real kernel side: bcc compiles and loads, the PMU attaches."""

    def __init__(self) -> None:
        from ktui.kernel.symbols.usyms import UserSymbols

        self.user_symbols = UserSymbols()  # its caches live as long as the session

    def compile(self, text: str, log_fd: int) -> object:
        from bcc import BPF  # imported late: offline commands need no bcc

        with captured_stderr(log_fd) as cap:
            try:
                return BPF(text=text.encode())
            except Exception as exc:  # bcc raises bare Exception on compile errors
                detail = cap.first_error() if cap.text else str(exc)
                raise KtuiError(f"BPF compile failed: {detail or exc}") from exc

    def load(self, bpf, function: str) -> int:
        return bpf.load_func(function.encode(), BPF_PROG_TYPE_KPROBE).fd

    def attach(self, prog_fd: int, symbol: str | None, offset: int, retprobe: bool,
               address: int | None) -> int:
        return kprobe_pmu.attach(prog_fd, symbol, offset, retprobe, address)

    def detach(self, fds: list[int]) -> None:
        kprobe_pmu.detach_all(fds)

    def return_events(self):
        from ktui.kernel.attach.kretprobe_events import ReturnEvents, find_root

        root = find_root()
        return None if root is None else ReturnEvents(root)

    def open_reader(self, bpf, program: Program, options) -> Reader:
        size = program.layout.record_size
        if program.buffer == RINGBUF:
            from ktui.kernel.buffers.ringbuf import RingBufReader

            table = bpf[b"ktui_events"]
            return RingBufReader(table.map_fd, options.ringbuf_pages * mmap.PAGESIZE, size)
        from ktui.kernel.buffers.perfbuf import PerfBufReader

        return PerfBufReader(bpf, b"ktui_events", size, options.perf_pages)

    def read_stats(self, unit: "Unit") -> dict[int, ProbeStats]:
        from ktui.kernel.maps.statmaps import read_unit_stats

        return read_unit_stats(unit, self.user_symbols)

    def free(self, bpf, log_fd: int) -> None:
        with captured_stderr(log_fd):
            bpf.cleanup()

    def prog_runs(self, prog_fds: list[int]) -> list["ProgRun"]:
        from ktui.kernel.maps.bpfsys import prog_run

        return [prog_run(fd) for fd in prog_fds]

    def enable_run_stats(self) -> int:
        from ktui.kernel.maps.bpfsys import enable_stats

        return enable_stats()

    def features(self, cache_dir, use_cache: bool):
        from ktui.kernel.machine.features import kernel_features

        return kernel_features(directory=cache_dir, use_cache=use_cache)

    def generic_engine(self, *, exclude_pids: tuple[int, ...], pid: int | None, comm: str | None, features):
        from ktui.kernel.generic.engine import GenericEngine

        if features.has("kprobe_cookie") is not True:
            return None
        engine = GenericEngine(exclude_pids=exclude_pids, pid=pid, comm=comm)
        engine.user_symbols = self.user_symbols  # names user frames of its stacks
        return engine

    def compile_helper(self, log_fd: int, cache_dir, use_cache: bool, tracing: bool, *, func_arg_helpers: bool):
        from ktui.kernel.generic.compile_child import CompileHelper
        from ktui.kernel.generic.loader import needs_compile

        if not needs_compile(_cache(log_fd, cache_dir, use_cache), tracing=tracing,
                             func_arg_helpers=func_arg_helpers):
            return None
        return CompileHelper(log_fd)

    def load_generic(self, log_fd: int, cache_dir, use_cache: bool, ring_bytes: int, compiler=None, *,
                     func_arg_helpers: bool):
        from ktui.kernel.generic.loader import load_generic

        return load_generic(log_fd, cache=_cache(log_fd, cache_dir, use_cache), ring_bytes=ring_bytes,
                            compiler=compiler, func_arg_helpers=func_arg_helpers)

    def tracing_variant(self, log_fd: int, cache_dir, use_cache: bool, compiler=None, *, func_arg_helpers: bool):
        """The generic program's fentry/fexit variant, compiled (not loaded)."""
        from ktui.kernel.generic.loader import tracing_variant

        return tracing_variant(log_fd, cache=_cache(log_fd, cache_dir, use_cache), compiler=compiler,
                               func_arg_helpers=func_arg_helpers)

    def tracepoint_variant(self, log_fd: int, cache_dir, use_cache: bool, compiler=None, *,
                           func_arg_helpers: bool):
        from ktui.kernel.generic.loader import compiled_variant
        from ktui.kernel.generic.shipped import TRACEPOINT

        return compiled_variant(log_fd, cache=_cache(log_fd, cache_dir, use_cache), kind=TRACEPOINT,
                                compiler=compiler, func_arg_helpers=func_arg_helpers)[0]

    def cached_tracing_variant(self, cache_dir, *, func_arg_helpers: bool):
        from ktui.kernel.generic.cache import ProgramCache
        from ktui.kernel.generic.loader import cached_tracing_variant

        return cached_tracing_variant(ProgramCache(cache_dir), func_arg_helpers=func_arg_helpers)

    def kernel_btf(self):
        """vmlinux's BTF (ktui.btf.index.KernelBtf): what fentry attaches by."""
        from ktui.btf.index import KernelBtf

        return KernelBtf()

    def context_addresses(self, btf):
        from ktui.kernel.symbols.interrupt_context import context_addresses

        return context_addresses(btf=btf.vmlinux if btf is not None else None)


def _cache(log_fd: int, cache_dir, use_cache: bool):
    """The generic program's cache (None: --no-cache), its complaints logged."""
    from ktui.kernel.generic.cache import ProgramCache

    return ProgramCache(cache_dir, log=lambda text: log_line(log_fd, text)) if use_cache else None
