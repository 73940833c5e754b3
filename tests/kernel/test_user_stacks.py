"""`stack: user` and `stack: both` against a process whose every read and
call path is known (ustack_target.c, built here with frame pointers): its
user frames are named from its ELF symbol table through /proc/PID/maps,
and each call path is counted exactly.

NA reads go main -> ktui_path_a -> ktui_leaf_read -> read(2), NB reads
through ktui_path_b; the probe set is filtered on its pid, so every hit of
vfs_read is one of them."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from ktui.kernel.session import Session
from ktui.pipeline.stacks import DELIMITER, folded_lines, function_of, split_merged

from .test_pipeline import probe_set

HERE = Path(__file__).parent
NA, NB = 7, 4


@pytest.fixture
def target(tmp_path):
    binary = tmp_path / "ustack_target"
    subprocess.run(["gcc", "-O0", "-fno-omit-frame-pointer", "-o", str(binary),
                    str(HERE / "ustack_target.c")], check=True)
    proc = subprocess.Popen([str(binary), str(NA), str(NB)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def user_path(user: tuple[str, ...]) -> list[str]:
    """The target's own functions in a user stack, innermost first."""
    return [function_of(f) for f in user if function_of(f).startswith("ktui_") or function_of(f) == "main"]


def test_user_and_both_stacks_name_the_known_functions_with_exact_counts(target):
    text = ("name: u\nprobes:\n"
            "  - spec: user=vfs_read:c stack(user)\n"
            "  - spec: both=vfs_read:c stack(both)\n")
    with Session(probe_set(text, target.pid)) as s:
        os.kill(target.pid, signal.SIGUSR1)
        assert target.stdout.readline() == b"done\n"
        ids = {st.probe.name: st.probe_id for st in s.statuses().values()}
        stats = s.stats().probes  # read while the target lives: its maps name the frames
        probes = {name: s.statuses()[pid_].probe for name, pid_ in ids.items()}
        user_stacks = split_merged(probes["user"], stats[ids["user"]].stacks, s.symbolize)
        both_stacks = split_merged(probes["both"], stats[ids["both"]].stacks, s.symbolize)
        folded = folded_lines(probes["both"], stats[ids["both"]].stacks, s.symbolize)
    for name in ("user", "both"):
        assert stats[ids[name]].hits == NA + NB
        assert stats[ids[name]].stacks_dropped == 0
    by_path: dict[tuple[str, ...], int] = {}
    for kernel, user, count in user_stacks:
        assert kernel == ()  # stack: user has no kernel frames
        path = tuple(user_path(user))
        by_path[path] = by_path.get(path, 0) + count
    assert by_path == {("ktui_leaf_read", "ktui_path_a", "main"): NA,
                       ("ktui_leaf_read", "ktui_path_b", "main"): NB}, user_stacks
    # the innermost user frame is where the syscall was made, with its offset
    assert all(user[0].startswith("ktui_leaf_read+0x") for _, user, _ in user_stacks), user_stacks
    # both: the kernel frames from vfs_read down to the syscall, then the same user frames
    both_by_path: dict[tuple[str, ...], int] = {}
    for kernel, user, count in both_stacks:
        assert function_of(kernel[0]) == "vfs_read", kernel
        assert any(function_of(f) in ("ksys_read", "__x64_sys_read") for f in kernel), kernel
        path = tuple(user_path(user))
        both_by_path[path] = both_by_path.get(path, 0) + count
    assert both_by_path == by_path
    # folded as bcc's stackcount -f: user frames root first, "-", kernel frames, vfs_read last
    assert sum(int(line.rsplit(" ", 1)[1]) for line in folded) == NA + NB
    for line in folded:
        frames = line.rsplit(" ", 1)[0].split(";")
        assert frames[-1] == "vfs_read" and DELIMITER in frames, line
        cut = frames.index(DELIMITER)
        assert frames[cut - 1] == "ktui_leaf_read" and "main" in frames[:cut], line
