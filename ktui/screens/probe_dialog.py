"""Add or edit a probe. The spec and filter are parsed as you type, and a
problem is shown compiler-style, the text with a caret under the column,
before anything reaches the kernel."""

from __future__ import annotations

import dataclasses
import logging
from typing import Awaitable, Callable, Collection

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Input, Label, Static

from ktui.lang import chars, limits
from ktui.lang.filters import parse_filter
from ktui.lang.model import Kind, Probe, SpecError
from ktui.lang.spec import parse_spec_clauses, validate_probe
from ktui.screens.browse_model import FunctionIndex
from ktui.screens.probe_check import KernelProblem, ProbeCheck
from ktui.screens.dialog import Dialog
from ktui.screens.spec_suggest import SpecSuggester

log = logging.getLogger(__name__)
SubmitProbe = Callable[[Probe], Awaitable[None]]
FIELDS = ("spec", "filter", "label")


class FieldProblem(Exception):
    """A SpecError and the field it is about (its column counts in that field)."""

    def __init__(self, field: str, error: SpecError) -> None:
        super().__init__(str(error))
        self.field = field
        self.error = error


def caret_text(text: str, err: SpecError) -> Text:
    """`text`, and under it a caret at `err.col` followed by the message."""
    out = Text(no_wrap=True, overflow="ellipsis")
    if err.col is None:
        out.append(err.message, "bold")
        return out
    # A refused character (bidi, zero-width...) shows as U+FFFD, one cell:
    # the caret still lines up and the text cannot reorder itself.
    out.append("".join("\ufffd" if chars.is_refused(c) else c for c in text) + "\n")
    out.append(" " * (err.col - 1) + "^ ", "bold")
    out.append(f"col {err.col}: {err.message}", "bold")
    return out


def dialog_spec(probe: Probe) -> str:
    """The spec field of a probe being edited: its clauses after it (its
    aggregations, its gate, its span's start), so that an edit keeps them."""
    text = probe.spec_text
    if probe.agg is not None:
        text += f" {probe.agg}"
    if probe.within is not None:
        text += f" within({probe.within})"
    if probe.since is not None:
        text += f" since({probe.since.spec_text})"
    return text


def build_probe(
    spec: str, filter_text: str, label: str, *, base: Probe | None = None, taken: Collection[str] = ()
) -> Probe:
    """The probe the three fields describe, or a FieldProblem. `base` is the
    probe being edited (its enabled/sample/rate_limit are kept); `taken` are
    the names of the other probes (names must stay unique in a set)."""
    try:
        probe = parse_spec_clauses(spec)  # aggregations too: `vfs_read:c hist(a3)`
    except SpecError as err:
        raise FieldProblem("spec", err) from None
    expr = None
    if filter_text.strip():
        try:
            expr = parse_filter(filter_text)
        except SpecError as err:
            raise FieldProblem("filter", err) from None
    try:
        _check_label(label)
    except SpecError as err:
        raise FieldProblem("label", err) from None
    if probe.label is not None and label.strip():
        raise FieldProblem("label", SpecError(f'the spec already labels this probe "{probe.label}"; '
                                              "give the label once"))
    keep = {} if base is None else {"enabled": base.enabled, "sample": base.sample, "rate_limit": base.rate_limit,
                                    "attach": base.attach,  # how it enters the kernel stays as the file said
                                    "errno": base.errno if probe.kind is Kind.RETURN else ""}
    probe = dataclasses.replace(probe, filter=expr, label=label.strip() or probe.label, **keep)
    try:
        validate_probe(probe, filter_text=filter_text if expr is not None else None)
    except SpecError as err:
        # validate_probe prefixes filter problems with "filter:"; columns then count in the filter text
        raise FieldProblem("filter" if err.message.startswith("filter") else "spec", err) from None
    if probe.name in taken:
        field = "label" if probe.label else "spec"
        hint = "pick another label" if probe.label else "give this one a label"
        raise FieldProblem(field, SpecError(f'another probe is already called "{probe.name}"; {hint}'))
    return probe


def _check_label(label: str) -> None:
    """The rules a label obeys in a probe set file (what is saved must
    load), with the column counted in the field as typed."""
    chars.refuse(label)
    text = label.strip()
    if text:
        lead = len(label) - len(label.lstrip())
        try:
            limits.check_probe_label(text)
        except SpecError as err:
            raise SpecError(err.message, col=None if err.col is None else err.col + lead) from None


