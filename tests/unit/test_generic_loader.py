"""The dispatcher's instructions and the program cache, on the host.

Whether the kernel accepts and runs them is tests/kernel/test_generic.py."""

from __future__ import annotations

import dataclasses
import json
import os
import struct

import pytest

from ktui.kernel.generic import cache as cache_mod
from ktui.kernel.generic.build_inputs import BuildInputs
from ktui.kernel.generic.cache import CompiledProgram, ProgramCache, cache_key
from ktui.kernel.generic.abi import EXCLUDED_PIDS
from ktui.kernel.generic.dispatch import assemble, excluded_value

LD_IMM64, CALL, EXIT = 0x18, 0x85, 0x95


def decode(insns: bytes):
    return [struct.unpack_from("<BBhi", insns, i) for i in range(0, len(insns), 8)]


def test_dispatcher_tail_calls_then_counts_and_every_jump_lands_inside():
    insns = decode(assemble(prog_array_fd=7, early_fd=9, exclude_fd=11, pid=None))
    calls = [imm for code, _, _, imm in insns if code == CALL]
    assert calls == [174, 12, 14, 1, 1]  # cookie, tail call, pid, ktui's pids, the early count
    maps = [insns[i][3] for i, (code, regs, _, _) in enumerate(insns) if code == LD_IMM64]
    assert maps == [7, 11, 9]
    assert insns[-1][0] == EXIT
    exits, counts = 0, 0
    for i, (code, _, off, _) in enumerate(insns):
        if code & 7 == 5 and code not in (CALL, EXIT) and code != 0x05:
            assert 0 < i + 1 + off < len(insns)
            target = insns[i + 1 + off]
            exits += target[0] == 0xB7  # an early exit lands on r0 = 0
            counts += target[0] != 0xB7
    assert counts == 1  # the idle task (pid 0) skips the comparisons, to the count
    # ktui's processes: each place compared with the task's process (r8),
    # each match an exit; an empty place (0) never matches it
    compares = [(dst, src) for code, regs, _, _ in insns if code == 0x1D for dst, src in [(regs & 15, regs >> 4)]]
    assert compares == [(1, 8)] * EXCLUDED_PIDS
    loads = [off for code, _, off, _ in insns if code == 0x61]
    assert loads == [4 * i for i in range(EXCLUDED_PIDS)]


def test_dispatcher_with_a_set_pid():
    insns = decode(assemble(7, 9, 11, pid=42))
    assert any(code == 0x55 and imm == 42 for code, _, _, imm in insns)


def test_the_excluded_pids_fill_their_places():
    assert EXCLUDED_PIDS == 2  # ktui and its compile helper
    assert excluded_value((100,)) == struct.pack("<2I", 100, 0)
    assert excluded_value((100, 200)) == struct.pack("<2I", 100, 200)
    with pytest.raises(ValueError):
        excluded_value((1, 2, 3))


PROGRAM = CompiledProgram(
    insns=bytes(range(16)) * 2,
    relocations=((1, "ktui_hits"),),
    maps={"ktui_hits": {"type": 6, "key_size": 4, "value_size": 8, "max_entries": 4, "flags": 0}},
)


def test_cache_round_trip(tmp_path):
    cache = ProgramCache(tmp_path / "c")
    cache.put("k1", PROGRAM)
    assert cache.get("k1") == PROGRAM
    assert cache.get("k2") is None
    assert oct((tmp_path / "c").stat().st_mode & 0o777) == "0o700"
    entry = next((tmp_path / "c").glob("*.ktuiprog"))
    assert oct(entry.stat().st_mode & 0o777) == "0o600"


def test_corrupt_entry_is_a_miss_and_a_log_line(tmp_path):
    lines = []
    cache = ProgramCache(tmp_path, log=lines.append)
    cache.put("k", PROGRAM)
    path = next(tmp_path.glob("*.ktuiprog"))
    data = json.loads(path.read_bytes())
    data["body"] = data["body"].replace("ktui_hits", "ktui_hitz")
    path.write_bytes(json.dumps(data).encode())
    assert cache.get("k") is None
    assert "corrupt" in lines[-1]
    path.write_bytes(b"\0garbage")
    assert cache.get("k") is None


def test_unsafe_entries_are_ignored(tmp_path):
    lines = []
    cache = ProgramCache(tmp_path, log=lines.append)
    cache.put("k", PROGRAM)
    path = next(tmp_path.glob("*.ktuiprog"))
    os.chmod(path, 0o666)
    assert cache.get("k") is None and "writable" in lines[-1]
    os.chmod(path, 0o600)
    assert cache.get("k") == PROGRAM
    path.unlink()
    os.symlink("/etc/hostname", path)
    assert cache.get("k") is None
    path.unlink()
    os.mkfifo(path)
    assert cache.get("k") is None  # never blocks on a FIFO


def test_foreign_owner_is_ignored(tmp_path, monkeypatch):
    cache = ProgramCache(tmp_path)
    cache.put("k", PROGRAM)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    assert cache.get("k") is None


def test_cache_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "MAX_ENTRIES", 3)
    cache = ProgramCache(tmp_path)
    for i in range(6):
        cache.put(f"k{i}", PROGRAM)
        os.utime(tmp_path / f"k{i}.ktuiprog", (1000 + i, 1000 + i))
    assert sorted(p.name for p in tmp_path.glob("*.ktuiprog")) == ["k3.ktuiprog", "k4.ktuiprog", "k5.ktuiprog"]


INPUTS = BuildInputs(bcc="0.26.0", arch="x86_64", headers="headers abc", probe_read="kernel", version_code="")


def test_key_changes_with_what_the_bytecode_depends_on():
    base = cache_key("text", "1.0", INPUTS)
    assert cache_key("text", "1.0", INPUTS) == base
    assert cache_key("text!", "1.0", INPUTS) != base
    assert cache_key("text", "1.1", INPUTS) != base
    for change in ({"bcc": "0.27.0"}, {"arch": "aarch64"}, {"headers": "headers abd"},
                   {"probe_read": "compat"}, {"version_code": "393664"}):
        assert cache_key("text", "1.0", dataclasses.replace(INPUTS, **change)) != base, change


@pytest.mark.parametrize("bad", [
    {"format": 99}, {"insns": "AAA"}, {"relocations": [[999, "ktui_hits"]]},
    {"relocations": [[0, "nope"]]},
])
def test_entries_that_do_not_add_up_are_misses(tmp_path, bad):
    cache = ProgramCache(tmp_path)
    cache.put("k", PROGRAM)
    path = next(tmp_path.glob("*.ktuiprog"))
    outer = json.loads(path.read_bytes())
    body = json.loads(outer["body"])
    body.update(bad)
    text = json.dumps(body, sort_keys=True)
    import hashlib

    path.write_bytes(json.dumps({"sha256": hashlib.sha256(text.encode()).hexdigest(), "body": text}).encode())
    assert cache.get("k") is None
