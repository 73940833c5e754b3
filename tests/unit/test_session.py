"""kernel.session on a fake kernel side (tests/fakekernel.py): bookkeeping."""

from __future__ import annotations

import pytest

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.record.feed import FeedError, ProbeState

from tests.fakekernel import FakeLoader


def session(tmp_path, loader, *specs: str) -> Session:
    ps = ProbeSet("fake", probes=tuple(parse_spec(s) for s in specs))
    return Session(ps, SessionOptions(log_path=tmp_path / "ktui.log"), loader=loader)


def test_open_attaches_and_close_detaches_and_frees_everything(tmp_path):
    loader = FakeLoader()
    with session(tmp_path, loader, "vfs_read:c:a3", "vfs_read:r:retval") as s:
        assert {st.state for st in s.statuses().values()} == {ProbeState.ATTACHED}
        assert len(loader.attached) == 3  # a return probe is an entry and a return
        added = s.add_probe_now(parse_spec("vfs_write:c"))
        assert len(loader.attached) == 4 and len(loader.compiled) == 2
        s.set_enabled_now(added.probe_id, False)
        assert len(loader.attached) == 3
    assert loader.attached == {}
    assert all(bpf.freed for bpf in loader.compiled)


def test_removing_the_last_probe_of_a_unit_frees_it(tmp_path):
    loader = FakeLoader()
    with session(tmp_path, loader, "vfs_read:c") as s:
        added = s.add_probe_now(parse_spec("vfs_write:r"))
        s.remove_probe_now(added.probe_id)
        assert loader.compiled[1].freed and not loader.compiled[0].freed
        assert set(s.stats().probes) == {0}
        with pytest.raises(FeedError):
            s.remove_probe_now(added.probe_id)
