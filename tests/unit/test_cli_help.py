"""Issue 15: every option of every command says what it does in --help
(`replay --refresh` and `--log` had no help text)."""

from __future__ import annotations

import click

from ktui.cli import main


def walk(command: click.Command, path: str = "ktui"):
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from walk(sub, f"{path} {name}")


def test_every_option_has_help_text():
    missing = [
        f"{path} {'/'.join(param.opts)}"
        for path, command in walk(main)
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden and not (param.help or "").strip()
    ]
    assert not missing, missing


def test_every_command_has_a_summary():
    missing = [path for path, command in walk(main) if path != "ktui" and not (command.help or command.short_help)]
    assert not missing, missing


def test_shell_completion_offers_the_commands():
    """docs/dashboard.md documents click's completion. Every word went to the
    dashboard's probe-set files (`ktui rep<TAB>` offered files, never
    `replay`): the default command swallowed the command names."""
    from click.shell_completion import BashComplete

    from ktui.cli import main

    def complete(args, incomplete):
        comp = BashComplete(main, {}, "ktui", "_KTUI_COMPLETE")
        return [(c.type, c.value) for c in comp.get_completions(args, incomplete)]

    assert ("plain", "replay") in complete([], "rep")
    assert {v for t, v in complete([], "") if t == "plain"} >= {"run", "replay", "record", "stream", "check"}
    assert complete([], "probesets/vf") == [("file", "probesets/vf")]  # the dashboard's files still
    assert ("plain", "--speed") in complete(["replay"], "--sp")
    assert complete(["replay"], "x") == [("file", "x")]


def test_stream_help_says_what_aggregations_are_and_where_they_go():
    """Issue #29: `stream --help` never mentioned aggregations."""
    from click.testing import CliRunner

    out = CliRunner().invoke(main, ["stream", "--help"]).output
    flat = " ".join(out.split())
    assert "count(comm) sum(retval)" in flat and "hist(a3)" in flat
    assert "stats lines" in flat and "top_values" in flat
    assert "AGGREGATIONS" in flat  # the -e option's form names them
