"""ktui: a live kernel-probing dashboard for kprobes and kretprobes."""

__version__ = "0.1.0"
