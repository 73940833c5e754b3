"""The kernel side: probes into the running kernel, and what they saw read back out.

Rooms, top to bottom (imports run downward only: the kernel-rooms contract
in pyproject.toml):

    session/   the live probe set (Session), its loader, compiled units
    generic/   the generic engine: one cached program, probes by plan
    machine/   preflight checks and the kernel's probed features
    buffers/   ring buffer and perf buffer readers
    attach/    kprobe PMU, kretprobe events, the fentry choice, refusals explained
    maps/      bpf(2) and the counter, aggregation and run-time readers
    symbols/   kallsyms, ELF, modules, ftrace's list, the function catalog
    codegen/   the C text of a compiled unit, and the names its maps carry
    returns.py the errno and entry-stack rules both engines share
    quiet.py   bcc's and clang's stderr kept off the full screen, into the log

In: bound probes from ktui.lang. Out: the ktui.record Feed.
"""
