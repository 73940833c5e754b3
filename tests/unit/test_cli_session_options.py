"""Every command that opens a session hands it the options it was given.

The commands share probe_options; `ktui export` once called the options'
builder positionally and passed --no-cache where --attach belonged (a
TypeError before any probe: only the VM test saw it)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import ktui.cli as cli
import ktui.dashboard
import ktui.exporter
import ktui.headless

ARGS = ["-e", "vfs_read:c", "--attach", "fentry", "--engine", "generic", "--no-cache", "--cost"]


@pytest.fixture
def captured(monkeypatch):
    got = {}

    def take(*args, **kwargs):
        got["options"] = next(a for a in args if type(a).__name__ == "SessionOptions")
        return 0

    monkeypatch.setattr(cli, "_preflight_or_exit", lambda **_: None)
    monkeypatch.setattr(cli, "_stderr_apart", lambda: None)
    monkeypatch.setattr(ktui.dashboard, "run_live", take)
    monkeypatch.setattr(ktui.headless, "run_stream", take)
    monkeypatch.setattr(ktui.headless, "run_record", take)
    monkeypatch.setattr(ktui.exporter, "run_export", take)
    return got


@pytest.mark.parametrize("command", [["run"], ["stream"], ["record", "-o", "REC"], ["export"]])
def test_session_gets_the_options_given(command, captured, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli.main, command + ARGS)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    options = captured["options"]
    assert (options.attach, options.engine, options.cache, options.timing) == ("fentry", "generic", False, True)
