"""ProbeSet -> one BPF C program: see `program`."""

from ktui.kernel.codegen.program import NOT_COMPILED, Program, compiled_part, generate
from ktui.kernel.codegen.runtime import (
    COMM_EVERY,
    COMM_EXACT,
    MAX_ERRNO,
    PERF,
    RINGBUF,
)

__all__ = ["NOT_COMPILED", "Program", "compiled_part", "generate", "PERF", "RINGBUF", "COMM_EXACT", "COMM_EVERY", "MAX_ERRNO"]
