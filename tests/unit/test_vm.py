"""`ktui vm`'s guest script (ktui/vm.py); the VM itself is exercised by hand
and by scripts/vm.sh in the kernel tests."""

from __future__ import annotations

from ktui.vm import guest_script


def test_the_dashboard_runs_in_a_private_tmux_with_a_plain_shell():
    script = guest_script([], workload=False)
    line = next(ln for ln in script.splitlines() if "tmux" in ln and "new-session" in ln)
    # its own socket under /run (the guest's tmpfs), not the default in /tmp
    assert "-S /run/ktui-vm.tmux" in line
    # the guest's shell is this script; tmux must not run it again for the command
    assert line.strip().startswith("SHELL=/bin/bash ")
    assert "ktui run --refresh 1" in line
    # and the VM goes down when the dashboard ends
    assert script.rstrip().endswith("poweroff -f >/dev/null 2>&1")


def test_without_tmux_the_dashboard_runs_on_the_console():
    script = guest_script(["--refresh", "2"], workload=False)
    assert "else" in script and "ktui run --refresh 2" in script.split("else", 1)[1]
