"""Saving never replaces a file that is not a probe set: `w` with the path
of a recording (replay proposes it), a log, or a shipped set is refused and
the file is left as it was; a probe set (written by ktui or by hand) is
replaced."""

from __future__ import annotations

import pytest

from ktui.lang.model import ProbeSet, ProbeSetError
from ktui.lang.probeset import load_probeset
from ktui.lang.probeset_write import save_probeset, why_not_replace
from ktui.lang.shipped import default_set
from ktui.lang.spec import parse_spec
from ktui.screens.path_dialog import path_hint

PS = ProbeSet("mine", probes=(parse_spec("vfs_read:c:a3"),))


@pytest.mark.parametrize("content, says", [
    (b"KTREC\x00\x02" + bytes(range(256)) * 40, "not a probe set"),  # a recording's bytes
    (b"just some notes\n", "not a probe set"),
    (b"name: x\nprobes: 3\n", "not a probe set"),
    (b"- a\n- b\n", "not a probe set"),
])
def test_a_file_that_is_not_a_probe_set_is_never_replaced(tmp_path, content, says):
    target = tmp_path / "r.ktrec"
    target.write_bytes(content)
    with pytest.raises(ProbeSetError, match=f"refusing to save: it is {says}"):
        save_probeset(PS, target)
    assert target.read_bytes() == content
    assert says in path_hint(str(target), "write").plain
    assert list(tmp_path.iterdir()) == [target]  # no temporary file left behind


def test_a_shipped_set_is_never_replaced():
    shipped = default_set()
    before = shipped.read_bytes()
    with pytest.raises(ProbeSetError, match="shipped with ktui"):
        save_probeset(PS, shipped)
    assert shipped.read_bytes() == before


def test_a_probe_set_is_replaced_whoever_wrote_it(tmp_path):
    by_hand = tmp_path / "hand.yaml"
    by_hand.write_text("# my reads\nname: old\nprobes:\n  - spec: vfs_write:c\n")
    assert why_not_replace(str(by_hand)) is None
    save_probeset(PS, by_hand, replace=True)
    assert load_probeset(by_hand).probes == PS.probes
    save_probeset(ProbeSet("again", probes=PS.probes), by_hand, replace=True)  # ktui's own file
    assert load_probeset(by_hand).name == "again"
    assert path_hint(str(by_hand), "write").plain == "exists: you will be asked before it is replaced"
    assert path_hint(str(tmp_path / "new.yaml"), "write").plain == "new file"


# ------------------------------------------------ found in the acceptance audit

COMPOSE = b"services:\n  web:\n    image: nginx\n    ports: ['80:80']\n"
K8S = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers: []\n"


@pytest.mark.parametrize("content", [
    COMPOSE, K8S, b"", bytes(range(256)),
    # ktui's header line is easily copied onto something else: still read through
    b"# ktui probe set\nimportant: notes that are not a probe set\n",
])
def test_unrelated_yaml_empty_binary_or_a_borrowed_header_is_kept(tmp_path, content):
    target = tmp_path / "mine.yaml"
    target.write_bytes(content)
    with pytest.raises(ProbeSetError, match="refusing to save: it is not a probe set"):
        save_probeset(PS, target, replace=True)
    assert target.read_bytes() == content
    assert list(tmp_path.iterdir()) == [target]


def test_a_symlink_to_a_shipped_set_or_a_recording_is_neither_followed_nor_replaced(tmp_path):
    recording = tmp_path / "run.ktrec"
    recording.write_bytes(b"KTREC\x00\x02" + bytes(range(256)))
    for name, to in (("ship.yaml", default_set()), ("rec.yaml", recording)):
        link = tmp_path / name
        link.symlink_to(to)
        before = to.read_bytes()
        with pytest.raises(ProbeSetError, match=f"symbolic link \\(to {to}\\)"):
            save_probeset(PS, link, replace=True)
        assert link.is_symlink() and to.read_bytes() == before
        assert f"symbolic link (to {to})" in path_hint(str(link), "write").plain


