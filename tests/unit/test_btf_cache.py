"""The build-id keyed cache of the function table: private, atomic, and
anything odd in it is a miss with one log line; plus the build id itself."""

from __future__ import annotations

import logging
import os
import stat
import struct

import pytest

from ktui.btf import cache as cache_mod
from ktui.btf.cache import FunctionCache
from ktui.btf.sysfs import gnu_build_id

KEY = "48dc540c8b76393804ca8088dbfa7d42911a9444-5515646"
TABLE = {"vfs_read": "vfs_read(struct file *file) -> ssize_t", "kfree": "kfree(const void *x) -> void"}
AMBIGUOUS = {"kfree"}


@pytest.fixture
def cache(tmp_path):
    return FunctionCache(tmp_path / "cache" / "ktui")


def test_round_trip_in_a_private_directory(cache):
    assert cache.load("vmlinux", KEY) is None  # nothing yet: a miss, silently
    assert cache.store("vmlinux", KEY, TABLE, AMBIGUOUS)
    assert cache.load("vmlinux", KEY) == (TABLE, AMBIGUOUS)
    assert stat.S_IMODE(os.stat(cache.directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cache.path("vmlinux", KEY)).st_mode) == 0o600
    assert [p.name for p in cache.directory.iterdir()] == [cache.path("vmlinux", KEY).name]  # no temp left


def test_a_directory_open_to_others_is_made_private(cache):
    cache.directory.mkdir(parents=True)
    os.chmod(cache.directory, 0o777)
    assert cache.store("vmlinux", KEY, TABLE, AMBIGUOUS)
    assert stat.S_IMODE(os.stat(cache.directory).st_mode) == 0o700


def test_a_directory_of_another_user_is_not_used(cache, monkeypatch, caplog):
    assert cache.store("vmlinux", KEY, TABLE, AMBIGUOUS)
    monkeypatch.setattr(cache_mod.os, "geteuid", lambda: os.getuid() + 4242)
    with caplog.at_level(logging.INFO, logger="ktui.btf.cache"):
        assert cache.load("vmlinux", KEY) is None
        assert not cache.store("vmlinux", KEY, TABLE, AMBIGUOUS)
    assert "owned by uid" in caplog.text


def test_a_symlinked_directory_is_not_used(cache, tmp_path, caplog):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    cache.directory.parent.mkdir(parents=True)
    cache.directory.symlink_to(elsewhere)
    with caplog.at_level(logging.INFO, logger="ktui.btf.cache"):
        assert not cache.store("vmlinux", KEY, TABLE, AMBIGUOUS)
    assert ": not a directory" in caplog.text
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("make, reason", [
    (lambda p: (p.unlink(), p.symlink_to(p.with_name("target"))), "Too many levels of symbolic links"),
    (lambda p: (p.unlink(), os.mkfifo(p, 0o600)), "not a regular file"),
    (lambda p: os.chmod(p, 0o620), "writable by group or others"),
    (lambda p: os.chmod(p, 0o602), "writable by group or others"),
])
def test_an_entry_that_is_not_safe_to_read_is_a_miss_and_a_log_line(cache, make, reason, caplog):
    assert cache.store("vmlinux", KEY, TABLE, AMBIGUOUS)
    path = cache.path("vmlinux", KEY)
    path.with_name("target").write_text("{}")
    make(path)
    with caplog.at_level(logging.WARNING, logger="ktui.btf.cache"):
        assert cache.load("vmlinux", KEY) is None
    assert reason in caplog.text
    assert len(caplog.records) == 1


def test_an_entry_owned_by_someone_else_is_a_miss(cache, monkeypatch, caplog):
    assert cache.store("vmlinux", KEY, TABLE, AMBIGUOUS)
    real = os.fstat
    monkeypatch.setattr(cache_mod.os, "fstat",
                        lambda fd: os.stat_result((*real(fd)[:4], real(fd).st_uid + 1, *real(fd)[5:])))
    with caplog.at_level(logging.WARNING, logger="ktui.btf.cache"):
        assert cache.load("vmlinux", KEY) is None
    assert "owned by uid" in caplog.text


def _entry(*, magic=None, key=KEY, count="2", names="vfs_read\nkfree",
           protos="vfs_read(void) -> int\nkfree(void) -> void", ambiguous="kfree") -> bytes:
    magic = cache_mod.MAGIC if magic is None else magic
    return magic + f"{key}\n{count}\n{names}\0{protos}\0{ambiguous}".encode()


