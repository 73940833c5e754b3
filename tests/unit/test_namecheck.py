"""`ktui check` against the running kernel's functions, on a fake kernel:
every message, its file:line:col, and "not checked" where kallsyms is not."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ktui import cli
from ktui.kernel.symbols import namecheck
from ktui.kernel.symbols.namecheck import FunctionCheck
from ktui.lang.locate import target_positions
from tests.fakesysfs import FakeKernel

SET = """\
name: names
probes:
  - vfs_read:c:a3
  - spec: vfs_raed:c:a3
  - function: zstd_build
    kind: return
  - "  do_int3:c"
  - spec: tcp_vegas_init:c
  - inlined_fn:c
  - address: 0xffffffff81000000
  - nothing_at_all_like_it:c
"""


@pytest.fixture
def fk(tmp_path):
    return FakeKernel(tmp_path)


@pytest.fixture
def fake_check(fk, monkeypatch):
    """`ktui check` run in-process against the fake kernel."""
    monkeypatch.setattr(namecheck, "FunctionCheck", lambda: FunctionCheck(fk.sources()))
    return fk


def test_positions_of_each_target(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(SET)
    assert target_positions(f) == [(3, 5), (4, 11), (5, 15), (7, 8), (8, 11), (9, 5), (10, 14), (11, 5)]


def test_every_problem_has_its_message(fk):
    check = FunctionCheck(fk.sources())
    assert check.problem("vfs_read") is None
    assert check.problem("notrace_fn") == (
        "notrace_fn is notrace (not in available_filter_functions): this kernel's kprobe events "
        "refuse it (CONFIG_KPROBE_EVENTS_ON_NOTRACE is off)", True)
    assert check.problem("cold_fn.cold") is None  # a copy whose original is traced
    assert check.problem("mymod_open") is None
    assert check.problem("zstd_build.isra.0") is None  # the copy itself is probe-able
    assert check.problem("vfs_raed") == (
        "unknown kernel function 'vfs_raed' (did you mean vfs_read?)", True)
    assert check.problem("do_int3") == (
        "do_int3 is on the kernel's kprobe blacklist: it cannot be probed", True)
    assert check.problem("zstd_build") == (
        "zstd_build has no symbol of its own, only compiler copies (zstd_build.isra.0): "
        "probe a copy, with positional fetches", True)
    assert check.problem("inlined_fn") == (
        "inlined_fn has no symbol: it was inlined into its callers, or is init code already "
        "freed; nothing to probe", True)
    assert check.problem("tcp_vegas_init") == (
        "tcp_vegas_init is in module tcp_vegas, which is not loaded (modprobe tcp_vegas before "
        "running this set)", False)
    assert check.problem("nothing_at_all_like_it") == (
        "unknown kernel function 'nothing_at_all_like_it'", True)
    assert check.unchecked() is None


def test_notrace_is_only_a_warning_without_a_kernel_config_and_fine_where_allowed(fk):
    fk.config.unlink()
    problem = FunctionCheck(fk.sources()).problem("notrace_fn")
    assert problem == ("notrace_fn is notrace (not in available_filter_functions): this kernel's "
                       "kprobe events refuse it (unless the kernel has "
                       "CONFIG_KPROBE_EVENTS_ON_NOTRACE=y; its config is unreadable)", False)
    fk.config.write_text("CONFIG_KPROBES_ON_FTRACE=y\nCONFIG_KPROBE_EVENTS_ON_NOTRACE=y\n")
    assert FunctionCheck(fk.sources()).problem("notrace_fn") is None


def test_check_prints_each_problem_at_its_place(tmp_path, fake_check):
    f = tmp_path / "s.yaml"
    f.write_text(SET)
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 1
    assert r.output.splitlines() == [
        f"{f}:4:11: probe 2 (vfs_raed:c:a3): unknown kernel function 'vfs_raed' (did you mean vfs_read?)",
        f"{f}:5:15: probe 3 (zstd_build:r): zstd_build has no symbol of its own, only compiler "
        "copies (zstd_build.isra.0): probe a copy, with positional fetches",
        f"{f}:7:8: probe 4 (do_int3:c): do_int3 is on the kernel's kprobe blacklist: it cannot be probed",
        f"{f}:8:11: warning: probe 5 (tcp_vegas_init:c): tcp_vegas_init is in module tcp_vegas, "
        "which is not loaded (modprobe tcp_vegas before running this set)",
        f"{f}:9:5: probe 6 (inlined_fn:c): inlined_fn has no symbol: it was inlined into its "
        "callers, or is init code already freed; nothing to probe",
        f"{f}:11:5: probe 8 (nothing_at_all_like_it:c): unknown kernel function 'nothing_at_all_like_it'",
    ]


def test_a_module_not_loaded_is_only_a_warning(tmp_path, fake_check):
    f = tmp_path / "s.yaml"
    f.write_text("name: m\nprobes:\n  - tcp_vegas_init:c\n  - vfs_read:c\n")
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 0
    assert r.output.splitlines()[1] == f"{f}: ok (2 probes)"
    assert "warning: probe 1" in r.output.splitlines()[0]


def test_syntax_only_does_not_look_at_the_kernel(tmp_path, fake_check):
    f = tmp_path / "s.yaml"
    f.write_text(SET)
    r = CliRunner().invoke(cli.main, ["check", "--syntax-only", str(f)])
    assert r.exit_code == 0 and r.output == f"{f}: ok (8 probes)\n"


def test_without_kallsyms_check_says_what_it_did_not_check(tmp_path, fake_check):
    fake_check.kallsyms.unlink()
    f = tmp_path / "s.yaml"
    f.write_text(SET)
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 0
    assert r.output == (f"{f}: ok (8 probes; function names not checked: "
                        f"{fake_check.kallsyms}: No such file or directory)\n")


def test_a_typo_on_this_machine_is_caught_if_it_has_kallsyms(tmp_path):
    """The real thing, where /proc/kallsyms lists vfs_read (any Linux with
    CONFIG_KALLSYMS): the bug this check was made for."""
    from ktui.kernel.symbols.ksyms import KernelSymbols

    if not KernelSymbols().exists("vfs_read"):
        pytest.skip("this machine's /proc/kallsyms has no vfs_read")
    f = tmp_path / "typo.yaml"
    f.write_text("name: t\nprobes:\n  - vfs_raed:c:size=a3\n")
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 1
    assert r.output.startswith(f"{f}:3:5: probe 1 (vfs_raed:c:size=a3): unknown kernel function "
                               "'vfs_raed' (did you mean vfs_read")


def test_check_reports_a_misspelt_function_beside_other_errors_in_the_set(tmp_path, fake_check, monkeypatch):
    """Issue #29: a set with `vfs_raed:c:a3`, `vfs_read:c:cuont` and a filter
    `sise > 4096` got the two name errors and not the misspelt function
    (reported only when checked alone). `ktui check` prints every error,
    in file order, and the function's once, even where binding says it too."""
    from ktui.lang.kernel_names import KernelNames

    monkeypatch.setattr(cli, "_kernel_names", lambda: KernelNames(fake_check.btf()))
    f = tmp_path / "s.yaml"
    f.write_text("name: t\nprobes:\n"
                 "  - spec: vfs_raed:c:a3\n"
                 "  - spec: vfs_read:c:cuont\n"
                 "  - spec: vfs_read:c:a3\n"
                 "    label: big\n"
                 "    filter: sise > 4096\n"
                 "  - spec: rd=vfs_raed:c:count\n"
                 "  - spec: zstd_build:c:a1\n"
                 "    sample: 0\n")
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [
        f"{f}:3:11", f"{f}:4:22", f"{f}:7:13", f"{f}:8:14", f"{f}:9:11", f"{f}:10:13"], lines
    assert lines[0].endswith("probe 1 (vfs_raed:c:a3): unknown kernel function 'vfs_raed' "
                             "(did you mean vfs_read?)"), lines[0]
    assert "no parameter 'cuont'" in lines[1] and "no parameter 'sise'" in lines[2]
    assert "unknown kernel function 'vfs_raed'" in lines[3]  # once: binding said it first
    assert "zstd_build has no symbol of its own" in lines[4] and "sample" in lines[5]


