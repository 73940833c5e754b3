"""Putting a loaded program on a kernel function, or saying why the kernel refused.

In: a program fd and a probe's target. kprobe_pmu opens kprobes and
kretprobes through the perf kprobe PMU (each one an fd this process owns;
it also holds perf_event_open for the perf buffers), kretprobe_events makes
a return probe's kretprobe a tracefs event (its maxactive set, its misses
read), attach_choice decides fentry/fexit or kprobe for a probe (from BTF
and the probed features), explain turns the kernel's errno into one line a
user can act on (with close names from ktui.kernel.symbols).

Out: perf fds, a Choice, a reason. Nothing here compiles programs, reads
buffers or keeps a probe set: the session drives it.
"""
