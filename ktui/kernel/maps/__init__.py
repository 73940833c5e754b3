"""BPF maps and programs through bpf(2): the counters a program keeps, read back.

In: map and program fds (from bcc or from ktui's own loaders). bpfsys is
the bpf(2) syscall itself (map lookups and batches, program loads and test
runs, BPF run-time statistics), bpfasm a few hand-assembled instructions
for tiny programs; percpu sums per-CPU values; statmaps reads each probe's
counters into ProbeStats, aggmaps the aggregation and stack maps, runstats
the kernel's per-program run counts and run time (the cost view).

Out: plain numbers and ProbeStats. The map names come from the program text
(ktui.kernel.codegen, ktui.kernel.returns); nothing here attaches, reads
event buffers or knows about sessions.
"""
