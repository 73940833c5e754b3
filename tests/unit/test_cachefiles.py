"""The one read and the one write every cache of ktui goes through
(ktui/cachefiles.py): a file is trusted on what its open fd says, and a
write lands whole or not at all."""

from __future__ import annotations

import os

import pytest

from ktui.cachefiles import NotTrusted, read_trusted, write_private


def test_a_written_file_reads_back_and_is_the_users_alone(tmp_path):
    path = tmp_path / "entry"
    write_private(path, b"body")
    assert read_trusted(path, 4) == b"body"
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    assert read_trusted(tmp_path / "missing", 4) is None


@pytest.mark.parametrize("spoil, why", [
    (lambda p: p.write_bytes(b"12345"), "larger than 4 bytes"),
    (lambda p: p.chmod(0o646), "writable by group or others"),
    (lambda p: (p.unlink(), p.symlink_to(p.parent / "elsewhere")), "Too many levels of symbolic links"),
    (lambda p: (p.unlink(), os.mkfifo(p, 0o600)), "not a regular file"),
])
def test_a_file_that_must_not_be_read_says_why(tmp_path, spoil, why):
    path = tmp_path / "entry"
    (tmp_path / "elsewhere").write_bytes(b"x")
    write_private(path, b"body")
    spoil(path)
    with pytest.raises(NotTrusted, match=why):
        read_trusted(path, 4)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "entry"
    write_private(path, b"old")
    (tmp_path / "entry.new").mkdir()
    with pytest.raises(OSError):
        write_private(tmp_path / "entry.new", b"new")  # a directory: the rename fails
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry", "entry.new"]
