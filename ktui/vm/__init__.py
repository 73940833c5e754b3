"""The throwaway VM: a stock Debian kernel under emulation, for machines
whose own kernel has no kprobes. boot.py boots it (for everything that needs
a kernel: `python -m ktui.vm`, the kernel tests); launch.py is `ktui vm`
(dashboard.py on the guest console, headless.py for the other commands,
guestrun.py carries their output and status back)."""

from ktui.vm.launch import run_in_vm

__all__ = ["run_in_vm"]
