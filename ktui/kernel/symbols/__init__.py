"""Names in the kernel and in programs: which functions there are, and which can be probed.

In: /proc/kallsyms and the kprobe blacklist (ksyms), ELF symbol tables
(elfsyms, usyms: user stack frames; elf_lookup, uprobe_target: where a
probe on a user function goes in its file), /lib/modules (modules), ftrace's
available_filter_functions (ftrace), the kernel's build config (kconfig),
and vmlinux BTF through ktui.btf. Out: name lookups and close-name
suggestions, and the function catalog (catalog, catalog_text) behind
`ktui list`, the function browser and the name check (namecheck).

A floor room: it reads files and answers questions; it imports nothing
else from ktui.kernel.
"""
