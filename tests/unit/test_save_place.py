"""Files land where the user expects (issue 15): in `ktui vm` a probe set
saved under the guest's /tmp landed in its throwaway overlay and was gone
when the VM stopped, without a word, and `w` proposed the shipped
probesets/default.yaml. Now a path the VM does not share with the host is
refused before anything is written, the dialog says where the file ends
up, and it never proposes a file it would not write."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from ktui.lang.model import ProbeSet, ProbeSetError
from ktui.lang.probeset import load_probeset
from ktui.lang.probeset_write import save_probeset
from ktui.lang.save_place import SHARED_ENV, landing, where_it_lands, why_not_kept
from ktui.lang.shipped import default_set
from ktui.lang.spec import parse_spec
from ktui.screens.path_dialog import path_hint, path_where, proposed_write_path
from ktui.vm.guest import setup_lines, shared_dirs

PS = ProbeSet("mine", probes=(parse_spec("vfs_read:c:a3"),))


@pytest.fixture
def in_vm(tmp_path, monkeypatch) -> Path:
    """As ktui in the guest: only tmp_path/shared reaches the host."""
    shared = tmp_path / "shared"
    (tmp_path / "overlay").mkdir()
    shared.mkdir()
    monkeypatch.setenv(SHARED_ENV, str(shared))
    return shared


def test_outside_a_vm_every_path_is_kept_and_named_in_full(tmp_path, monkeypatch):
    monkeypatch.delenv(SHARED_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert why_not_kept("/tmp/x.yaml") is None
    assert where_it_lands("x.yaml") == f"written to {tmp_path.resolve()}/x.yaml"
    assert path_where("  x.yaml ", "write").plain == f"written to {tmp_path.resolve()}/x.yaml"
    assert path_where("x.yaml", "open").plain == ""


def test_in_the_vm_an_unshared_path_is_refused_before_writing(in_vm, tmp_path):
    lost = tmp_path / "overlay" / "mine.yaml"
    with pytest.raises(ProbeSetError, match="inside the VM and be lost when it stops") as err:
        save_probeset(PS, lost)
    assert str(in_vm) in str(err.value)  # says where to save instead
    assert not lost.exists() and list((tmp_path / "overlay").iterdir()) == []
    hint = path_hint(str(lost), "write")
    assert hint.plain.startswith("will not be written: it would stay inside the VM") and "red" in str(hint.style)
    assert path_where(str(lost), "write").plain == f"{lost} is inside the VM only"


def test_in_the_vm_a_shared_path_is_written_and_said_so(in_vm):
    kept = in_vm / "mine.yaml"
    assert path_hint(str(kept), "write").plain == "new file"
    assert path_where(str(kept), "write").plain == f"written to {kept}, on the host too (shared with the VM)"
    save_probeset(PS, kept)
    assert load_probeset(in_vm / "mine.yaml").probes == PS.probes


def test_a_symlinked_folder_counts_where_it_points(in_vm, tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "overlay")
    assert landing(str(tmp_path / "link" / "a.yaml")) == tmp_path / "overlay" / "a.yaml"
    assert why_not_kept(str(tmp_path / "link" / "a.yaml")) is not None
    (tmp_path / "in").symlink_to(in_vm)
    assert why_not_kept(str(tmp_path / "in" / "a.yaml")) is None


def test_nothing_shared_refuses_every_path(tmp_path, monkeypatch):
    monkeypatch.setenv(SHARED_ENV, "")
    assert "shared with the host: nothing" in why_not_kept(str(tmp_path / "a.yaml"))


def test_the_dialog_never_proposes_a_file_it_would_not_write(tmp_path, monkeypatch):
    monkeypatch.delenv(SHARED_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    shipped = str(default_set())
    assert proposed_write_path(shipped, "./d.yaml") == "./default.yaml"  # its name, here
    (tmp_path / "default.yaml").write_text("not a probe set\n")
    assert proposed_write_path(shipped, "./d.yaml") == "./d.yaml"
    recording = tmp_path / "run.ktrec"
    recording.write_bytes(b"KTREC\x00\x02" + bytes(256))
    assert proposed_write_path(str(recording), "./d.yaml") == "./run.yaml"  # named after it, new
    (tmp_path / "run.yaml").write_text("notes\n")
    assert proposed_write_path(str(recording), "./d.yaml") == "./d.yaml"
    mine = tmp_path / "sets" / "mine.yaml"
    mine.parent.mkdir()
    mine.write_text("name: m\nprobes:\n  - spec: vfs_read:c\n")
    assert proposed_write_path(str(mine), "./d.yaml") == str(mine)  # a user's set: itself
    assert proposed_write_path(None, "./d.yaml") == "./d.yaml"


def test_in_the_vm_the_dialog_proposes_a_shared_path(in_vm, tmp_path, monkeypatch):
    monkeypatch.chdir(in_vm)
    outside = tmp_path / "overlay" / "mine.yaml"
    outside.write_text("name: m\nprobes:\n  - spec: vfs_read:c\n")
    assert proposed_write_path(str(outside), "./d.yaml") == "./mine.yaml"


def test_the_launcher_tells_the_guest_what_it_shares(tmp_path):
    lines = "\n".join(setup_lines(tmp_path, workload=False))
    assert f"export {SHARED_ENV}={shlex.quote(str(tmp_path))}" in lines
    assert shared_dirs(tmp_path) == (tmp_path,) and shared_dirs(Path("/")) == ()
    assert os.pathsep not in str(tmp_path)
