"""Host tests never ask the host's kernel anything: the kernel's features
(kernel/machine/features.py) are the fake kernel's, every feature there, unless a
test gives its own. A probe that ran here would load BPF programs into
the machine the tests run on (as root, often)."""

from __future__ import annotations

import pytest

from ktui.kernel.machine import features
from tests.fakekernel import HAS_EVERYTHING


@pytest.fixture(autouse=True)
def no_kernel_probes(monkeypatch):
    def refuse(names=None, **kwargs):
        raise AssertionError("a host test probed the kernel's features (give it features instead)")

    monkeypatch.setattr("ktui.kernel.machine.feature_probes.probe_all", refuse)
    monkeypatch.setattr(features, "_memo", HAS_EVERYTHING)
