"""What each probe runs on (ProbeStatus.via), shown in the probe table,
the NDJSON stats and summary and the stderr summary; `attach: fentry` where
it cannot be had fails the probe with the reason (issue 13)."""

from __future__ import annotations

import io
import json

from ktui.headless import _print_summary
from ktui.kernel.session import Session, SessionOptions
from ktui.lang.probeset import loads_probeset
from ktui.pipeline.ndjson import NdjsonSink, summary_of
from ktui.record.feed import ProbeState, ProbeStatus
from ktui.widgets.probe_table import ProbeLine, row_cells
from ktui.lang.spec import parse_spec
from tests.fakekernel import FakeLoader

SET = """
name: v
probes:
  - spec: c=vfs_read:c:a3
  - spec: r=vfs_read:r:retval
  - spec: f=vfs_write:c
    attach: fentry
"""


def open_session():
    return Session(loads_probeset(SET), SessionOptions(log_path=None), loader=FakeLoader())


def test_compiled_probes_go_by_kprobe_and_forced_fentry_fails_with_the_reason():
    with open_session() as s:
        by_name = {st.probe.name: st for st in s.statuses().values()}
        assert (by_name["c"].via, by_name["r"].via) == ("kprobe", "kretprobe")
        failed = by_name["f"]
        assert failed.state is ProbeState.FAILED and failed.via == ""
        assert failed.reason == "attach: fentry: fentry goes through the generic engine, and this probe is compiled"
        # switched on again: still refused, never a kprobe behind the user's back
        again = s.set_enabled_now(failed.probe_id, True)
        assert again.state is ProbeState.FAILED and again.reason == failed.reason


def test_ndjson_and_stderr_summary_say_via(capsys):
    with open_session() as s:
        out = io.StringIO()
        sink = NdjsonSink(out, s)
        s.drain()
        stats = s.stats()
        sink.on_stats(stats)
        line = json.loads(out.getvalue())
        vias = {p["probe"]: p["via"] for p in line["probes"]}
        assert vias["c"] == "kprobe" and vias["r"] == "kretprobe"
        summary = summary_of(s, stats, 0)
        assert {p["probe"]: p["via"] for p in summary["probes"]}["r"] == "kretprobe"
        _print_summary(summary)
    err = capsys.readouterr().err
    assert "ktui:   c: hits" in err and ", via" not in err  # kprobes: the line as before
    fexit = dict(summary["probes"][1], via="fexit")
    _print_summary({"events": 0, "probes": [fexit]})
    assert capsys.readouterr().err.splitlines()[-1].endswith(", via fexit")


def test_probe_table_names_fentry_and_fexit_beside_the_state():
    probe = parse_spec("vfs_read:r:retval")
    def state(via):
        return row_cells(ProbeLine(ProbeStatus(0, probe, ProbeState.ATTACHED, via=via)))[3].plain
    assert state("fexit") == "attached fexit"
    assert state("fentry") == "attached fentry"
    assert state("kretprobe") == "attached"  # the default says nothing more
    loading = row_cells(ProbeLine(ProbeStatus(0, probe, ProbeState.LOADING, via="fexit")))[3].plain
    assert loading == "loading fexit"


def test_attach_option_reaches_the_session_and_is_checked():
    from click.testing import CliRunner

    from ktui.cli import _session_options, main

    assert _session_options("auto", 2048, None, attach="kprobe").attach == "kprobe"
    assert _session_options("auto", 2048, None).attach == "auto"  # the default: fentry where it can be had
    from ktui.kernel.session import SessionOptions

    assert SessionOptions().attach == "auto"
    result = CliRunner().invoke(main, ["stream", "-e", "vfs_read:c", "--attach", "fexit"])
    assert result.exit_code == 2 and "--attach" in result.output


def test_a_files_attach_reaches_the_session(tmp_path):
    from ktui.cli import _inputs_or_exit

    one = tmp_path / "one.yaml"
    one.write_text("name: one\nattach: fentry\nprobes:\n  - vfs_read:c\n")
    two = tmp_path / "two.yaml"
    two.write_text("name: two\nprobes:\n  - vfs_write:c\n")
    assert _inputs_or_exit((str(one),), ()).attach == "fentry"
    both = _inputs_or_exit((str(one), str(two)), ())
    assert [p.attach for p in both.probes] == ["fentry", ""]
