"""Headless runs on the live pipeline: `ktui stream` and `ktui record`.

Both drive the same Collector as the dashboard, stop cleanly on SIGINT,
SIGTERM or SIGHUP (and after --duration), and end the same way: detach
every probe, drain the buffers to the end, read the final counters, then a
per-probe summary (hits, emitted, lost) in which every emitted event was
written. `stream` also stops when the
reader of its stdout pipe goes away, whether or not it was writing.
"""

from __future__ import annotations

import json
import os
import select
import signal
import stat
import sys
import threading
from typing import TYPE_CHECKING, Callable

from ktui.record.feed import ProbeState
from ktui.exits import EXIT_INTERRUPTED, EXIT_INVALID, EXIT_OK, EXIT_RUNTIME
from ktui.lang.model import KtuiError, ProbeSet

if TYPE_CHECKING:
    from ktui.pipeline.collector import Collector

# asyncio, the collector (and numpy, through the session's decoder) and
# the NDJSON writer are imported once the probes are attached: under
# emulation those imports take seconds, and the probes should be counting
# meanwhile.

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


READER_CHECK_INTERVAL = 0.1  # seconds between checks that stdout's reader is still there


class ReaderGone:
    """Tells whether the reader of a pipe has gone (`ktui stream | head -1`).

    A write into such a pipe raises BrokenPipeError, but a probe that never
    fires writes nothing (with --no-stats, or between stats lines), so the
    stream would run on forever. poll() on the write end reports POLLERR
    once no reader is left, whatever else it was asked for (Linux pipe_poll),
    so polling for no event at all answers without writing. Only pipes and
    FIFOs are watched: a file or a terminal has no reader to lose."""

    def __init__(self, fd: int) -> None:
        self._poller: select.poll | None = None
        try:
            is_pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
        except OSError:
            is_pipe = False  # stdout closed or invalid: the first write will tell
        if is_pipe:
            self._poller = select.poll()
            self._poller.register(fd, 0)

    @property
    def watching(self) -> bool:
        return self._poller is not None

    def __call__(self) -> bool:
        if self._poller is None:
            return False
        return any(events & select.POLLERR for _, events in self._poller.poll(0))


