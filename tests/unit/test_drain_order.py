"""One drain of several buffers (each compiled unit's, the generic
engine's) is one batch whose events go forward in time, however it is
sliced (issues 28 "one frame to explain", 29 "the event pane").

Session.drain used to put the buffers' batches one after the other
(MultiBatch): every unit's events, then the engine's. Over the same
interval, a row of the last unit's newest events came before the engine's
older ones: time went backwards in the event pane (`363.770 ... read
retval=8192`, then `362.477 ... read size=8192`, after a probe was added).
MultiBatch then sorted each slice it was asked for, so the pane's blocks
(event_window: a large batch decoded 64 rows at a time) each went forward
while the window did not, and the newest rows of the window were not the
newest events. Records were not mixed up (each unit decodes its own); their
order was. Session.drain now merges a drain's parts by time
(record.decode.merged_by_time), each buffer's own order kept."""

from __future__ import annotations

import numpy as np

from ktui.kernel.session import Session, SessionOptions
from ktui.lang.model import ProbeSet
from ktui.lang.spec import parse_spec
from ktui.record.raw import RawRecords
from tests.fakekernel import FakeLoader, FakeReader


class TimedReader(FakeReader):
    """`per_drain` records per drain, at times first+1, first+3, first+5...
    (ns): two readers that start at 0 and 1 interleave."""

    def __init__(self, bpf, record_size: int, first: int, per_drain: int = 3) -> None:
        super().__init__(bpf, record_size, per_drain)
        self.first = first
        self.size = record_size

    def drain(self) -> RawRecords:
        super().drain()
        records = np.zeros(self.per_drain, dtype=[("ts", "<u8"), ("rest", f"V{self.size - 8}")])
        records["ts"] = self.first + 1 + 2 * np.arange(self.per_drain)
        return RawRecords([records.view(f"V{self.size}")])


class TimedLoader(FakeLoader):
    """Each unit's buffer holds its own interval's share: the first unit's
    events at odd times, the second's at even ones."""

    def __init__(self, per_drain: int = 3) -> None:
        super().__init__()
        self.readers = 0
        self.per_drain = per_drain

    def open_reader(self, bpf, program, options):
        bpf.check("open_reader")
        first, self.readers = self.readers, self.readers + 1
        return TimedReader(bpf, program.layout.record_size, first, self.per_drain)


def test_one_drain_of_two_buffers_goes_forward_in_time_however_sliced(tmp_path):
    loader = TimedLoader()
    ps = ProbeSet("two", probes=(parse_spec("vfs_read:c:a3"),))
    with Session(ps, SessionOptions(log_path=tmp_path / "ktui.log", engine="compiled"), loader=loader) as s:
        s.add_probe_now(parse_spec("vfs_write:c:a3"))  # a unit of its own
        assert loader.readers == 2
        batch = s.drain()
        whole = batch.events()
        assert len(whole) == 6
        assert [e.ts_ns for e in whole] == [1, 2, 3, 4, 5, 6]
        # the event pane takes the newest rows, in blocks: they add up
        assert batch.events(0, 2) + batch.events(2, 4) + batch.events(4, 6) == whole
        assert [e.ts_ns for e in batch.events(3, 6)] == [4, 5, 6]  # the three newest


def test_the_event_panes_rows_of_such_a_drain_go_forward_and_none_twice(tmp_path):
    """The event pane's window takes a large drain lazily, BLOCK rows decoded
    at a time (widgets.event_window): its rows are the drain's newest, each
    once, in time order. With a drain's buffers one after the other, and
    each slice sorted, a frame showed rows twice or out of order after a
    probe was added (issue 29, the event pane)."""
    from ktui.widgets.event_window import BLOCK, LAZY_FROM, EventWindow

    per_buffer = 3 * BLOCK
    loader = TimedLoader(per_drain=per_buffer)
    ps = ProbeSet("two", probes=(parse_spec("vfs_read:c:a3"),))
    with Session(ps, SessionOptions(log_path=tmp_path / "ktui.log", engine="compiled"), loader=loader) as s:
        s.add_probe_now(parse_spec("vfs_write:c:a3"))
        batch = s.drain()
        probes = {i: st.probe for i, st in s.statuses().items()}
    total = len(batch)
    assert total == 2 * per_buffer and total - BLOCK // 2 >= LAZY_FROM
    window = EventWindow(size=total - BLOCK // 2)  # the window cuts into a block
    window.append_batch(batch, 0, total, probes)
    times = [row.event.ts_ns for row in window.view]
    assert times == list(range(total - len(times) + 1, total + 1))
