"""A hash map read in batches (bpfsys.hash_items: BPF_MAP_LOOKUP_BATCH) on a
real kernel gives exactly what the entry-by-entry walk gives: every key
once, with its value, across many batches, and when a hash bucket holds
more entries than a batch has room for (the kernel's ENOSPC)."""

from __future__ import annotations

import os
import struct

import pytest

from ktui.kernel.maps import bpfsys

ENTRIES = 3000


@pytest.fixture
def hash_map():
    fd = bpfsys.map_create(bpfsys.BPF_MAP_TYPE_HASH, 20, 8, 4096, name="ktui_test")
    try:
        for i in range(ENTRIES):
            bpfsys.map_update(fd, struct.pack("<I16s", i, f"comm-{i}".encode()), struct.pack("<Q", i * 7))
        yield fd
    finally:
        os.close(fd)


@pytest.mark.parametrize("batch", [1, 64, bpfsys.HASH_BATCH, 8192])
def test_a_batched_read_gives_every_entry_once_as_the_walk_does(hash_map, batch):
    walked = bpfsys._hash_items_one_by_one(hash_map, 20, 8)
    assert len(walked) == ENTRIES
    batched = bpfsys.hash_items(hash_map, 20, 8, batch=batch)
    assert len(batched) == ENTRIES  # none twice, none missed
    assert dict(batched) == dict(walked)
    for key, value in batched:
        i = struct.unpack_from("<I", key)[0]
        assert value == struct.pack("<Q", i * 7)


def test_an_empty_map_reads_as_empty():
    fd = bpfsys.map_create(bpfsys.BPF_MAP_TYPE_HASH, 8, 8, 16, name="ktui_empty")
    try:
        assert bpfsys.hash_items(fd, 8, 8) == []
    finally:
        os.close(fd)