def test_check_asks_the_kernel_for_a_gates_function_too(tmp_path, fake_check):
    """`within(FUNC)`: a gate on a function the kernel lacks fails where the
    probe attaches, so `ktui check` says so first, at the probe's target."""
    f = tmp_path / "g.yaml"
    f.write_text("name: g\nprobes:\n  - spec: vfs_read:c within(vfs_raed)\n"
                 "  - spec: vfs_read:r\n    within: vfs_read\n")
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 1
    assert r.output.splitlines() == [
        f"{f}:3:11: probe 1 (vfs_read:c): within vfs_raed: unknown kernel function 'vfs_raed' "
        "(did you mean vfs_read?)"]


def test_check_asks_the_kernel_for_a_spans_start_function_too(tmp_path, fake_check):
    """`since(START)`: a start on a function the kernel lacks fails where the
    span attaches, so `ktui check` says so first, at the probe's target."""
    f = tmp_path / "s.yaml"
    f.write_text("name: s\nprobes:\n  - spec: vfs_read:c since(vfs_raed:c)\n"
                 "  - spec: vfs_read:r\n    since: vfs_read:c\n")
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 1
    assert r.output.splitlines() == [
        f"{f}:3:11: probe 1 (vfs_read:c): since vfs_raed:c: unknown kernel function 'vfs_raed' "
        "(did you mean vfs_read?)"]


def test_check_asks_the_kernel_for_each_function_end_of_a_gate_between_two_events(tmp_path, fake_check):
    """`within(START .. END)`: an end on a function the kernel lacks fails
    where the gate attaches, so `ktui check` says so first, at the probe's
    target (a tracepoint end is bound as the probe it is)."""
    f = tmp_path / "g.yaml"
    f.write_text("name: g\nprobes:\n  - spec: vfs_read:c within(vfs_raed:c .. vfs_read:r)\n"
                 "  - spec: vfs_read:r\n    within: {from: vfs_read:c, to: vfs_raed:r}\n")
    r = CliRunner().invoke(cli.main, ["check", str(f)])
    assert r.exit_code == 1
    assert r.output.splitlines() == [
        f"{f}:3:11: probe 1 (vfs_read:c): within vfs_raed:c .. vfs_read:r: unknown kernel function 'vfs_raed' "
        "(did you mean vfs_read?)",
        f"{f}:4:11: probe 2 (vfs_read:r): within vfs_read:c .. vfs_raed:r: unknown kernel function 'vfs_raed' "
        "(did you mean vfs_read?)"]
