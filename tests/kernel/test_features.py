"""Kernel features probed, not guessed (issue 28): on Debian's 6.1 and 6.12,
the probes (kernel/machine/feature_probes.py) find what those kernels are known to
have, leave nothing attached, cannot say "no" for want of privilege, and a
later start reads them from the cache; `ktui doctor` says them in one
screen, and with --json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ktui.kernel.machine.feature_probes import probe_all
from ktui.kernel.maps import bpfsys
from ktui.kernel.maps.bpfasm import R0, R2, Asm
from ktui.kernel.machine.features import NAMES, detect

from .conftest import bpftool, kprobe_entries

YES = dict.fromkeys(NAMES, True)
# What each kernel has: upstream history, and Debian's build (its 6.1 has
# no CONFIG_FPROBE). trace_args: what a trampoline takes.
KNOWN = {
    "6.1": {**YES, "kprobe_multi": False,  # CONFIG_FPROBE is off in Debian's 6.1
            "kprobe_recursion_misses": False,  # counted from 6.7
            "trace_args": 6},  # 12 from 6.6
    "6.12": {**YES, "trace_args": 12},
}


def series() -> str:
    release = os.uname().release
    for known in sorted(KNOWN, key=len, reverse=True):
        if release.startswith(known + "."):
            return known
    pytest.fail(f"no known features for kernel {release}: add it to KNOWN")


def answers(found) -> dict:
    return {n: (f.value if n == "trace_args" else f.have) for n, f in found.items()}


def test_the_probes_find_what_this_kernel_has():
    found = probe_all()
    assert answers(found) == KNOWN[series()], {n: f for n, f in found.items()
                                               if answers({n: f})[n] != KNOWN[series()][n]}
    # every answer says how the kernel gave it
    assert all(f.detail for f in found.values())


def test_a_refused_program_still_gives_the_verifiers_words():
    """prog_load asks for no log first (the log triples the verifier's
    time); a refusal is loaded again with one, so the words are not lost."""
    fd = bpfsys.prog_load(Asm().mov_imm(R0, 0).exit().code(), name="ktui_feature", log_size=1 << 16)
    os.close(fd)
    with pytest.raises(bpfsys.BpfError) as refused:
        bpfsys.prog_load(Asm().mov(R0, R2).exit().code(), name="ktui_feature", log_size=1 << 16)
    assert "R2 !read_ok" in refused.value.log, refused.value.log


def _ours_attached() -> tuple[list[str], list[str]]:
    programs = [line for line in bpftool("prog", "list").splitlines() if "ktui_feature" in line]
    kprobes = [e for e in kprobe_entries() if "__x64_sys_getppid" in e or "array_map_update_elem" in e]
    return programs, kprobes


def test_nothing_stays_attached():
    probe_all()
    # programs and kprobes go as their fds close; the kernel frees them
    # after an RCU grace period: wait for it
    deadline = time.monotonic() + 30
    while _ours_attached() != ([], []) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ours_attached() == ([], [])


NOBODY = 65534


def test_without_privilege_nothing_is_a_no(ktui_for_anyone):
    """A probe that cannot run is unknown, never no: as nobody, every
    feature the kernel has comes back unknown (fentry too: BTF is there).
    From a copy of ktui that nobody may read: the checkout may sit where
    only its owner can go (a clone in `mktemp -d`, mode 0700)."""
    code = ("import json; from ktui.kernel.machine.feature_probes import probe_all; "
            "print(json.dumps({n: [f.have, f.detail] for n, f in probe_all().items()}))")
    command, env = ktui_for_anyone()
    python = command[:2]  # the base interpreter, -s: not the checkout's venv
    out = subprocess.run([*python, "-c", code], capture_output=True, text=True, timeout=300,
                         user=NOBODY, group=NOBODY, extra_groups=[], cwd="/", env={**env, "HOME": "/tmp"})
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert set(found) == set(NAMES)
    assert {n: have for n, (have, _) in found.items() if have is not None} == {}, found
    assert all("not permitted" in detail for _, detail in found.values()), found


def test_a_later_start_probes_nothing(tmp_path):
    asked = []

    def counting(names):
        asked.append(names)
        return probe_all(names)

    first = detect(directory=tmp_path / "ktui", probe=counting)
    second = detect(directory=tmp_path / "ktui", probe=counting)
    assert len(asked) == 1 and first.source == "probed" and second.source == "cache"
    assert answers(second.findings) == answers(first.findings) == KNOWN[series()]


def _ktui(*args: str, home) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(home), "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "ktui", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def test_doctor_says_it_on_one_screen_and_in_json(tmp_path):
    text = _ktui("doctor", home=tmp_path)
    print(text.stdout)  # the real thing, for the docs (pytest -s)
    assert text.returncode == 0 and text.stderr == "", text.stderr
    lines = text.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines) and len(lines) <= 24, text.stdout
    assert "probed now" in lines[0] and "engine      generic" in text.stdout
    expected = KNOWN[series()]
    nested = "counted" if expected["kprobe_recursion_misses"] else "NOT counted (kernels before 6.7)"
    assert f"nested hits kprobe {nested}, fentry/fexit counted" in text.stdout
    assert "Could not check: nothing" in text.stdout
    # where events' interrupt context is read: 6.2 to 6.14 keep the count in pcpu_hot
    where = {"6.1": "__preempt_count", "6.12": "pcpu_hot"}[series()]
    assert f"events say task/softirq/hardirq/nmi (from {where})" in text.stdout
    body = json.loads(_ktui("doctor", "--json", home=tmp_path).stdout)
    assert body["source"] == "cache"  # the first run cached them
    got = {n: (f.get("value") if n == "trace_args" else f["have"]) for n, f in body["features"].items()}
    assert got == expected
