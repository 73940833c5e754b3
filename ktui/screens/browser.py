"""The function browser: find a kernel function, see its prototype and
verdict, tick what to fetch, add the probe. The same for a tracepoint
(`sched/`: its fields), a file's functions (`/usr/bin/bash:read`, a1..a6)
and its USDT probe points (`usdt /PATH`): browse_places lists those.

The catalog (tens of thousands of functions) loads in a thread on first
open and stays loaded for the run; matching runs on each keystroke in the
handler itself (browse_match: a few ms, tens at worst), only the best
DEFAULT_CAP rows are shown. The spec being built is an ordinary editable
Input, and adding goes through what the add dialog uses (build_probe, then
the dashboard's submit), so the browser can never add what the dialog
would refuse.
"""

from __future__ import annotations

import logging
from typing import ClassVar, Collection

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option
from textual.widgets.selection_list import Selection

from ktui.lang.model import KtuiError
from ktui.record.feed import FeedError
from ktui.screens.browse_match import DEFAULT_CAP
from ktui.screens.browse_model import TYPE_CYCLE, Choice, Detail, FunctionIndex, Functions, spec_text
from ktui.screens.browse_places import Found, PlaceDetail, Query, completed, parse_query
from ktui.screens.probe_dialog import FieldProblem, SubmitProbe, build_probe, caret_text
from ktui.widgets.footer import KtuiFooter
from ktui.widgets.scrollbars import whole_cell_scrollbars
from ktui.widgets.tick_list import TickList

log = logging.getLogger(__name__)

VERDICT_STYLE = {"traceable": "green", "kprobe-only": "yellow", "unchecked": "dim"}
TONE_STYLE = {"good": "green", "warn": "yellow", "bad": "red", "dim": "dim"}  # browse_places' tones
QUERY_HINT = "a kernel function · CATEGORY/EVENT · /path/to/binary:function · usdt /path"
KIND_WORDS = {"t": "the tracepoint", "usdt": "the USDT probe point"}


class BrowserScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", id="browse-close", tooltip="Back to the dashboard"),
        Binding("ctrl+r", "kind", "Call/return", id="browse-kind", priority=True,
                tooltip="Probe the call or the return (retval) of the function (a kernel's or a file's)"),
        Binding("ctrl+s", "add", "Add", id="browse-add", priority=True,
                tooltip="Add the probe the spec line describes"),
        Binding("ctrl+t", "text_type", "String?", id="browse-type", priority=True,
                tooltip="Fetch the highlighted char pointer as a pointer, :string or :ustring"),
        Binding("right", "expand", "Members", id="browse-expand",
                tooltip="Show the members of the struct a parameter points to"),
        Binding("left", "collapse", "Fold", id="browse-fold", show=False,
                tooltip="Hide the members again"),
        Binding("down", "move(1)", "Down", show=False, tooltip="Next match (while typing)"),
        Binding("up", "move(-1)", "Up", show=False, tooltip="Previous match (while typing)"),
    ]
    DEFAULT_CSS = """
    BrowserScreen {
        layout: vertical;
        & #query, #spec { margin: 0; }
        & #count { color: $text-muted; height: 1; padding: 0 1; }
        & #body { height: 1fr; }
        & #matches { width: 2fr; min-width: 30; text-wrap: nowrap; text-overflow: ellipsis; }
        & #choices { text-wrap: nowrap; text-overflow: ellipsis; }
        & #detail { width: 3fr; padding: 0 1; }
        & #proto { height: auto; text-style: bold; }
        & #verdict { height: auto; }
        & #notes { height: auto; color: $text-muted; }
        & #kind { height: 1; margin-top: 1; }
        & #choices { height: 1fr; min-height: 4; }
        & #spec-problem { height: auto; max-height: 3; color: $text-error; padding: 0 1; }
    }
    """

    class Counted(Message):
        def __init__(self, count: int) -> None:
            super().__init__()
            self.count = count

    class Ready(Message):
        def __init__(self, functions: Functions) -> None:
            super().__init__()
            self.functions = functions

    def __init__(self, index: FunctionIndex, submit: SubmitProbe, *, taken: Collection[str] = (),
                 read_only: str = "") -> None:
        """`read_only`: why nothing can be added here (a replay), or ""."""
        super().__init__()
        self.index = index
        self._submit_probe = submit
        self.taken = frozenset(taken)
        self.read_only = read_only
        self.functions: Functions | None = index.loaded
        self.detail: Detail | PlaceDetail | None = None
        self.kind = "c"  # call or return, for functions; a tracepoint's is "t", a USDT probe's "usdt"
        self.place = parse_query("")  # where the query looks (browse_places.parse_query)
        self.found: Found | None = None  # what the place's search found (None: kernel functions)
        self._with_return = True  # what check_action last said of ctrl+r
        self.picked: dict[str, str] = {}  # ref -> fetch type ("" as declared)
        self.expanded: set[str] = set()
        self.busy = False

    def compose(self) -> ComposeResult:
        yield Input(placeholder=QUERY_HINT, id="query")
        yield Static("loading the kernel's functions…", id="count")
        with Horizontal(id="body"):
            yield OptionList(id="matches")
            with Vertical(id="detail"):
                yield Static(id="proto")
                yield Static(id="verdict")
                yield Static(id="notes")
                yield Static(id="kind")
                yield TickList(id="choices")
        yield Input(placeholder="the spec to add: pick a function and tick what to fetch", id="spec")
        yield Static(id="spec-problem")
        yield KtuiFooter()

    def on_mount(self) -> None:
        self.query_one("#query", Input).focus()
        self.query_one("#matches", OptionList).can_focus = True
        whole_cell_scrollbars(self.query_one("#matches", OptionList), self.query_one("#choices", TickList))
        if self.functions is not None:
            self._ready(self.functions)
        else:
            self._load()

    # ------------------------------------------------------------ loading
    @work(thread=True, group="browse-load")
    def _load(self) -> None:
        # The names and their verdicts first (a few files), then the whole
        # catalog (BTF's prototypes: about 20 s in the emulated VM).
        functions = self.index.load(progress=lambda n: self.post_message(self.Counted(n)),
                                    first=lambda quick: self.post_message(self.Ready(quick)))
        self.post_message(self.Ready(functions))

    @on(Counted)
    def _counted(self, message: Counted) -> None:
        if self.functions is None:
            self.query_one("#count", Static).update(f"loading {message.count:,} functions…")

    @on(Ready)
    def _loaded(self, message: Ready) -> None:
        self._ready(message.functions)

    def _ready(self, functions: Functions) -> None:
        if functions.partial and self.functions is not None and not self.functions.partial:
            return  # (the whole index is already here)
        self.functions = functions
        matches = self.query_one("#matches", OptionList)
        shown = matches.highlighted
        name = matches.get_option_at_index(shown).id if shown is not None and matches.option_count else None
        self.search(self.query_one("#query", Input).value, keep=name)

    # ------------------------------------------------------------ searching
    @on(Input.Changed, "#query")
    def _query_changed(self, event: Input.Changed) -> None:
        if self.functions is not None or parse_query(event.value).place != "function":
            self.search(event.value)

    def search(self, query: str, keep: str | None = None) -> None:
        """Rank, show the best rows, highlight the first (or `keep`, the
        function highlighted before, when it is still among them)."""
        self.place = parse_query(query)
        if self.place.place != "function":
            self._search_place(self.place, keep)
            return
        self.found = None
        if self.functions is None:  # (back from a place while the catalog loads)
            self._show_rows([], [], keep, Text("loading the kernel's functions…"))
            return
        found = self.functions.matcher.search(query, DEFAULT_CAP)
        entries = self.functions.entries
        options = []
        for name in found.names:
            verdict = entries[name].verdict
            row = Text(name, no_wrap=True, overflow="ellipsis")
            row.append(f"  {verdict}", VERDICT_STYLE.get(verdict, "red"))
            options.append(Option(row, id=name))
        self._show_rows(options, list(found.names), keep, self._count_line(query, found.total))

    def _search_place(self, place: Query, keep: str | None) -> None:
        """A tracepoint, a file's functions or USDT probes, or the files
        that complete a path being typed."""
        self.found = found = self.index.places.search(place, DEFAULT_CAP)
        options = []
        for r in found.rows:
            row = Text(r.label, no_wrap=True, overflow="ellipsis")
            if r.tag:
                row.append(f"  {r.tag}", TONE_STYLE.get(r.tone, "dim"))
            options.append(Option(row, id=r.id))
        line = Text()
        if found.problem:
            line.append(found.problem, "yellow")
        elif found.paths:
            line.append(f"{found.total:,} in {found.what.removeprefix('files in ')}: enter picks one", "dim")
        elif place.pattern.strip():
            line.append(f"{found.total:,} of {found.of:,} {found.what} match")
            if found.total > DEFAULT_CAP:
                line.append(f" (best {DEFAULT_CAP} shown)")
        else:
            line.append(f"{found.of:,} {found.what}")
        if self.read_only:
            line.append(f" · {self.read_only}", "yellow")
        self._show_rows(options, [r.id for r in found.rows], keep, line)

    def _show_rows(self, options: list[Option], ids: list[str], keep: str | None, count: Text) -> None:
        matches = self.query_one("#matches", OptionList)
        with self.app.batch_update():
            matches.clear_options()
            matches.add_options(options)
            if options:
                matches.highlighted = ids.index(keep) if keep in ids else 0
            else:
                self.show(None)
        self.query_one("#count", Static).update(count)

    def _count_line(self, query: str, total: int) -> Text:
        assert self.functions is not None
        line = Text()
        if not len(self.functions):
            line.append("no functions: " + "; ".join(self.functions.problems))
            return line
        if query.strip():
            line.append(f"{total:,} of {len(self.functions):,} functions match")
            if total > DEFAULT_CAP:
                line.append(f" (best {DEFAULT_CAP} shown)")
        else:
            line.append(f"{len(self.functions):,} functions")
            line.append(" · or type sched/ (tracepoints), /PATH: (a binary), usdt /PATH", "dim")
        if self.functions.partial:
            line.append(" · reading prototypes and parameters from BTF…", "dim")
        if self.functions.btf_problem:
            line.append(f" · {self.functions.btf_problem}", "yellow")
        if self.read_only:
            line.append(f" · {self.read_only}", "yellow")
        return line

    @on(OptionList.OptionHighlighted, "#matches")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        matches = self.query_one("#matches", OptionList)
        if event.option.id is None or matches.highlighted_option is not event.option:
            return  # a highlight of rows replaced since (typing fast): the new rows' own follows
        if self.place.place != "function":
            self.show(self.index.places.detail(self.place, event.option.id))
        elif self.functions is not None:
            self.show(self.functions.detail(event.option.id))

    @on(OptionList.OptionSelected, "#matches")
    def _selected(self) -> None:
        self._to_choices()

    @on(Input.Submitted, "#query")
    def _query_submitted(self) -> None:
        self._to_choices()

    def _to_choices(self) -> None:
        if self.found is not None and self.found.paths:
            self._complete_path()
            return
        choices = self.query_one("#choices", TickList)
        target = choices if choices.option_count else self.query_one("#spec", Input)
        target.focus()

    def _complete_path(self) -> None:
        """A file or folder picked while a path is typed: into the query,
        which then lists the folder, or the file's functions or probes."""
        matches = self.query_one("#matches", OptionList)
        if matches.highlighted is None or not matches.option_count:
            return
        path = matches.get_option_at_index(matches.highlighted).id
        query = self.query_one("#query", Input)
        query.value = completed(self.place, path or "")
        query.cursor_position = len(query.value)
        query.focus()

    def action_move(self, step: int) -> None:
        matches = self.query_one("#matches", OptionList)
        if matches.option_count:
            now = matches.highlighted or 0
            matches.highlighted = max(0, min(matches.option_count - 1, now + step))

    # ------------------------------------------------------------ one function
    def show(self, detail: Detail | PlaceDetail | None) -> None:
        """A new function: its prototype, verdict, and nothing ticked (the
        same function again, as the whole index replaces the first one,
        keeps what was ticked)."""
        if detail is None or self.detail is None or detail.name != self.detail.name:
            self.picked.clear()
            self.expanded.clear()
        self.detail = detail
        with_return = detail is None or "r" in detail.kinds
        if with_return != self._with_return:  # (a refresh recomposes the footer: only on a change)
            self._with_return = with_return
            self.refresh_bindings()
        if isinstance(detail, PlaceDetail):
            self.query_one("#proto", Static).update(Text(detail.title))
            self.query_one("#verdict", Static).update(Text(detail.verdict_line, TONE_STYLE.get(detail.tone, "")))
            self.query_one("#notes", Static).update("\n".join(detail.notes))
            self._rebuild()
            return
        proto = self.query_one("#proto", Static)
        if detail is None:
            proto.update("")
            for name in ("verdict", "notes", "kind"):
                self.query_one(f"#{name}", Static).update("")
            self.query_one("#choices", TickList).clear_options()
            self._set_spec("")
            return
        entry = detail.entry
        missing = ("(…)  (reading its prototype from BTF)" if self.functions is not None and self.functions.partial
                   else "(?)  (no BTF prototype)")
        proto.update(Text(entry.prototype or f"{entry.name}{missing}"))
        self.query_one("#verdict", Static).update(
            Text(detail.verdict_line, VERDICT_STYLE.get(entry.verdict, "red")))
        notes = list(detail.notes) + ([detail.named] if detail.named else [])
        self.query_one("#notes", Static).update("\n".join(notes))
        self._rebuild()

    def _visible(self) -> list[Choice]:
        """The choices in display order: retval (return probes), each
        parameter, and the members of the expanded ones under it."""
        detail = self.detail
        if detail is None:
            return []
        out = []
        if self._kind() == "r" and detail.retval is not None:
            out.append(detail.retval)
        for param in detail.params:
            out.append(param)
            if param.pointee is not None:
                out.append(param.pointee)
            if param.ref in self.expanded and self.functions is not None and isinstance(detail, Detail):
                out.extend(self.functions.members(detail, param))
        return out

    def _kind(self) -> str:
        """The shown one's kind: call or return as picked where it has both
        (a function), else its own (`t`, `usdt`); "" when it cannot be added."""
        kinds = self.detail.kinds if self.detail is not None else ("c", "r")
        return self.kind if self.kind in kinds else (kinds[0] if kinds else "")

    def _rebuild(self) -> None:
        kind = Text("probe at: ")
        now = self._kind()
        if now in ("c", "r"):
            kind.append("● call" if now == "c" else "○ call", "bold" if now == "c" else "dim")
            kind.append("  ")
            kind.append("● return" if now == "r" else "○ return", "bold" if now == "r" else "dim")
            kind.append("   (ctrl+r)", "dim")
        elif now:
            kind.append(KIND_WORDS.get(now, now), "bold")
        else:
            kind = Text("")
        self.query_one("#kind", Static).update(kind)
        choices = self.query_one("#choices", TickList)
        keep = choices.highlighted
        visible = self._visible()
        self.picked = {ref: t for ref, t in self.picked.items() if any(c.ref == ref for c in visible)}
        # Rows that cannot be ticked stay in the cursor's way (locked, not
        # disabled): a user counting rows down to a member must land on it.
        # The register column only where something arrives in one (a
        # tracepoint's fields come by name from the event's record).
        registers = any(c.register for c in visible)
        selections = [Selection(self._prompt(c, registers), c.ref, c.ref in self.picked) for c in visible]
        with self.app.batch_update():
            choices.clear_options()
            choices.set_locked([c.ref for c in visible if not c.tickable])
            choices.add_options(selections)
            enabled = [i for i, c in enumerate(visible) if c.tickable]
            if enabled:  # where the cursor was, else the first that can be ticked
                choices.highlighted = min(keep, len(selections) - 1) if keep is not None else enabled[0]
        self._update_spec()

    def _prompt(self, c: Choice, registers: bool = True) -> Text:
        text = Text("    " * c.depth, no_wrap=True, overflow="ellipsis")
        if c.depth == 0 and registers:
            text.append(f"{c.register or '  '} ", "dim")
        text.append(c.shown)
        if c.expandable:
            text.append("  ▾" if c.ref in self.expanded else "  ▸ →", "dim")
        fetch_type = self.picked.get(c.ref, c.default_type)
        if fetch_type:
            text.append(f"  :{fetch_type}", "cyan")
        if c.why_not:
            text.append(f"  ({c.why_not})", "dim italic")
        return text

    def _choice(self, ref: str) -> Choice | None:
        return next((c for c in self._visible() if c.ref == ref), None)

    @on(TickList.SelectionToggled, "#choices")
    def _toggled(self, event: TickList.SelectionToggled) -> None:
        ref = event.selection.value
        if ref in self.picked:
            del self.picked[ref]
        else:
            c = self._choice(ref)
            self.picked[ref] = c.default_type if c is not None else ""
        self._update_spec()

    @on(TickList.Refused, "#choices")
    def _refused(self, event: TickList.Refused) -> None:
        c = self._choice(event.value)
        why = c.why_not if c is not None else "it cannot be fetched"
        self.query_one("#spec-problem", Static).update(Text(f"{event.value} cannot be ticked: {why}", "yellow"))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """ctrl+r leaves the footer where there is no call or return to pick."""
        if action == "kind" and not self._with_return:
            return False
        return True

    def action_kind(self) -> None:
        if self.detail is not None and "r" not in self.detail.kinds:
            return  # a tracepoint, a USDT probe point: neither call nor return
        self.kind = "r" if self.kind == "c" else "c"
        if self.detail is not None:
            self._rebuild()

    def _highlighted_choice(self) -> Choice | None:
        choices = self.query_one("#choices", TickList)
        if choices.highlighted is None or not choices.option_count:
            return None
        return self._choice(choices.get_option_at_index(choices.highlighted).value)

    def action_expand(self) -> None:
        if self.focused is self.query_one("#matches", OptionList):
            self._to_choices()
            return
        c = self._highlighted_choice()
        if c is not None and c.expandable and c.ref not in self.expanded:
            self.expanded.add(c.ref)
            self._rebuild()

    def action_collapse(self) -> None:
        c = self._highlighted_choice()
        if c is None:
            return
        parent = c.ref.partition("->")[0] if c.depth else c.ref
        if parent in self.expanded:
            self.expanded.discard(parent)
            if c.depth:  # the cursor goes back to the parameter
                visible = [v.ref for v in self._visible()]
                self._rebuild()
                self.query_one("#choices", TickList).highlighted = visible.index(parent)
                return
            self._rebuild()

    def action_text_type(self) -> None:
        """Cycle a char pointer or array through pointer, :string, :ustring
        (ticking it): GCC kernels have no __user tags, so ktui never guesses."""
        c = self._highlighted_choice()
        if c is None or not c.text or not c.tickable:
            return
        cycle = TYPE_CYCLE[1:] if c.default_type else TYPE_CYCLE
        now = self.picked.get(c.ref, c.default_type)
        self.picked[c.ref] = cycle[(cycle.index(now) + 1) % len(cycle)] if now in cycle else cycle[0]
        self._rebuild()

    # ------------------------------------------------------------ the spec
    def _update_spec(self) -> None:
        if self.detail is None:
            return
        kind = self._kind()
        if not kind:  # (an import, a folder: the verdict line says why)
            self._set_spec("")
            return
        order = [c.ref for c in self._visible()]
        picks = [(ref, self.picked[ref]) for ref in order if ref in self.picked]
        self._set_spec(spec_text(self.detail.target, kind, picks))

    def _set_spec(self, text: str) -> None:
        spec = self.query_one("#spec", Input)
        if spec.value != text:
            spec.value = text
        else:
            self._check(text)

    @on(Input.Changed, "#spec")
    def _spec_changed(self, event: Input.Changed) -> None:
        if not self.busy:
            self._check(event.value)

    def _check(self, text: str):
        """The probe the spec line makes, or None with the problem shown."""
        problem = self.query_one("#spec-problem", Static)
        if not text.strip():
            problem.update("")
            return None
        try:
            probe = build_probe(text, "", "", taken=self.taken)
        except FieldProblem as err:
            problem.update(caret_text(text, err.error))
            return None
        problem.update(Text(self.read_only, "yellow") if self.read_only else
                        Text("enter or ctrl+s: add this probe", "dim"))
        return probe

    @on(Input.Submitted, "#spec")
    def _spec_submitted(self) -> None:
        self.action_add()

    def action_add(self) -> None:
        if self.busy:
            return
        spec = self.query_one("#spec", Input).value
        probe = self._check(spec)
        if probe is None:
            if not spec.strip():
                self.query_one("#spec-problem", Static).update("pick a function first")
            return
        if self.read_only:
            self.notify(self.read_only, severity="warning")
            return
        self.busy = True
        self.query_one("#spec-problem", Static).update("working…")
        self.run_worker(self._submit(probe), group="browse-submit", exclusive=True)

    async def _submit(self, probe) -> None:
        try:
            await self._submit_probe(probe)
        except (FeedError, KtuiError) as err:
            log.info("browser add: %s", err)
            self.busy = False
            self.query_one("#spec-problem", Static).update(Text(str(err)))
            return
        self.busy = False
        self.notify(f"added {probe.spec_text}", title="probe added")
        self.app.pop_screen()

    def action_close(self) -> None:
        if not self.busy:
            self.app.pop_screen()
