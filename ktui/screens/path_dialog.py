"""Ask for a file path: open a probe set, or write the current one.

Errors (a YAML problem at file:line:col, a permission refused) are shown
under the path and the dialog stays open for another try. Writing over an
existing file asks first, naming what the file is (ConfirmReplace: only
`y` says yes); files that are not probe sets are refused outright."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Awaitable, Callable, Literal

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Input, Label, Static

from ktui.lang.probeset_write import describe_existing, why_not_replace
from ktui.lang.save_place import where_it_lands, why_not_kept
from ktui.screens.confirm import ConfirmReplace
from ktui.screens.dialog import Dialog

# open: submit(path); write: submit(path, replace), replace being the
# user's yes to replacing the file there
SubmitPath = Callable[..., Awaitable[None]]


def path_hint(path: str, mode: Literal["open", "write"]) -> Text:
    """What will happen with `path`, said before Enter is pressed."""
    path = os.path.expanduser(path.strip())
    if not path:
        return Text("a path is needed", "dim")
    exists = os.path.isfile(path)
    if mode == "open":
        return Text("" if exists else "no such file", "dim" if exists else "yellow")
    if os.path.isdir(path):
        return Text("that is a directory", "yellow")
    lost = why_not_kept(path)
    if lost is not None:
        return Text(f"will not be written: {lost}", "red")
    if exists or os.path.lexists(path):
        why = why_not_replace(path)
        if why is not None:
            return Text(f"will not be replaced: {why}", "red")
    if exists:
        return Text("exists: you will be asked before it is replaced", "yellow")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return Text(f"no such folder: {parent}", "red")
    name_max = _name_max(parent)
    if len(os.path.basename(path).encode("utf-8", "surrogateescape")) > name_max:
        return Text(f"the file name is too long (at most {name_max} bytes here)", "red")
    if not os.access(parent, os.W_OK | os.X_OK):
        return Text(f"the folder {parent} is not writable", "red")
    return Text("new file", "dim")


def _name_max(folder: str) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255  # Linux's NAME_MAX


def path_where(path: str, mode: Literal["open", "write"]) -> Text:
    """Where a written file ends up (absolute; in `ktui vm`, whether the
    host keeps it), so a save never lands somewhere unexpected."""
    path = path.strip()
    if mode != "write" or not path:
        return Text("")
    return Text(where_it_lands(path), "dim")


def proposed_write_path(save_path: str | None, default: str) -> str:
    """What the write dialog proposes: the probe set's own file (through a
    symlink, the file it points at), unless a save there would be refused
    (a set shipped with ktui, a recording or any other file that is not a
    probe set, a path the VM does not share); then a file of the same name
    in the current directory, or a new one named after it (a recording's),
    or DEFAULT. So the dialog never opens on a file it would not write (in
    `ktui vm`, the shipped probesets/default.yaml was proposed and Enter
    overwrote it)."""
    def writable(path: str) -> bool:
        return not os.path.isdir(path) and why_not_kept(path) is None and why_not_replace(path) is None

    if not save_path:
        return default
    if writable(save_path):
        return save_path
    if os.path.islink(save_path):
        # a set opened through a link (dotfiles): its file, by its own
        # path, so the dialog shows what is replaced and the link stays
        real = os.path.realpath(save_path)
        if os.path.isfile(real) and writable(real):
            return real
    name = os.path.basename(save_path)
    beside = os.path.join(".", name)
    # (in save_path's own folder `beside` is save_path: not writable either)
    if name.endswith((".yaml", ".yml")) and writable(beside):
        return beside
    # a replay's set comes from a recording (run.ktrec): ./run.yaml, a new
    # file named after it, says more than DEFAULT
    named = os.path.join(".", Path(name).stem + ".yaml")
    if Path(name).stem and not os.path.lexists(named) and writable(named):
        return named
    return default


class PathDialog(Dialog):
    def __init__(self, mode: Literal["open", "write"], submit: SubmitPath, *, value: str = "", title: str = "") -> None:
        super().__init__()
        self.mode = mode
        self._submit_path = submit
        self._value = value
        self._asking = False  # the replace question is up
        self._title = title or ("open probe set" if mode == "open" else "write probe set")

    def compose(self) -> ComposeResult:
        verb = "open (replaces every probe)" if self.mode == "open" else "write"
        with self.frame(self._title):
            yield Label("path of a YAML probe set", classes="field-label")
            yield Input(self._value, placeholder="./probes.yaml", id="path")
            yield Static(id="path-hint", classes="hint")
            yield Static(id="path-where", classes="hint")
            yield Static(id="submit-problem")
            yield self.keys_line(f"enter: {verb}   esc: cancel")

    def on_mount(self) -> None:
        self._show_hint(self._value)
        self.query_one("#path", Input).focus()

    @on(Input.Changed, "#path")
    def _changed(self, event: Input.Changed) -> None:
        if not self.busy:
            self.show_problem("")
        self._show_hint(event.value)

    def _show_hint(self, value: str) -> None:
        self.query_one("#path-hint", Static).update(path_hint(value, self.mode))
        self.query_one("#path-where", Static).update(path_where(value, self.mode))

    @on(Input.Submitted, "#path")
    def _submitted(self, event: Input.Submitted) -> None:
        path = os.path.expanduser(event.value.strip())
        if not path:
            self.show_problem("a path is needed")
            return
        if self.busy or self._asking:
            return  # an Enter typed ahead while the question comes up
        if self.mode == "open":
            self.submit_with(lambda: self._submit_path(path))
            return
        question = None
        if os.path.lexists(path) and not os.path.isdir(path) and why_not_replace(path) is None:
            question = describe_existing(path)
        if question is None:  # a new file, or one the save refuses with the reason
            self.submit_with(lambda: self._submit_path(path, False))
            return

        def answered(yes: bool | None) -> None:
            self._asking = False
            if yes:
                self.submit_with(lambda: self._submit_path(path, True))
            else:
                self.show_problem("not written: the file was kept")

        self._asking = True
        self.app.push_screen(ConfirmReplace(f"{question}.\nReplace it?"), answered)
