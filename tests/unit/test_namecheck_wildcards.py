"""`ktui check` on a wildcard (`vfs_*:c`), on a fake kernel: matched
against available_filter_functions as the session matches it; one that
matches nothing is an error with a did-you-mean, one past the caps an
error (kprobe_multi's) or a warning (one perf probe each's)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ktui import cli
from ktui.kernel.symbols import namecheck
from ktui.kernel.symbols.namecheck import FunctionCheck
from tests.fakesysfs import FakeKernel


@pytest.fixture
def fake_check(tmp_path, monkeypatch):
    fk = FakeKernel(tmp_path)
    monkeypatch.setattr(namecheck, "FunctionCheck", lambda: FunctionCheck(fk.sources()))
    return fk


def test_a_pattern_that_matches_is_ok_and_one_that_does_not_is_located(tmp_path, fake_check):
    f = tmp_path / "s.yaml"
    f.write_text("name: w\nprobes:\n  - spec: 'vfs_*:c'\n  - function: 'vsf_*'\n    kind: r\n")
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 1
    assert r.output.splitlines() == [
        f"{f}:4:16: probe 2 (vsf_*:r): vsf_* matches no kernel functions on this kernel (did you mean vfs_*?)",
    ]


def test_the_caps(tmp_path, fake_check, monkeypatch):
    monkeypatch.setattr(namecheck, "WILDCARD_MAX_SINGLE", 1)
    f = tmp_path / "s.yaml"
    f.write_text("name: w\nprobes:\n  - '*_fn:c'\n")  # dup_fn, cold_fn (and mymod_open: no)
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[0] == (
        f"{f}:3:6: warning: probe 1 (*_fn:c): *_fn matches 2 kernel functions, more than the 1 ktui "
        "attaches one by one on this kernel: narrow the pattern; it attaches only where "
        "the kernel has kprobe_multi (5.18+, CONFIG_FPROBE)")
    monkeypatch.setattr(namecheck, "WILDCARD_MAX_MULTI", 1)
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 1
    assert "probe 1 (*_fn:c): *_fn matches 2 kernel functions, more than the 1 ktui attaches" in r.output
