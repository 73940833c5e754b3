"""The dashboard: status line, probe table, event pane, stats pane.

`apply()` takes one poll's worth (a drained batch, maybe a stats snapshot)
and updates every pane once; the app calls it inside `batch_update()`.
Probe control goes through `ProbeOps` in workers, so the kernel never
blocks a key press.

Below NARROW_BELOW columns (issue 15: at 80 the 52-column stats pane left
the events 25 columns and no values) the stats pane folds away and `s`
brings it back under the events; the probe table still shows the selected
probe's state, hits and rate. From NARROW_BELOW up it sits beside the
events again. Textual's breakpoints set the `-narrow`/`-wide` class.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable

from ktui.lang.model import Probe, ProbeSet
from ktui.pipeline.drilldown import NotDrillable, drill_down
from ktui.pipeline.format import Symbolize
from ktui.pipeline.rates import ProbeCost, RateHistory, costs, drop_percent, lost_growing, rates, totals
from ktui.record.feed import EventBatch, Feed, FeedError, ProbeStatus, StatsSnapshot
from ktui.screens.browse_model import FunctionIndex, running_kernel_catalog
from ktui.screens.browser import BrowserScreen
from ktui.screens.commands import DashboardCommands
from ktui.screens.confirm import ConfirmDialog
from ktui.screens.event_detail import EventDetailScreen
from ktui.screens.path_dialog import PathDialog, proposed_write_path
from ktui.screens.probe_check import ProbeCheck
from ktui.screens.probe_dialog import ProbeDialog
from ktui.screens.probe_ops import ProbeOps, ReplaceFailed, is_on
from ktui.widgets.event_log import EventLog
from ktui.widgets.event_pane import EventPane
from ktui.widgets.event_window import DEFAULT_WINDOW
from ktui.widgets.footer import KtuiFooter
from ktui.widgets.probe_sort import TIMED_ONLY, Sort
from ktui.widgets.probe_table import ProbeLine, ProbeTable
from ktui.pipeline.value_views import views_of
from ktui.widgets.scrollbars import whole_cell_scrollbars
from ktui.widgets.stats_pane import ProbeView, StatsPane
from ktui.widgets.status_line import Replaying, StatusLine, Totals

log = logging.getLogger(__name__)
NARROW_BELOW = 120  # columns: narrower, the stats pane folds under the events
DEFAULT_SAVE_PATH = "./ktui-probeset.yaml"


class MainScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        # first: while a drill-down hides events, how to get them back
        Binding("escape", "clear_drill", "All events", id="drill-off",
                tooltip="Clear the drill-down (Enter on a stats line): every event again"),
        Binding("space", "toggle", "On/off", id="toggle", tooltip="Attach or detach the selected probe"),
        Binding("space", "show_hide", "Show/hide", id="show-hide",
                tooltip="Replay: show or hide the selected probe's events (its counts are the recording's)"),
        # early in the list: a narrow footer cuts the keys at its end
        Binding("s", "stats", "Stats", id="stats",
                tooltip="Show or hide the selected probe's stats under the events (narrow windows)"),
        # a replay's playback (shown only in a replay)
        Binding("plus", "faster", "Faster", id="faster", key_display="+", tooltip="Replay: play faster"),
        Binding("minus", "slower", "Slower", id="slower", key_display="-", tooltip="Replay: play slower"),
        Binding("E", "to_end", "To end", id="to-end", tooltip="Replay: jump to the end of the recording"),
        Binding("A", "all_on", "All on", id="all-on", show=False, tooltip="Attach every probe that is off"),
        Binding("N", "all_off", "All off", id="all-off", show=False, tooltip="Detach every probe"),
        Binding("a", "add", "Add", id="add", tooltip="Add a probe (spec checked as you type)"),
        Binding("b", "browse", "Browse", id="browse",
                tooltip="Find kernel functions, a binary's functions and USDT, tracepoints: "
                        "tick what to fetch, add it"),
        Binding("e", "edit", "Edit", id="edit", tooltip="Edit the selected probe"),
        Binding("d", "delete", "Delete", id="delete", tooltip="Delete the selected probe (asks first)"),
        Binding("delete", "delete", "Delete", id="delete-key", show=False),
        Binding("o", "open", "Open", id="open", tooltip="Open a YAML probe set (replaces every probe)"),
        Binding("w", "write", "Write", id="write", tooltip="Write the probes to a YAML probe set"),
        Binding("p", "pause", "Pause", id="pause", tooltip="Pause the event stream (a replay: its playback too)"),
        Binding("p", "follow", "Follow", id="follow", tooltip="Follow the event stream again"),
        Binding("p", "play", "Play", id="play", tooltip="Replay: play on from where it was paused"),
        Binding("slash", "filter", "Filter", id="filter", tooltip="Filter events as you type (esc clears)"),
        Binding("c", "clear", "Clear", id="clear", tooltip="Clear the event pane"),
        Binding("S", "sort", "Sort", id="sort", show=False,
                tooltip="Sort the probes by the next column (again: the next one; then as added)"),
        Binding("I", "invert_sort", "Invert sort", id="invert-sort", show=False,
                tooltip="Sort the other way round (a click on a column header sorts by it)"),
        Binding("v", "view", "View", id="view",
                tooltip="Stats pane: next view of the selected probe (counters, value histogram, "
                        "top values, top stacks)"),
        Binding("t", "timing", "Cost", id="cost", show=False,
                tooltip="Each probe's cost (ns/hit, CPU share); slows every BPF program while on"),
    ]
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-narrow"), (NARROW_BELOW, "-wide")]
    COMMANDS = {DashboardCommands}
    DEFAULT_CSS = """
    MainScreen {
        layout: vertical;
        & > #panes { height: 1fr; }
        & EventPane { width: 1fr; }
        & StatsPane { width: 52; }
        &.-narrow {
            & > #panes { layout: vertical; }
            & EventPane { width: 1fr; height: 1fr; }
            & StatsPane { width: 1fr; height: 50%; display: none; }
            &.-stats-open StatsPane { display: block; }
        }
    }
    """

    def __init__(
        self,
        feed: Feed,
        *,
        symbolize: Symbolize | None = None,
        window: int = DEFAULT_WINDOW,
        probeset_path: str | None = None,
        functions: FunctionIndex | None = None,
    ) -> None:
        """functions: the kernel's functions for the browser and the add
        dialog's completion (by default this machine's, loaded on first use)."""
        super().__init__()
        self.feed = feed
        self.functions = functions if functions is not None else FunctionIndex(running_kernel_catalog)
        self.ops = ProbeOps(feed)
        self.symbolize = symbolize
        self.window = window
        self.meta: ProbeSet = feed.probeset  # name, description, source of what was last opened
        self.save_path = probeset_path or feed.probeset.source
        self.order: list[int] = []  # probe ids in the order added: rows keep their place
        self.sort = Sort()  # the table shows `order` sorted by this
        self.statuses: dict[int, ProbeStatus] = {}
        self.snapshot: StatsSnapshot | None = None
        self.rates: dict[int, float] = {}
        self.costs: dict[int, ProbeCost] = {}  # each probe's own, while timed
        self.losing: set[int] = set()
        self.history = RateHistory()
        self._warned_lost: set[int] = set()
        self._binding_state: tuple[bool, bool, bool] | None = None  # see _refresh_bindings_if_changed
        self.ready = False  # mounted: polls may update the panes
        self._narrow: bool | None = None  # the width class the footer's keys were last checked for

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        yield ProbeTable(id="probes")
        with Horizontal(id="panes"):
            yield EventPane(self.window, self.symbolize, id="events")
            no_probe = StatsPane.NO_PROBE
            if self._playback is not None:
                no_probe = ("No probe in this recording.\n"
                            "Older recordings name their probes only with their first events.")
            yield StatsPane(id="stats", symbolize=self.symbolize, no_probe=no_probe)
        yield KtuiFooter()

    def on_mount(self) -> None:
        self.info = self.feed.system_info()  # fixed for a run: read once
        for note in self.info.notes:
            self.notify(note, severity="warning", timeout=8)
        self.events.replay = self._playback is not None
        self.refresh_probes()
        whole_cell_scrollbars(self.table, self.query_one(EventLog), self.query_one(StatsPane))
        self.table.focus()
        self.ready = True

    def on_resize(self) -> None:
        # `s` applies only to a narrow window: the footer shows it then.
        narrow = self.app.size.width < NARROW_BELOW
        if narrow != self._narrow:
            self._narrow = narrow
            self.refresh_bindings()

    @property
    def footer_first(self) -> tuple[str, ...]:
        """The keys the footer keeps longest after quit and help
        (widgets/footer.py): in a replay its playback and, in a narrow
        window, the folded stats; live, on/off, the stats and pause."""
        return ("p", "plus", "minus", "E", "s") if self._playback is not None else ("space", "s", "p")

    @property
    def narrow(self) -> bool:
        return self.app.size.width < NARROW_BELOW

    @property
    def table(self) -> ProbeTable:
        return self.query_one(ProbeTable)

    @property
    def events(self) -> EventPane:
        return self.query_one(EventPane)

    @property
    def selected(self) -> ProbeStatus | None:
        probe_id = self.table.selected_id
        return None if probe_id is None else self.statuses.get(probe_id)

    # ------------------------------------------------------------ one poll

    def apply(self, batch: EventBatch, snapshot: StatsSnapshot | None) -> None:
        """Everything one tick changes, in one pass over the panes."""
        statuses = self.feed.statuses()
        if len(batch):
            self.events.ingest(batch, {i: s.probe for i, s in statuses.items()})
        if snapshot is not None and self.snapshot is not None and snapshot.time == self.snapshot.time:
            # No news: a replay's stats are its recorded snapshots, which
            # change only when the playback reaches the next one. Taken as
            # new, the zero interval made every rate unknown ("-"), one read
            # in two, and froze the meter at its last figure after the end.
            snapshot = None
            self._show_status()  # the playback position moves all the same
        if self._ended:
            self.events.end_meter("end of the recording")
            self._refresh_bindings_if_changed()  # the playback keys leave the footer
        if snapshot is not None:
            prev, self.snapshot = self.snapshot, snapshot
            self.rates = rates(prev, snapshot)
            self.costs = costs(prev, snapshot)
            self.history.push_all(self.rates)
            self.losing = {i for i in snapshot.probes if lost_growing(prev, snapshot, i)}
            self._warn_lost(statuses)
            if prev is not None:
                self.events.update_meter(snapshot.time - prev.time)
        if snapshot is not None or statuses != self.statuses:
            self.refresh_probes(statuses)

    def refresh_probes(self, statuses: dict[int, ProbeStatus] | None = None) -> None:
        """Table, stats pane and status line from the latest statuses and stats."""
        self.statuses = self.feed.statuses() if statuses is None else statuses
        known = set(self.statuses)
        self.order = [i for i in self.order if i in known] + sorted(known.difference(self.order))
        self.history.retain(known)
        drill = self.events.drill
        if drill is not None and drill.probe_id not in known:
            self.events.set_drill(None)  # its probe is gone: every event again, and the line says so
        stats = self.snapshot.probes if self.snapshot is not None else {}
        lines = [ProbeLine(self.statuses[i], stats.get(i), self.rates.get(i), i in self.losing, self.costs.get(i))
                 for i in self.order]
        if self.sort.key in TIMED_ONLY and not self.timed:
            self.sort = Sort()  # its column is gone
        # The table keeps the cursor on the same probe when rows move.
        self.table.set_lines(self.sort.apply(lines), timed=self.timed,
                             sort=(self.sort.key, self.sort.arrow()) if self.sort.key else None)
        self._show_selected()
        self._show_status()
        self._refresh_bindings_if_changed()

    def _refresh_bindings_if_changed(self) -> None:
        """Refresh the footer's keys only when what check_action answers has
        changed: each refresh recomposes the footer, and doing it on every
        stats update (once a second) grew memory without bound (the bench's
        host flood, docs/benchmarks-history.md)."""
        state = (self.table.selected_id is not None, bool(self.order), self.events.paused,
                 self._has_views(), self.events.drill is not None, self._ended)
        if state != self._binding_state:
            self._binding_state = state
            self.refresh_bindings()

    def _show_selected(self) -> None:
        status = self.selected
        if status is None:
            self.query_one(StatsPane).show(None)
            return
        probe_id = status.probe_id
        stats = self.snapshot.probes.get(probe_id) if self.snapshot is not None else None
        self.query_one(StatsPane).show(
            ProbeView(status, stats, self.rates.get(probe_id), tuple(self.history.series(probe_id)),
                      self.timed, self.costs.get(probe_id))
        )

    @property
    def timed(self) -> bool:
        """The cost shows: the statistics are on (a live feed) or were on
        when the snapshot was taken (a replay of a timed recording)."""
        return bool(getattr(self.feed, "timing", False)) or (
            self.snapshot is not None and self.snapshot.timed)

    def _show_status(self) -> None:
        sums = totals(self.snapshot) if self.snapshot is not None else None
        names = tuple(self.statuses[i].probe.name for i in self.order if i in self.losing)
        shown = Totals() if sums is None else Totals(sums.emitted, sums.lost, drop_percent(sums.lost, sums.emitted), names)
        drill = self.events.drill
        self.query_one(StatusLine).show(self.info, shown, self.events.paused, self._replaying(),
                                        drill=drill.describe() if drill is not None else "")

    @property
    def _playback(self):
        """The replay's playback controls (ReplayFeed), None on a live feed."""
        return self.feed if callable(getattr(self.feed, "playback", None)) else None

    @property
    def _ended(self) -> bool:
        """A replay that has shown every event."""
        return self._playback is not None and self._playback.playback().ended

    def _replaying(self) -> Replaying | None:
        feed = self._playback
        if feed is None:
            return None
        at = feed.playback()
        return Replaying(host=getattr(feed, "host", ""), started=getattr(feed, "started", ""),
                         position=at.position, speed=at.speed, paused=at.paused, ended=at.ended)

    def action_faster(self) -> None:
        if self._playback is not None:
            self._playback.faster()
            self._show_status()

    def action_slower(self) -> None:
        if self._playback is not None:
            self._playback.slower()
            self._show_status()

    def action_to_end(self) -> None:
        if self._playback is not None:
            self._playback.jump_to_end()
            self.action_follow()

    def _warn_lost(self, statuses: dict[int, ProbeStatus]) -> None:
        for probe_id in sorted(self.losing - self._warned_lost):
            if probe_id in statuses:
                self._warned_lost.add(probe_id)
                self.notify(
                    f"{statuses[probe_id].probe.name} is losing events: make it stats-only "
                    "(no fetches), filter it, or sample it",
                    title="events lost",
                    severity="warning",
                    timeout=8,
                )

    @on(DataTable.RowHighlighted, "#probes")
    def _probe_highlighted(self) -> None:
        self._show_selected()
        self._refresh_bindings_if_changed()

    @on(DataTable.HeaderSelected, "#probes")
    def _header_clicked(self, message: DataTable.HeaderSelected) -> None:
        """A click on a column header sorts by it (again: the other way)."""
        self._sort_by(self.sort.by(str(message.column_key.value)))

    def action_sort(self) -> None:
        self._sort_by(self.sort.next(self.timed))

    def action_invert_sort(self) -> None:
        self._sort_by(self.sort.inverted())

    def _sort_by(self, sort: Sort) -> None:
        self.sort = sort
        self.refresh_probes(self.statuses)

    @on(DataTable.RowSelected, "#probes")
    def _probe_selected(self) -> None:
        """Enter on a probe: go to its events."""
        self.query_one(EventLog).focus()

    @on(EventLog.Selected)
    def _event_selected(self, message: EventLog.Selected) -> None:
        status = self.statuses.get(message.row.event.probe_id)
        self.app.push_screen(EventDetailScreen(message.row, status, self.symbolize))

    # ------------------------------------------------------------ which keys apply

    # A replay has no kernel: adding, editing, deleting and opening probes
    # all fail there (ReplayFeed refuses to add or remove a probe; issue 15:
    # the footer offered them all the same, and `a` let a spec be typed only
    # to refuse it). What works on a recording stays: on/off (which probes'
    # events show), views, filters, drill-down, `b` (this machine's
    # functions, read-only, saying so) and `w` (the recorded probes as a
    # probe set, to run them live; never over the recording itself).
    NOT_IN_REPLAY = ("add", "edit", "delete", "open")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.NOT_IN_REPLAY and self.info.buffer == "replay":
            return False
        if action == "clear_drill":
            return self.events.drill is not None
        if action == "view":  # only a probe with aggregations has more than one view
            return self._has_views()
        if action in ("toggle", "show_hide"):  # the same switch; a replay's only shows or hides events
            replay = self.info.buffer == "replay"
            return self.table.selected_id is not None and (replay == (action == "show_hide"))
        if action in ("edit", "delete"):
            return self.table.selected_id is not None
        if action in ("all_on", "all_off"):
            return bool(self.order)
        if action in ("faster", "slower", "to_end", "pause", "play") and self._ended:
            return False  # every event is shown: nothing left to pause, speed up or jump to
        if action == "pause":
            return not self.events.paused
        if action == "follow":
            return self.events.paused and self._playback is None
        if action == "play":  # a replay's word for follow
            return self.events.paused and self._playback is not None
        if action == "stats":
            return self.narrow
        if action == "timing":
            return self.info.buffer != "replay"  # a recording's programs are gone
        if action in ("faster", "slower", "to_end"):
            return self._playback is not None
        return True

    # ------------------------------------------------------------ actions

    def action_toggle(self) -> None:
        status = self.selected
        if status is not None:
            self._set_enabled(status, not is_on(status))

    def action_show_hide(self) -> None:
        self.action_toggle()

    @on(ProbeTable.MarkClicked)
    def _mark_clicked(self, message: ProbeTable.MarkClicked) -> None:
        """The mouse's space: the same switch, through the same worker."""
        status = self.statuses.get(message.probe_id)
        if status is not None:
            self._set_enabled(status, not is_on(status))

    @work(group="feed")
    async def _set_enabled(self, status: ProbeStatus, enabled: bool) -> None:
        try:
            result = await self.ops.set_enabled(status.probe_id, enabled)
        except FeedError as err:
            self.notify(f"{status.probe.name}: {err}", title="cannot switch", severity="error")
            return
        finally:
            self.refresh_probes()
        if result.reason and self._playback is None:  # (a replay's reason says its events are hidden)
            self.notify(f"{result.probe.name}: {result.state.value}: {result.reason}", severity="error")

    def action_all_on(self) -> None:
        self._set_all(True)

    def action_all_off(self) -> None:
        self._set_all(False)

    @work(group="feed", exclusive=True)
    async def _set_all(self, enabled: bool) -> None:
        try:
            problems = await self.ops.set_all(list(self.order), enabled)
        finally:
            self.refresh_probes()
        if problems:
            self.notify("\n".join(problems), title="some probes did not switch", severity="error")

    def _probe_check(self) -> ProbeCheck | None:
        """The running kernel's word on a probe as it is typed (none in a
        replay: this machine's kernel is not the recording's)."""
        return None if self.info.buffer == "replay" else ProbeCheck(self.functions)

    def action_add(self) -> None:
        self.app.push_screen(ProbeDialog(self._submit_add, taken=self._names(), functions=self.functions,
                                         check=self._probe_check()))

    def action_browse(self) -> None:
        read_only = ""
        if self.info.buffer == "replay":
            read_only = "replay: this machine's functions, read-only (adding needs a live session)"
        self.app.push_screen(BrowserScreen(self.functions, self._submit_add, taken=self._names(),
                                           read_only=read_only))

    async def _submit_add(self, probe: Probe) -> None:
        status = await self.ops.add(probe)
        self.refresh_probes()
        self.table.select(status.probe_id)

    def action_edit(self) -> None:
        status = self.selected
        if status is not None:
            submit = lambda probe: self._submit_edit(status, probe)  # noqa: E731
            self.app.push_screen(ProbeDialog(submit, probe=status.probe, taken=self._names(status.probe_id),
                                             functions=self.functions, check=self._probe_check()))

    async def _submit_edit(self, old: ProbeStatus, probe: Probe) -> None:
        place = self.order.index(old.probe_id)
        try:
            status = await self.ops.replace(old, probe)
        except ReplaceFailed as err:
            if err.restored is not None:
                self._put_at(err.restored.probe_id, place)
            else:
                self.refresh_probes()
            raise
        self._put_at(status.probe_id, place)

    def _put_at(self, probe_id: int, place: int) -> None:
        """A replaced probe takes the old one's row."""
        if probe_id in self.order:
            self.order.remove(probe_id)
        self.order.insert(min(place, len(self.order)), probe_id)
        self.refresh_probes()
        self.table.select(probe_id)

    def _names(self, *exclude: int) -> set[str]:
        return {s.probe.name for i, s in self.statuses.items() if i not in exclude}

    def action_delete(self) -> None:
        status = self.selected
        if status is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._remove(status)

        self.app.push_screen(ConfirmDialog(f"Delete probe {status.probe.name}?\n{status.probe.spec_text}"), answered)

    @work(group="feed")
    async def _remove(self, status: ProbeStatus) -> None:
        try:
            await self.ops.remove(status.probe_id)
        except FeedError as err:
            self.notify(f"{status.probe.name}: {err}", title="cannot delete", severity="error")
        finally:
            self.refresh_probes()

    def action_open(self) -> None:
        value = self.meta.source or ""
        self.app.push_screen(PathDialog("open", self._submit_open, value=value))

    async def _submit_open(self, path: str) -> None:
        try:
            loaded = await self.ops.open(path, list(self.order))
        finally:
            self.refresh_probes()
        self.meta = loaded.probeset
        self.save_path = path
        self.order = [i for i in self.order if i not in loaded.ids] + list(loaded.ids)
        self.refresh_probes()
        name = loaded.probeset.name
        self.notify(f"{name}: {len(loaded.ids)} probes from {path}", title="probe set opened")
        if loaded.problems:
            self.notify("\n".join(loaded.problems), title=f"{name}: problems", severity="warning", timeout=10)

    def action_write(self) -> None:
        value = proposed_write_path(self.save_path, DEFAULT_SAVE_PATH)
        self.app.push_screen(PathDialog("write", self._submit_write, value=value))

    async def _submit_write(self, path: str, replace: bool) -> None:
        written = self.ops.write(self.meta, self.order, path, replace=replace)
        self.meta, self.save_path = written, path
        self.notify(f"{len(written.probes)} probes written to {path}", title="probe set written")

    def action_pause(self) -> None:
        if self._playback is not None:
            self._playback.set_paused(True)
        self.events.set_paused(True)
        self._show_status()
        self._refresh_bindings_if_changed()

    def action_follow(self) -> None:
        if self._playback is not None:
            self._playback.set_paused(False)
        self.events.set_paused(False)
        self._show_status()
        self._refresh_bindings_if_changed()

    def action_play(self) -> None:
        self.action_follow()

    def action_filter(self) -> None:
        self.events.open_filter()

    def action_clear(self) -> None:
        self.events.clear()

    def action_timing(self) -> None:
        """The kernel's run-time statistics on or off; the screen says what
        they measure and what they cost while on."""
        on = not getattr(self.feed, "timing", False)
        try:
            self.feed.set_timing(on)
        except (FeedError, AttributeError) as err:
            self.notify(str(err) or "this feed has no run-time statistics", title="cost", severity="error")
            return
        if on:
            self.notify("each probe's own cost from the next stats reads: ns/hit and share of a CPU of its "
                        "BPF program (not the kprobe trap or return hook). Every BPF program on this machine "
                        "runs slower until t switches it off.", title="cost on", severity="warning", timeout=8)
        else:
            self.costs = {}
            self.notify("run-time statistics off", title="cost off")
        self.refresh_probes()

    def _has_views(self) -> bool:
        status = self.selected
        return status is not None and len(views_of(status.probe)) > 1

    def action_view(self) -> None:
        """The stats pane's next view of the selected probe (pipeline.value_views)."""
        self.query_one(StatsPane).next_view()

    @on(StatsPane.Drill)
    def _drill(self, message: StatsPane.Drill) -> None:
        """Enter on a stats line: the event pane shows only its events."""
        status = self.selected
        if status is None:
            return
        try:
            drill = drill_down(status.probe_id, status.probe, message.pick)
        except NotDrillable as err:
            self.notify(str(err), title="drill-down", severity="warning", timeout=8)
            return
        self._set_drill(drill)

    def action_clear_drill(self) -> None:
        self._set_drill(None)

    def _set_drill(self, drill) -> None:
        self.events.set_drill(drill)
        self._show_status()
        self._refresh_bindings_if_changed()

    def action_stats(self) -> None:
        """Narrow window: the stats pane under the events, or folded away."""
        self.toggle_class("-stats-open")

