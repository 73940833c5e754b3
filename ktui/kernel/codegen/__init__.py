"""ProbeSet -> one BPF C program: see `program`.

The generator (`program`, and the fetch and aggregation code it pulls in)
is imported when first asked for: a launch whose probes all go to the
generic engine compiles nothing, and needs only the constants here.
"""

from ktui.kernel.codegen.runtime import (
    COMM_EVERY,
    COMM_EXACT,
    MAX_ERRNO,
    PERF,
    RINGBUF,
)

_FROM_PROGRAM = ("NOT_COMPILED", "Program", "compiled_part", "generate")

__all__ = ["NOT_COMPILED", "Program", "compiled_part", "generate", "PERF", "RINGBUF", "COMM_EXACT", "COMM_EVERY", "MAX_ERRNO"]


def __getattr__(name: str):
    if name in _FROM_PROGRAM:
        from ktui.kernel.codegen import program  # kept off the launch path (above)

        return getattr(program, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