async def _watch_reader(gone: Callable[[], bool], on_gone: Callable[[], None]) -> None:
    import asyncio

    while True:
        if gone():
            on_gone()
            return
        await asyncio.sleep(READER_CHECK_INTERVAL)


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP while the probes run: they ask the
    collector to stop and never raise, so every way out goes through
    Collector.finish (detach, drain to the end, final stats) and nothing
    emitted goes unaccounted. Entered as soon as the session is open, before
    the slow imports, so no signal falls in between.

    Plain signal.signal handlers, not loop.add_signal_handler: those only run
    when the loop gets control back, which a sink busy with a big batch may
    not give for seconds. A signal before the collector exists (its imports
    take seconds under emulation) detaches the feed's probes at once, as
    Collector.stop would, and the collector stops as soon as it is there."""

    # After a first signal, the events already emitted are still written:
    # from a flood that can take long (formatting NDJSON). Past this many
    # seconds one line says a second signal stops the writing.
    HINT_AFTER = 1.0

    def __init__(self, feed, again: Callable[[], None] | None = None) -> None:
        self.feed = feed
        self.again = again  # what a second signal does (stream: stop writing, count the rest)
        self.requested = False
        self.done = False  # set by the command once it has finished: no hint then
        self._collector: Collector | None = None
        self._early: threading.Thread | None = None
        self._old: dict = {}

    def __enter__(self) -> "StopSignals":
        self._old = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum, frame) -> None:
        if self.requested:
            if self.again is not None:
                self.again()
            return
        self.requested = True
        if self.again is not None:
            hint = threading.Timer(self.HINT_AFTER, self._hint)
            hint.daemon = True
            hint.start()
        if self._collector is not None:
            self._collector.stop()
        elif self._early is None:
            self._early = threading.Thread(target=self._detach_quietly, name="ktui-detach",
                                           daemon=True)
            self._early.start()

    def _hint(self) -> None:
        if not self.done:
            print("ktui: stopping: the probes are detached; writing the events they emitted "
                  "(Ctrl-C again: stop writing them, and count them)", file=sys.stderr, flush=True)

    def _detach_quietly(self) -> None:
        try:
            self.feed.detach_all()
        except Exception:  # noqa: BLE001 - Collector.finish detaches again and raises it
            pass

    def notify(self, collector: Collector) -> None:
        """Stop `collector` on a signal (at once, if one came already)."""
        self._collector = collector
        if self.requested:
            if self._early is not None:
                self._early.join()  # then the collector's finish finds it done
            collector.stop()


async def _collect(collector: Collector, sink, duration: float | None,
                   reader_gone: tuple[Callable[[], bool], Callable[[], None]] | None = None) -> None:
    """Run the collector until it is stopped (a signal, through StopSignals),
    the duration, or (with `reader_gone`, a test and what to do) the output's
    reader going away; it then finishes (detach, drain to the end, stats)."""
    import asyncio

    loop = asyncio.get_running_loop()
    if duration is not None:
        _stop_after(loop, collector, duration, _waiting_for_program(getattr(collector, "feed", None)))
    watcher = loop.create_task(_watch_reader(*reader_gone)) if reader_gone else None
    try:
        await collector.run(sink)
    finally:
        if watcher is not None:
            watcher.cancel()


def _waiting_for_program(session):
    """The event a session sets once its generic program is in, when some
    probe counts nothing until then (fentry/fexit probes have no dispatcher
    to count through while their program loads); else None."""
    from ktui.record.feed import ProbeState

    loaded = getattr(session, "loaded", None)
    if loaded is None or loaded.is_set():
        return None
    statuses = session.statuses().values()
    if any(st.state is ProbeState.LOADING and st.via in ("fentry", "fexit") for st in statuses):
        return loaded
    return None


def _stop_after(loop, collector, duration: float, waiting) -> None:
    """Stop the collector `duration` seconds after every probe counts: at
    once, or once `waiting` (a threading.Event) is set. A fentry probe's
    program loads for seconds on a busy machine; counted from the start, a
    `--duration 3` could end before it counted a hit."""
    if waiting is None:
        loop.call_later(duration, collector.stop)
        return

    def wait_then_start() -> None:
        waiting.wait()
        try:
            loop.call_soon_threadsafe(loop.call_later, duration, collector.stop)
        except RuntimeError:  # the loop already ended (a signal stopped the run first)
            pass

    import threading

    threading.Thread(target=wait_then_start, name="ktui-duration", daemon=True).start()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _open_session(ps: ProbeSet, options):
    """Compile and attach. A stop signal during the (long) compile becomes a
    KeyboardInterrupt: Session.open() then cleans up, and no traceback shows.
    The collector's loop installs its own handlers once probes run."""
    from ktui.kernel.session import Session

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    session = Session(ps, options)
    try:
        session.open()
    except KeyboardInterrupt:
        session.close()
        raise
    return session


def _open_session_or_status(ps: ProbeSet, options):
    """The attached session (failed probes reported on stderr), or the exit
    status to return when it could not be opened."""
    try:
        session = _open_session(ps, options)
    except KtuiError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    except KeyboardInterrupt:
        print("ktui: interrupted before the probes were attached", file=sys.stderr)
        return EXIT_INTERRUPTED
    _report_failures(session)
    statuses = list(session.statuses().values())
    if statuses and all(st.state is ProbeState.FAILED for st in statuses):
        # Streaming or recording nothing for --duration and saying "ok" hides
        # the error that matters: stop here, with the reasons above.
        session.close()
        print("ktui: no probe could attach; nothing to do", file=sys.stderr)
        return EXIT_INVALID
    _report_loading(session)
    return session


def _report_failures(session) -> None:
    for st in session.statuses().values():
        if st.reason:
            print(f"ktui: {st.probe.name}: {st.reason}", file=sys.stderr)


def _report_loading(session) -> None:
    """Probes attached to the dispatcher count at once; their events start
    once the generic program is in. Say so, and say when (from a thread:
    the collector does not wait for it)."""
    import threading

    from ktui.record.feed import ProbeState

    loading = [st.probe.name for st in session.statuses().values() if st.state is ProbeState.LOADING]
    loaded = getattr(session, "loaded", None)
    if not loading or loaded is None:
        return
    waiting = sum(1 for st in session.statuses().values()
                  if st.state is ProbeState.LOADING and st.via in ("fentry", "fexit"))
    what = (f"{len(loading) - waiting} probe(s) counting" if waiting < len(loading) else "")
    if waiting:  # fentry/fexit probes have no dispatcher to count through meanwhile
        what += ("; " if what else "") + f"{waiting} fentry/fexit probe(s) waiting"
    print(f"ktui: {what}; loading their program", file=sys.stderr)

    def report() -> None:
        loaded.wait()
        failed = [st for st in session.statuses().values()
                  if st.state is ProbeState.FAILED and st.probe.name in loading]
        if failed:
            for st in failed:
                print(f"ktui: {st.probe.name}: {st.reason}", file=sys.stderr)
        else:
            print(f"ktui: {len(loading)} probe(s) live", file=sys.stderr)

    threading.Thread(target=report, name="ktui-load-report", daemon=True).start()


