"""End to end: the full-screen dashboard in tmux against the real kernel.

Starts `ktui` on a probe set filtered to a workload of known shape, reads the
screen with capture-pane, checks the probe table's counts and the events
shown, presses space to switch a probe off (its count must stop), finds a
function in the browser and adds a probe by picking its arguments' names,
and presses q (no probe may remain attached).
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import kprobe_entries, ktui_bpf_programs
from .conftest import wait_for as wait_until

KTUI = str(Path(".venv/bin/ktui").resolve())
SESSION = "ktui-e2e"
# How long any one wait may take: a bound for a loaded machine (two VMs and
# a CPU hog on two host CPUs), never a measure of speed. A wait that is met
# returns at once, so a generous bound costs a passing run nothing.
BOUND = 600


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def screen() -> str:
    text = tmux("capture-pane", "-p", "-t", SESSION)
    # Keep the last screen where a failing run can be read (the repo is
    # shared with the host).
    Path(".vmout").mkdir(exist_ok=True)
    Path(".vmout/e2e-screen.txt").write_text(text)
    return text


def wait_for(predicate, timeout: float, what: str):
    """conftest.wait_for (a look at most every 0.1 s: a tmux capture is a
    process under emulation, so the looks are spaced by their cost), the
    screen added to its failure."""
    try:
        return wait_until(predicate, what, timeout=timeout, every=0.1)
    except pytest.fail.Exception:
        raise AssertionError(f"timed out waiting for {what}; screen:\n{screen()}") from None


def row(label: str) -> list[str] | None:
    """The probe-table row of `label`, split into cells."""
    for line in screen().splitlines():
        cells = line.replace("│", " ").split()
        if label in cells:
            return cells[cells.index(label):]
    return None


def hits(label: str) -> int | None:
    cells = row(label)
    # label, kind, state, hits, ...
    if cells and len(cells) > 3 and cells[3].isdigit():
        return int(cells[3])
    return None


def test_dashboard_counts_toggles_finds_and_adds_a_probe_and_quits_clean(workload, tmp_path, warm_cache):
    """One dashboard, as a user has it (one start: importing Textual alone
    takes 20 s under emulation). Its probe table counts a workload's reads
    exactly and its event pane shows them; space switches a probe off (its
    kprobe goes, its count stops). Then issue 12's "done when": knowing
    only "something in the VFS read path", find vfs_read in the browser,
    see its arguments, pick file->f_pos and count, add the probe, and watch
    the right values arrive. q: no probe and no program of ktui's left.
    ktui finds the generic programs in the run's cache (warm_cache, through
    tmux's environment): a variant compiled behind the dashboard would
    share the guest's one busy CPU with it."""
    from ktui.screens.browse_model import Functions, running_kernel_catalog

    n1, n2 = 300, 200
    path, size, times = "/tmp/ktui-e2e-picked", 100, 5
    Path(path).write_bytes(b"y" * 4096)
    w = workload([[["read", 7, n1]], [["read", 7, n2]], [["fileread", path, size, times]]])
    probeset = tmp_path / "e2e.yaml"
    probeset.write_text(
        "name: e2e\n"
        "attach: kprobe\n"  # counted in debugfs' kprobe list (fentry: test_fentry)
        f"filter:\n  pid: {w.pid}\n"
        "probes:\n"
        "  - spec: vfs_read:c:a3\n    label: e2e_read\n"
        "  - spec: vfs_read:r:retval\n    label: e2e_ret\n"
    )
    # What the browser will list for vfs_read on this kernel: every row in
    # order, those that cannot be ticked too (the cursor stops on each, issue
    # #29): file, then file's members once expanded, buf, count, pos, *pos;
    # from vfs_read's catalog entry alone (the dashboard lists all 55,000)
    catalog = running_kernel_catalog()
    functions = Functions(catalog.list(["vfs_read"]), catalog, (), catalog.btf_problem())
    detail = functions.detail("vfs_read")
    file_param = detail.params[0]
    refs = [file_param.ref] + [m.ref for m in functions.members(detail, file_param)]
    for param in detail.params[1:]:
        refs += [param.ref] + ([param.pointee.ref] if param.pointee is not None else [])
    assert "file->f_pos" in refs and "count" in refs and "+0(pos)" in refs, refs

    baseline = len(kprobe_entries())
    tmux("new-session", "-d", "-s", SESSION, "-x", "180", "-y", "50",
         # the VM's console sets COLUMNS/LINES to its own size: not ours
         f"env -u COLUMNS -u LINES {KTUI} {probeset} --log {tmp_path / 'ktui.log'}; sleep 600")
    try:
        # live = every probe registered with the kernel (1 + entry + return)
        wait_for(lambda: len(kprobe_entries()) == baseline + 3, BOUND, "probes to attach")
        wait_for(lambda: row("e2e_read"), BOUND, "the probe table")
        w.run_phase()
        wait_for(lambda: hits("e2e_read") == n1 and hits("e2e_ret") == n1, BOUND,
                 f"hits {n1} on both probes")
        assert "attached" in " ".join(row("e2e_read"))
        # the event pane shows the workload's events with the fetched size
        # (drawn on its own refresh: the counters can be on screen first)
        wait_for(lambda: f"[{w.pid}]" in (text := screen()) and re.search(r"e2e_read\s+a3=7", text), BOUND,
                 f"the workload's events (pid {w.pid}, a3=7) in the event pane")

        # space switches the selected (first) probe off: detached for real
        tmux("send-keys", "-t", SESSION, "space")
        wait_for(lambda: "off" in " ".join(row("e2e_read") or []), BOUND, "e2e_read off")
        wait_for(lambda: len(kprobe_entries()) == baseline + 2, BOUND, "the kprobe to go")
        w.run_phase()
        wait_for(lambda: hits("e2e_ret") == n1 + n2, BOUND, "the second phase's returns")
        assert hits("e2e_read") == n1

        keys("b")
        # the whole index, not its first part: the whole one arriving re-runs the
        # search, which must not happen while the cursor moves below
        wait_for(lambda: re.search(r"\b[\d,]{5,} functions", text := screen()) and "reading prototypes" not in text,
                 BOUND, "the function list")
        keys_at_once("-l", "vfs_read")
        wait_for(lambda: "vfs_read(struct file *file, char *buf, size_t count, loff_t *pos)" in screen(),
                 BOUND, "vfs_read's prototype")
        keys("Enter", "Right")  # to its parameters; file's members shown
        wait_for(lambda: "f_pos" in screen(), BOUND, "struct file's members")
        keys_at_once(*["Down"] * downs_to(refs, "file", "file->f_pos"), "Space")
        wait_for(lambda: "vfs_read:c:file->f_pos" in screen(), BOUND, "file->f_pos ticked")
        keys_at_once(*["Down"] * downs_to(refs, "file->f_pos", "count"), "Space")
        spec = wait_for(lambda: re.search(r"vfs_read:c:(file->f_pos,count|count,file->f_pos)\b", screen()),
                        BOUND, "count ticked").group(0)
        keys("C-s")  # add it
        # attached, not "loading": the generic program is in (until then
        # hits are counted without events, which is not what this test reads)
        wait_for(lambda: "attached" in (row(spec) or []), 900, "the picked probe attached")
        w.run_phase()
        # each read of the file, in order: its position and its size, by name
        for i in range(times):
            wait_for(lambda i=i: re.search(rf"file->f_pos={i * size}\b", screen()) and
                     re.search(rf"count={size}\b", screen()), BOUND, f"the read at offset {i * size}")

        tmux("send-keys", "-t", SESSION, "q")
        wait_for(lambda: len(kprobe_entries()) == baseline, BOUND, "every probe to detach")
        # the added probe may go by fentry: no kprobe to wait for above, so
        # wait for ktui's programs, which go when its process has ended
        wait_for(lambda: ktui_bpf_programs() == [], BOUND, "every ktui program to go")
    finally:
        subprocess.run(["tmux", "kill-server"], capture_output=True)


def keys(*names: str) -> None:
    """Keys whose effect the next one needs (Enter moves the focus, which a
    Right then acts on): one at a time, with a pause for the slow VM."""
    for name in names:
        tmux("send-keys", "-t", SESSION, name)
        time.sleep(0.4)


def keys_at_once(*names: str) -> None:
    """Keys one focused widget takes in order (characters into the search,
    a list's cursor moves then a tick): sent in one go. Textual queues
    every key and drops none, and a list moves one row per key however
    fast they come. The test then waits for the screen they lead to: a key
    lost, or taken by another widget, ticks another row, and that wait
    fails. (Paced at 0.4 s a key, the browser's part slept about 15 s.)"""
    tmux("send-keys", "-t", SESSION, *names)


def downs_to(refs: list[str], start: str, target: str) -> int:
    """Down presses from `start` to `target` in the browser's choices (one
    press per row: the cursor stops on rows that cannot be ticked too)."""
    return refs.index(target) - refs.index(start)
