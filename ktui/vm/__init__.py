"""The throwaway VM: a stock Debian kernel under emulation, for machines
whose own kernel has no kprobes. boot.py boots it (for everything that needs
a kernel: `python -m ktui.vm`, the kernel tests); dashboard.py is `ktui vm`."""

from ktui.vm.dashboard import run_in_vm

__all__ = ["run_in_vm"]
