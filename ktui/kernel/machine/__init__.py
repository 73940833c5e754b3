"""What this machine and its kernel can do, asked before and while probing.

preflight checks the machine before anything attaches (root or the
capabilities, lockdown, kprobes, bcc): problems stop the CLI, warnings
reach the dashboard's status line. features holds the kernel's answers
(ring buffer, attach cookies, fentry, bpf_get_func_arg...), cached per
kernel in ktui's private cache; feature_probes finds them by loading,
attaching and running tiny programs (through ktui.kernel.maps and
ktui.kernel.attach), once per kernel.

Out: findings (yes, no, unknown) that the engines, the attach choice's
callers, the buffer choice's callers and `ktui doctor` read.
"""
