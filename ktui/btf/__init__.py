"""The kernel describing itself: BTF (BPF Type Format) decoding and lookups.

Below the probe language: `ktui.lang` resolves parameter names and member
chains here, `ktui.kernel` and the UI list functions with their prototypes.
Nothing in this package imports Textual, Rich, bcc or any other part of
ktui but `ktui.cachefiles` (what a cache may trust): it reads bytes and
answers questions about types.

    decode   one BTF blob (vmlinux, or a module's split BTF on top of it)
    types    the decoded records (frozen dataclasses)
    render   C-like names and prototypes
    access   parameter slots and member chains, for fetches by name
    index    every function by name, vmlinux and modules, with a cache
    sysfs    where the kernel keeps its BTF and its build id
    cache    the private, build-id keyed cache of the function table
"""
