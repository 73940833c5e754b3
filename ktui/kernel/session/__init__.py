"""A live probe set in the kernel: the Session and the kernel side it drives.

In: a bound ProbeSet and SessionOptions, then the user's edits (add,
remove, switch a probe). The session picks an engine per probe (the
generic program, ktui.kernel.generic, or a compiled unit, unit.py, made
from ktui.kernel.codegen's C), attaches through ktui.kernel.attach, reads
the event buffers (ktui.kernel.buffers) and the counters
(ktui.kernel.maps). loader.py is the one object it asks the kernel
through, which host tests replace with a fake (tests/fakekernel.py).

Out: the record Feed (EventBatch, StatsSnapshot, ProbeStatus) that the
pipeline and the app read. The top room: nothing else in ktui.kernel
imports it.
"""

from ktui.kernel.session.live import Session, SessionOptions

__all__ = ["Session", "SessionOptions"]
