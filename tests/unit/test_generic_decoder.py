"""Records of an older, smaller size decode after a probe with a larger
payload joined (GenericEngine._decoder). In the VM (benchmarks/live_edit.py)
adding `vfs_read:c:a3,a2` after `vfs_read:c:a3` made the decoder of the
8-byte records still in the buffer fail: NumPy refused a 16-byte payload in
an 8-byte record. The decoder is built from the engine's history alone, so
this runs without a kernel (the engine is made without its __init__, which
loads the dispatcher)."""

from __future__ import annotations

import numpy as np

from ktui.kernel.generic.engine import GenericEngine
from ktui.lang.spec import parse_spec
from ktui.record.layout import HEADER_SIZE, MIN_PAYLOAD


def engine_with(*specs: str) -> GenericEngine:
    engine = GenericEngine.__new__(GenericEngine)
    engine._history = {tag: (parse_spec(spec), tag) for tag, spec in enumerate(specs, 1)}
    engine._decoders = None
    return engine


def test_old_records_decode_when_a_larger_probe_joined():
    engine = engine_with("vfs_read:c:a3", "vfs_read:c:a3,a2")
    small = HEADER_SIZE + MIN_PAYLOAD
    decoder = engine._decoder(small)  # raised ValueError before the fix
    assert decoder.dtype.itemsize == small
    records = np.zeros(2, dtype=decoder.dtype)
    records["probe"] = 0  # the index of the first probe in the history
    records["payload"] = (4096).to_bytes(8, "little")
    assert [e.values for e in decoder.batch(records).events()] == [(4096,), (4096,)]


def test_the_larger_size_decodes_both():
    engine = engine_with("vfs_read:c:a3", "vfs_read:c:a3,a2")
    assert engine._decoder(HEADER_SIZE + 16).dtype.itemsize == HEADER_SIZE + 16