# summary keys (pipeline.ndjson) said on stderr when nonzero, in these words
UNCOUNTED_WORDS = (("unpaired", "returns unpaired"), ("entries_unstored", "entries not stored"),
                   ("recursion_misses", "recursion misses"), ("nest_dropped", "nested hits dropped"),
                   ("errnos_other", "errnos outside the table"))


def _print_summary(summary: dict) -> None:
    unwritten = (f", {summary['unwritten']} more taken from the buffer and not written (stopped by a "
                 "second interrupt)") if summary.get("unwritten") else ""
    print(f"ktui: {summary['events']} events{unwritten}", file=sys.stderr)
    for p in summary["probes"]:
        counted = (f", counted while loading {p['counted_only']}" if p.get("counted_only") else "")
        # what the kernel saw and could not count, when any: returns missed
        # (maxactive) and unpaired side by side
        missed = (f", returns missed {p['missed_returns']} (maxactive {p.get('maxactive', 0)})"
                  if p.get("missed_returns") else "")
        missed += "".join(f", {words} {p[key]}" for key, words in UNCOUNTED_WORDS if p.get(key))
        cost = ""
        if p.get("run_count"):
            cost = f", cost {p['run_ns'] / p['run_count']:.0f} ns/hit over {p['run_count']} runs"
        # fentry/fexit named; a kprobe (the default) leaves the line as it was
        via = f", via {p['via']}" if p.get("via") in ("fentry", "fexit") else ""
        print(f"ktui:   {p['probe']}: hits {p['hits']}, emitted {p['emitted']}, lost {p['lost']}{missed}{counted}"
              f"{cost}{via}", file=sys.stderr)


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null so the interpreter's final flush is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class _GuardedSink:
    """Turns a broken stdout into a clean stop."""

    def __init__(self, sink, collector_ref: list) -> None:
        self.sink = sink
        self.ref = collector_ref
        self.broken = False

    def pipe_broken(self) -> None:
        """The reader is gone (a write failed, or ReaderGone saw it): stop,
        and write nothing more to stdout."""
        if self.broken:
            return
        self.broken = True
        _stdout_to_devnull()
        if self.ref:
            self.ref[0].stop()

    def _guard(self, fn, arg) -> None:
        if self.broken:
            return
        try:
            fn(arg)
        except BrokenPipeError:
            self.pipe_broken()

    def on_batch(self, batch) -> None:
        self._guard(self.sink.on_batch, batch)

    def on_stats(self, stats) -> None:
        self._guard(self.sink.on_stats, stats)


def write_folded(path: str, feed, stats) -> None:
    """The stack: probes' stacks as folded lines (pipeline.stacks), from
    the last stats read (made after every probe was detached). With more
    than one such probe each line starts with the probe's name."""
    from ktui.pipeline.stacks import PARTIAL, folded_lines, wants_user

    statuses = feed.statuses()
    with_stacks = [(pid_, st.probe) for pid_, st in sorted(statuses.items())
                   if st.probe.agg is not None and st.probe.agg.stack]
    lines = []
    for pid_, probe in with_stacks:
        got = stats.probes.get(pid_) if stats is not None else None
        if got is None:
            continue
        for line in folded_lines(probe, got.stacks, getattr(feed, "symbolize", None)):
            lines.append(f"{probe.name};{line}" if len(with_stacks) > 1 else line)
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in lines))
    except OSError as err:
        print(f"ktui: {path}: cannot write the folded stacks: {err.strerror}", file=sys.stderr)
        return
    if any(wants_user(probe) for _, probe in with_stacks):
        print(f"ktui: {path}: user frames follow frame pointers, which most of Debian's userland "
              f"lacks: stacks that stop short start with {PARTIAL}", file=sys.stderr)


