"""Rows decoded when needed (event_window) and batches held while the
dashboard is covered (pipeline/held): the same events as decoding all at
once, for less work."""

from __future__ import annotations

from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.pipeline.held import HeldBatches
from ktui.record.feed import Event, ListBatch
from ktui.widgets.event_window import BLOCK, LAZY_FROM, UNKNOWN, EventWindow

PROBE = ProbeSet(name="t", probes=(parse_spec("vfs_read:c:a3"),)).probes[0]
PROBES = {1: PROBE}


def event(i: int) -> Event:
    return Event(probe_id=1, ts_ns=i, cpu=0, pid=i, tid=i, comm="c", latency_ns=None, values=(i,))


class CountingBatch(ListBatch):
    """A ListBatch that counts the events it decodes."""

    decoded: list[int]

    def events(self, start: int = 0, stop: int | None = None) -> list[Event]:
        out = super().events(start, stop)
        self.decoded.append(len(out))
        return out


def batch(n: int) -> CountingBatch:
    b = CountingBatch(tuple(event(i) for i in range(n)))
    object.__setattr__(b, "decoded", [])
    return b


def test_a_large_slice_is_decoded_block_by_block_when_rows_are_read():
    lazy, eager = EventWindow(2000), EventWindow(2000)
    b = batch(5000)
    assert lazy.append_batch(b, 3000, 5000, PROBES) == eager.append(b.events(3000, 5000), PROBES)
    b.decoded.clear()
    assert [r.event for r in lazy.view][-3:] == [event(i) for i in range(4997, 5000)]
    assert sum(b.decoded) == 2000  # every row was read: each decoded once, in blocks
    assert max(b.decoded) == BLOCK
    assert [r.event for r in lazy.view] == [r.event for r in eager.view]
    assert all(r.probe is PROBE for r in lazy.view)


def test_only_the_blocks_of_rows_read_are_decoded():
    window = EventWindow(2000)
    b = batch(2000)
    window.append_batch(b, 0, 2000, PROBES)
    assert b.decoded == []
    assert window.view[-1].event == event(1999)
    assert b.decoded == [2000 % BLOCK or BLOCK]
    assert window.view[5].event == event(5)
    assert b.decoded[-1] == BLOCK


def test_small_slices_and_filtered_windows_decode_at_once():
    window = EventWindow(2000)
    b = batch(LAZY_FROM - 1)
    window.append_batch(b, 0, LAZY_FROM - 1, PROBES)
    assert b.decoded == [LAZY_FROM - 1]
    window.set_filter("c")
    b = batch(1000)
    window.append_batch(b, 0, 1000, PROBES)
    assert b.decoded == [1000]


def test_a_record_the_batch_cannot_decode_shows_as_unknown():
    window = EventWindow(2000)

    class Short(ListBatch):
        def events(self, start=0, stop=None):
            return super().events(start, stop)[:-1]  # one record not decodable

    small = LAZY_FROM - 1
    window.append_batch(Short(tuple(event(i) for i in range(small))), 0, small, PROBES)
    assert len(window) == small - 1  # decoded at once: as before, no row
    window.clear()
    window.append_batch(Short(tuple(event(i) for i in range(1000))), 0, 1000, PROBES)
    assert window.view[-1].event is UNKNOWN and window.view[-1].probe is None


def test_held_batches_keep_the_newest_window_and_count_the_rest():
    held = HeldBatches(keep=100)
    assert not held
    parts = [ListBatch(tuple(event(i) for i in range(k * 60, k * 60 + 60))) for k in range(5)]
    for part in parts:
        held.add(part)
    taken = held.take()
    assert not held
    assert len(taken) == 300  # every event counts
    tail = taken.events(300 - 100)
    assert tail == [event(i) for i in range(200, 300)]
    assert taken.probe_counts() == {1: 300}
    assert taken.events(0, 10) == []  # dropped: never decoded
    assert len(held.take()) == 0
