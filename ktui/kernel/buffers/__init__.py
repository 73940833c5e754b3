"""Event buffers: the records a BPF program emits, read in batches.

In: a BPF ring buffer map (ringbuf: one mmap'd ring for all CPUs) or a
perf event array (perfbuf: one perf ring per CPU, opened with
perf_event_open from ktui.kernel.attach.kprobe_pmu). Out: RawRecords
batches for ktui.record to decode, and the counts of what the kernel lost.
buffer_choice picks which of the two a program uses (the ring buffer
where the kernel has it).

Nothing here compiles, attaches or reads counters: a reader follows a
buffer it is handed.
"""