def test_a_symlink_to_a_probe_set_is_said_before_enter_not_after(tmp_path):
    """The hint said "exists: it will be replaced", then the save refused."""
    real = tmp_path / "real.yaml"
    real.write_text("name: r\nprobes:\n  - spec: vfs_read:c\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(real)
    assert path_hint(str(link), "write").plain.startswith("will not be replaced: it is a symbolic link")


def test_replacing_takes_a_confirmation_and_a_new_file_never_replaces_one(tmp_path):
    target = tmp_path / "set.yaml"
    save_probeset(PS, target)
    with pytest.raises(ProbeSetError, match="replacing it was not confirmed"):
        save_probeset(ProbeSet("other", probes=PS.probes), target)
    assert load_probeset(target).name == "mine"


def test_a_file_that_appears_while_the_user_is_asked_is_not_replaced(tmp_path, monkeypatch):
    """The dialog asked nothing (no file there); something wrote the file
    before the save: the new file must not replace it."""
    import ktui.lang.probeset_write as writer

    target = tmp_path / "set.yaml"
    real_mkstemp = writer.tempfile.mkstemp

    def mkstemp_then_someone_writes(**kwargs):
        made = real_mkstemp(**kwargs)
        target.write_text("name: theirs\nprobes:\n  - spec: vfs_read:c\n")
        return made

    monkeypatch.setattr(writer.tempfile, "mkstemp", mkstemp_then_someone_writes)
    with pytest.raises(ProbeSetError, match="appeared"):
        save_probeset(PS, target)
    assert load_probeset(target).name == "theirs"
    assert list(tmp_path.iterdir()) == [target]


def test_a_replaced_file_keeps_its_mode_and_owner(tmp_path):
    import os
    import stat

    for mode in (0o600, 0o640, 0o644):
        target = tmp_path / f"m{mode:o}.yaml"
        target.write_text("name: r\nprobes:\n  - spec: vfs_read:c\n")
        os.chmod(target, mode)
        if os.geteuid() == 0:  # ktui runs as root: the user's file stays the user's
            os.chown(target, 4321, 4322)
        save_probeset(PS, target, replace=True)
        st = os.stat(target)
        assert stat.S_IMODE(st.st_mode) == mode
        if os.geteuid() == 0:
            assert (st.st_uid, st.st_gid) == (4321, 4322)


def test_the_file_and_its_directory_are_synced_before_save_returns(tmp_path, monkeypatch):
    import os
    import stat

    import ktui.lang.probeset_write as writer

    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(writer.os, "fsync", fsync)
    save_probeset(PS, tmp_path / "set.yaml")
    assert synced == [False, True]  # the file's data, then the rename


def test_an_empty_set_is_not_saved_it_would_not_load(tmp_path):
    with pytest.raises(ProbeSetError, match="needs at least one probe"):
        save_probeset(ProbeSet("none"), tmp_path / "none.yaml")
    assert list(tmp_path.iterdir()) == []


def test_the_question_names_the_set_and_the_comments_it_loses(tmp_path):
    from ktui.lang.probeset_write import describe_existing

    hand = tmp_path / "hand.yaml"
    hand.write_text("# what my reads do\nname: reads\nprobes:\n  - spec: vfs_read:c\n  - spec: vfs_write:c\n")
    assert describe_existing(str(hand)) == (
        f"{hand} exists: the probe set 'reads' (2 probes); its comments and layout will be lost")
    save_probeset(PS, hand, replace=True)  # ktui's own header is no comment
    assert describe_existing(str(hand)) == f"{hand} exists: the probe set 'mine' (1 probe)"
    assert describe_existing(str(tmp_path / "new.yaml")) is None


def test_a_read_only_file_is_not_replaced(tmp_path):
    """rename() needs only the folder's permission, and ktui runs as root:
    a 0444 set, made so to be kept, was replaced after the question."""
    import os

    target = tmp_path / "ro.yaml"
    target.write_text("name: r\nprobes:\n  - spec: vfs_read:c\n")
    os.chmod(target, 0o444)
    with pytest.raises(ProbeSetError, match=r"it is read-only \(mode 0444\)"):
        save_probeset(PS, target, replace=True)
    assert load_probeset(target).name == "r"
    assert "read-only" in path_hint(str(target), "write").plain


def test_the_hint_says_a_folder_is_not_writable_before_enter(tmp_path, monkeypatch):
    """(as root every folder is writable: the access check is stood in for)"""
    import os

    import ktui.screens.path_dialog as dialog

    monkeypatch.setattr(dialog.os, "access", lambda path, mode: os.fspath(path) != str(tmp_path))
    assert path_hint(str(tmp_path / "new.yaml"), "write").plain == f"the folder {tmp_path} is not writable"


def test_a_hash_in_a_label_or_filter_is_no_comment(tmp_path):
    from ktui.lang.probeset_write import describe_existing

    target = tmp_path / "hash.yaml"
    target.write_text("name: 'set #1'\nprobes:\n  - spec: vfs_read:c\n    label: \"reads #big\"\n"
                      "    filter: comm == \"d#d\"\n")
    assert "comments" not in describe_existing(str(target))
    target.write_text(target.read_text() + "# mine\n")
    assert "comments and layout will be lost" in describe_existing(str(target))


@pytest.mark.parametrize("fails", ["fsync", "replace"])
def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch, fails):
    import errno
    import os

    import ktui.lang.probeset_write as writer

    target = tmp_path / "set.yaml"
    target.write_text("name: old\nprobes:\n  - spec: vfs_read:c\n")

    def broken(*args, **kwargs):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(writer.os, fails, broken)
    with pytest.raises(ProbeSetError, match="cannot save: Input/output error"):
        save_probeset(PS, target, replace=True)
    monkeypatch.undo()
    assert load_probeset(target).name == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_a_filesystem_without_hard_links_still_gets_a_new_file(tmp_path, monkeypatch):
    """(vfat, some VM shares: link() fails with EPERM)"""
    import errno

    import ktui.lang.probeset_write as writer

    def no_links(*args, **kwargs):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(writer.os, "link", no_links)
    save_probeset(PS, tmp_path / "new.yaml")
    assert load_probeset(tmp_path / "new.yaml").name == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["new.yaml"]


def test_a_name_too_long_is_said_before_enter(tmp_path):
    hint = path_hint(str(tmp_path / ("a" * 300 + ".yaml")), "write").plain
    assert hint == "the file name is too long (at most 255 bytes here)"
    with pytest.raises(ProbeSetError, match="File name too long"):
        save_probeset(PS, tmp_path / ("a" * 300 + ".yaml"))
    assert list(tmp_path.iterdir()) == []


def test_a_hard_link_to_a_shipped_set_is_replaced_as_a_name_the_set_stays(tmp_path):
    """rename() gives the name a new file: the shipped set behind a hard
    link (ln probesets/default.yaml mine.yaml) keeps its bytes."""
    import os

    shipped = default_set()
    before = shipped.read_bytes()
    mine = tmp_path / "mine.yaml"
    try:
        os.link(shipped, mine)
    except OSError:
        pytest.skip("the checkout and tmp_path are on different filesystems")
    save_probeset(PS, mine, replace=True)
    assert load_probeset(mine).name == "mine"
    assert shipped.read_bytes() == before