class ProbeDialog(Dialog):
    """`submit(probe)` adds it (or replaces the edited one); a FeedError it
    raises is shown here and the dialog stays open."""

    # The box's first line is its first field's (no blank line above it): the
    # filter's two hint lines then fit at 80x24 with every field whole.
    DEFAULT_CSS = """
    ProbeDialog #spec-label { margin-top: 0; }
    """

    def __init__(self, submit: SubmitProbe, *, probe: Probe | None = None, taken: Collection[str] = (),
                 functions: FunctionIndex | None = None, check: ProbeCheck | None = None) -> None:
        """functions: complete function and parameter names from these (none: no completion);
        check: ask the running kernel about a probe that parses (function, names), off the UI thread."""
        super().__init__()
        self.functions = functions
        self.check = check
        self.kernel_problem: KernelProblem | None = None  # the kernel's word on the fields as they are
        self._submit_probe = submit
        self.editing = probe
        self.taken = frozenset(taken)
        self.probe: Probe | None = None  # the last valid parse

    def compose(self) -> ComposeResult:
        p = self.editing
        with self.frame(f"edit probe {p.name}" if p is not None else "add probe"):
            yield Label("spec", classes="field-label", id="spec-label")
            yield Label("TARGET:KIND[:FETCH,...]   e.g. vfs_read:r:ret=retval,count=a3:u64", classes="hint")
            suggester = SpecSuggester(self.functions) if self.functions is not None else None
            yield Input(dialog_spec(p) if p else "", placeholder="vfs_read:c:a3", id="spec", suggester=suggester)
            yield Static(id="spec-problem", classes="problem")
            yield Label("filter (optional)", classes="field-label")
            # two short lines: one long line was cut at 80 columns before its names
            yield Label('e.g. comm == "dd" && a3 > 4096   or   latency > 10ms', classes="hint")
            yield Label("names: a1..a6 retval comm pid tid cpu cgroup latency, a fetch's label", classes="hint")
            yield Input(str(p.filter) if p and p.filter else "", placeholder="no filter", id="filter")
            yield Static(id="filter-problem", classes="problem")
            yield Label("label (optional)", classes="field-label")
            yield Input((p.label or "") if p else "", placeholder="the name shown in the table", id="label")
            yield Static(id="label-problem", classes="problem")
            yield Static(id="submit-problem")
            yield self.keys_line(f"enter: {'save' if p else 'add'}   tab: next field   esc: cancel")

    def on_mount(self) -> None:
        self.validate()
        self.query_one("#spec", Input).focus()

    def validate(self) -> Probe | None:
        """Parse the fields; show the problem under the field it is about."""
        values = {name: self.query_one(f"#{name}", Input).value for name in FIELDS}
        problems = dict.fromkeys(FIELDS, Text())
        try:
            self.probe = build_probe(
                values["spec"], values["filter"], values["label"], base=self.editing, taken=self.taken
            )
        except FieldProblem as problem:
            self.probe = None
            if problem.field == "spec" and not values["spec"].strip():
                problems["spec"] = Text("a spec is needed: TARGET:KIND, e.g. vfs_read:c", "dim")
            else:
                problems[problem.field] = caret_text(values[problem.field], problem.error)
        for name, text in problems.items():
            self.query_one(f"#{name}-problem", Static).update(text)
            self.query_one(f"#{name}", Input).set_class(bool(text.plain) and bool(values["spec"].strip()), "-invalid")
        self.kernel_problem = None
        if self.probe is not None and self.check is not None:
            self._ask_kernel(self.probe, values)
        return self.probe

    def _ask_kernel(self, probe: Probe, values: dict[str, str]) -> None:
        check = self.check
        assert check is not None

        def ask() -> None:
            try:
                found = check.problem(probe, values["spec"])
            except Exception:  # the kernel's answer is advice: the session checks again on add
                log.exception("kernel check of %s", probe.spec_text)
                return
            self.app.call_from_thread(self._kernel_answered, values, found)

        self.run_worker(ask, thread=True, exclusive=True, group="kernel-check")

    def _kernel_answered(self, values: dict[str, str], found: KernelProblem | None) -> None:
        if not self.is_mounted or values != {name: self.query_one(f"#{name}", Input).value for name in FIELDS}:
            return  # typed on since: that text has its own check coming
        self.kernel_problem = found
        if found is None:
            return
        text = caret_text(values[found.field], found.error)
        if not found.fatal:
            text.stylize("dim")
        self.query_one(f"#{found.field}-problem", Static).update(text)
        self.query_one(f"#{found.field}", Input).set_class(found.fatal, "-invalid")

    @on(Input.Changed)
    def _changed(self) -> None:
        if not self.busy:
            self.show_problem("")
        self.validate()

    @on(Input.Submitted)
    def _submitted(self) -> None:
        probe = self.probe if self.kernel_problem is not None else self.validate()
        if probe is None or (self.kernel_problem is not None and self.kernel_problem.fatal):
            self.show_problem("fix the problem above first")
            return
        self.submit_with(lambda: self._submit_probe(probe))
