"""Probes the kernel refuses fail alone, with a clear reason, while a good
probe in the same set attaches and counts. One compile for the module."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ktui.kernel.symbols.ksyms import KernelSymbols
from ktui.kernel.session import Session
from ktui.lang.probeset import loads_probeset
from ktui.record.feed import ProbeState

from .conftest import drain_all, kprobe_entries, ktui_bpf_programs

BLACKLIST = Path("/sys/kernel/debug/kprobes/blacklist")
N = 40


def blacklisted_function() -> str:
    """A function on this kernel's kprobe blacklist that kallsyms also knows."""
    syms = KernelSymbols()
    for line in BLACKLIST.read_text().splitlines():
        name = line.split()[-1]
        if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and syms.exists(name):
            return name
    pytest.fail("no usable name in the kprobe blacklist")


def vfs_read_address() -> int:
    for line in Path("/proc/kallsyms").read_text().splitlines():
        addr, _, name = line.split()[:3]
        if name == "vfs_read":
            return int(addr, 16)
    pytest.fail("vfs_read not in /proc/kallsyms")


@pytest.fixture(scope="module")
def session():
    blocked = blacklisted_function()
    text = f"""
name: failures
probes:
  - spec: vfs_read:c:a3
    label: good
  - spec: vfs_raed:c
    label: typo
  - spec: {blocked}:c
    label: blacklisted
  - spec: vfs_read+0x1:c
    label: midinsn
  - spec: "{vfs_read_address():#x}:c:a3"
    label: rawaddr
"""
    ps = loads_probeset(text)
    before = len(kprobe_entries())
    s = Session(ps)
    s.open()
    yield s, blocked
    s.close()
    assert len(kprobe_entries()) == before
    assert ktui_bpf_programs() == []


def status(s, label):
    return next(st for st in s.statuses().values() if st.probe.name == label)


def test_unknown_symbol_suggests_close_names(session):
    s, _ = session
    st = status(s, "typo")
    assert st.state is ProbeState.FAILED
    assert "unknown kernel function 'vfs_raed'" in st.reason and "vfs_read" in st.reason
    assert "inlined away" in st.reason


def test_blacklisted_function_is_refused(session):
    s, blocked = session
    st = status(s, "blacklisted")
    assert st.state is ProbeState.FAILED
    assert "blacklist" in st.reason and blocked in st.reason


def test_offset_inside_an_instruction(session):
    s, _ = session
    st = status(s, "midinsn")
    print("kernel says for vfs_read+0x1:", st.reason)
    assert st.state is ProbeState.FAILED
    assert "vfs_read+0x1" in st.reason
    assert "instruction boundary" in st.reason or "cannot be probed" in st.reason


def test_good_and_raw_address_probes_attach_and_count(session, workload):
    s, _ = session
    assert status(s, "good").state is ProbeState.ATTACHED
    assert status(s, "rawaddr").state is ProbeState.ATTACHED
    for st in s.statuses().values():
        assert "\n" not in st.reason
    w = workload([[["read", 5, N]]])
    s.drain()
    w.run_phase()
    events = [e for e in drain_all(s) if e.pid == w.pid]
    good, raw = status(s, "good").probe_id, status(s, "rawaddr").probe_id
    assert [e.values[0] for e in events if e.probe_id == good] == [5] * N
    assert [e.values[0] for e in events if e.probe_id == raw] == [5] * N
