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
    save_probeset(PS, by_hand)
    assert load_probeset(by_hand).probes == PS.probes
    save_probeset(ProbeSet("again", probes=PS.probes), by_hand)  # ktui's own file
    assert load_probeset(by_hand).name == "again"
    assert path_hint(str(by_hand), "write").plain == "exists: it will be replaced"
    assert path_hint(str(tmp_path / "new.yaml"), "write").plain == "new file"