@pytest.mark.parametrize("content, reason", [
    (b"", "not an entry of this format"),
    (b'{"format": 1, "key": "x"}', "not an entry of this format"),
    (_entry(magic=b"ktui btf functions 2\n"), "not an entry of this format"),
    (_entry(key="0" * 40 + "-1"), "an entry for another kernel"),
    (_entry(count="two"), "no count, or not three parts"),
    (_entry(protos="a\0b"), "no count, or not three parts"),
    (_entry(names="kfree\nkfree"), "a name given twice"),
    (_entry(count="3"), "2 names, 2 prototypes, count 3"),
    (_entry(names="vfs_read\n"), "an empty name"),
    (_entry(names="vfs_\x1bread\nkfree"), "bytes other than printable ASCII"),
    (_entry(protos="a\u202eb\nc"), "bytes other than printable ASCII"),
    (_entry(protos="a\tb\nc"), "bytes other than printable ASCII"),
    (_entry()[:-30], "no count, or not three parts"),  # cut short
])
def test_a_corrupt_entry_is_a_miss_and_one_log_line_then_rebuilt(cache, content, reason, caplog):
    assert cache.store("vmlinux", KEY, TABLE, AMBIGUOUS)
    assert cache.load("vmlinux", KEY) == (TABLE, AMBIGUOUS)
    cache.path("vmlinux", KEY).write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="ktui.btf.cache"):
        assert cache.load("vmlinux", KEY) is None
    assert reason in caplog.text and "corrupt" in caplog.text and "rebuilding it" in caplog.text
    assert len(caplog.records) == 1
    assert cache.store("vmlinux", KEY, TABLE, AMBIGUOUS) and cache.load("vmlinux", KEY) == (TABLE, AMBIGUOUS)


def test_text_that_is_not_printable_ascii_is_not_cached(cache, caplog):
    with caplog.at_level(logging.INFO, logger="ktui.btf.cache"):
        assert not cache.store("vmlinux", KEY, {"f": "f(int \u00e9) -> int"})
    assert "not printable ASCII" in caplog.text and not cache.path("vmlinux", KEY).exists()


def test_an_oversized_entry_is_not_read(cache, monkeypatch, caplog):
    assert cache.store("vmlinux", KEY, TABLE, AMBIGUOUS)
    monkeypatch.setattr(cache_mod, "MAX_ENTRY", 10)
    with caplog.at_level(logging.WARNING, logger="ktui.btf.cache"):
        assert cache.load("vmlinux", KEY) is None
    assert "larger than 10 bytes" in caplog.text


def test_only_the_newest_kernels_are_kept(cache):
    keys = [f"{i:040x}-{i}" for i in range(cache_mod.MAX_ENTRIES + 2)]
    assert cache.store("modules", keys[0], {"m:f": "f(void) -> void"})
    for n, key in enumerate(keys):
        assert cache.store("vmlinux", key, TABLE)
        os.utime(cache.path("vmlinux", key), (1000 + n, 1000 + n))
    kept = sorted(p.name for p in cache.directory.iterdir())
    assert kept == sorted([cache.path("vmlinux", k).name for k in keys[-cache_mod.MAX_ENTRIES:]]
                          + [cache.path("modules", keys[0]).name])  # each kind keeps its own


def test_keys_cannot_name_other_files(cache):
    for bad in ("../x-1", "abc", "a" * 40 + "-1/../../x", ""):
        with pytest.raises(ValueError):
            cache.path("vmlinux", bad)
    with pytest.raises(ValueError):
        cache.path("../vmlinux", KEY)


def test_an_unwritable_place_is_no_cache_not_an_error(tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = FunctionCache(blocker / "ktui")
    with caplog.at_level(logging.INFO, logger="ktui.btf.cache"):
        assert not cache.store("vmlinux", KEY, TABLE, AMBIGUOUS)
        assert cache.load("vmlinux", KEY) is None


def _note(name: bytes, kind: int, desc: bytes) -> bytes:
    pad = lambda b: b + b"\0" * (-len(b) % 4)  # noqa: E731
    return struct.pack("<III", len(name), len(desc), kind) + pad(name) + pad(desc)


def test_the_gnu_build_id_among_other_notes():
    bid = bytes(range(20))
    notes = _note(b"Xen\0", 6, b"abc") + _note(b"GNU\0", 3, bid) + _note(b"Linux\0", 0x100, b"x")
    assert gnu_build_id(notes) == bid.hex()
    assert gnu_build_id(_note(b"Xen\0", 3, bid)) is None  # type 3 but not GNU's
    assert gnu_build_id(notes[:30]) is None  # cut short
    assert gnu_build_id(b"") is None