def run_stream(ps: ProbeSet, options, interval: float, duration: float | None,
               with_stats: bool = True, *, open_feed=None, folded: str | None = None) -> int:
    """`ktui stream`. `open_feed(ps, options)` returns an open Feed or an
    exit status; the default compiles and attaches a Session. Tests pass a
    FakeFeed through it to drive this loop without a kernel."""
    session = (open_feed or _open_session_or_status)(ps, options)
    if isinstance(session, int):
        return session
    with StopSignals(session, again=lambda: sink.stop_writing() if sink is not None else None) as stop:
        sink = None
        try:
            import asyncio

            from ktui.pipeline.collector import Collector
            from ktui.pipeline.ndjson import NdjsonSink

            # --no-stats: no stats lines, so no map reads but the final one
            collector = Collector(session, stats_interval=interval if with_stats else float("inf"))
            stop.notify(collector)
            sink = NdjsonSink(sys.stdout, session, getattr(session, "symbolize", None),
                              with_stats=with_stats)
            guarded = _GuardedSink(sink, [collector])
            gone = ReaderGone(sys.stdout.fileno())
            watch = (gone, guarded.pipe_broken) if gone.watching else None
            asyncio.run(_collect(collector, guarded, duration, watch))
            stop.done = True
            summary = sink.summary()
            if folded is not None:
                write_folded(folded, session, sink.last_stats)
            if not guarded.broken:
                try:
                    print(json.dumps(summary), flush=True)
                except BrokenPipeError:
                    _stdout_to_devnull()
            _print_summary(summary)
            return EXIT_OK
        finally:
            session.close()


def run_record(ps: ProbeSet, options, output: str, interval: float,
               duration: float | None, *, force: bool = False, open_feed=None) -> int:
    """`ktui record`. An existing `output` is refused unless `force`; the
    file is created before anything is compiled, so a bad name fails fast.
    `open_feed` as in run_stream."""
    from ktui.pipeline.recording import Recorder, RecordingError, RecordingExists

    try:
        recorder = Recorder(output, ps, overwrite=force)
    except RecordingExists as exc:
        print(f"ktui: {exc}; use --force to overwrite it", file=sys.stderr)
        return EXIT_INVALID
    except RecordingError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_INVALID
    try:
        session = (open_feed or _open_session_or_status)(ps, options)
        if isinstance(session, int):
            return session
        with StopSignals(session) as stop:
            try:
                last = {}

                class Sink:
                    def on_batch(self, batch):
                        recorder.on_batch(batch)

                    def on_stats(self, stats):
                        last["stats"] = stats
                        recorder.note_probes(session.statuses())
                        recorder.on_stats(stats)

                import asyncio

                from ktui.pipeline.collector import Collector
                from ktui.pipeline.ndjson import summary_of

                # the probes up front: one that never emits still replays
                recorder.note_probes(session.statuses())
                collector = Collector(session, stats_interval=interval)
                stop.notify(collector)
                asyncio.run(_collect(collector, Sink(), duration))
                summary = summary_of(session, last.get("stats"), recorder.events)
            finally:
                session.close()
    finally:
        recorder.close()
    _print_summary(summary)
    print(f"ktui: recorded to {output}", file=sys.stderr)
    return EXIT_OK


def replay_to_ndjson(path: str, with_stats: bool = True) -> int:
    from ktui.pipeline.ndjson import NdjsonSink
    from ktui.pipeline.recording import RecordingError
    from ktui.pipeline.replay import ReplayFeed

    try:
        feed = ReplayFeed(path, speed=0)
        sink = NdjsonSink(sys.stdout, feed, None, with_stats=with_stats)
        last = None
        try:
            while True:
                batch = feed.drain()
                if len(batch):
                    sink.on_batch(batch)
                stats = feed.stats()
                if stats is not last and stats.probes:
                    sink.on_stats(stats)
                    last = stats
                # (tested after a first pass: a recording without events is
                # read to its end when opened, its stats still to convert)
                if feed.finished:
                    break
            print(json.dumps(sink.summary()), flush=True)
        except BrokenPipeError:
            _stdout_to_devnull()
            return EXIT_OK
        if feed.truncated:
            print(f"ktui: {path}: recording was cut off; converted up to its last complete record",
                  file=sys.stderr)
        return EXIT_OK
    except (RecordingError, KtuiError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_INVALID
