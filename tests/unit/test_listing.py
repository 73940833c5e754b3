"""`ktui list` output on a fake kernel: lines, JSON, exit codes, and every
message it can print."""

from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner

from ktui import cli
from ktui.kernel.symbols.catalog_text import VERDICT_WIDTH, entry_line, entry_lines, fit
from ktui.listing import run_list
from tests.fakesysfs import FakeKernel


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def fk(tmp_path):
    return FakeKernel(tmp_path)


KERNEL = "ktui: functions of the running kernel, 6.1.0-test\n"  # the first line on stderr


def listing(fk, patterns, **kw):
    out, err = kw.pop("out", io.StringIO()), io.StringIO()
    kw.setdefault("release", "6.1.0-test")
    code = run_list(patterns, catalog=kw.pop("catalog", None) or fk.catalog(), out=out, err=err, **kw)
    return code, out.getvalue(), err.getvalue()


def test_one_line_per_function_verdict_first(fk):
    code, out, err = listing(fk, ["vfs_read", "mymod_*", "zstd_build*", "xfs:xfs_file_*"])
    assert code == 0
    assert out.splitlines() == [
        "notrace     mymod:mymod_helper(void) -> void",
        "traceable   mymod:mymod_open(struct file *file) -> int",
        "traceable   vfs_read(struct file *file, char *buf, size_t count, loff_t *pos) -> ssize_t",
        "not-loaded  xfs:xfs_file_read_iter(struct kiocb *iocb) -> ssize_t  # module not loaded",
        "copy-only   zstd_build(int x) -> int  # no symbol of its own; probe a copy: zstd_build.isra.0",
        "traceable   zstd_build.isra.0(int x) -> int  # copy of zstd_build: BTF shows its "
        "arguments; positional fetches only",
    ]
    assert err == KERNEL + "ktui: 6 functions: 3 traceable, 1 notrace, 1 copy-only, 1 not-loaded\n"


def test_lines_are_cut_to_a_terminal_but_not_to_a_pipe(fk, monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "get_terminal_size", lambda *a: __import__("os").terminal_size((40, 24)))
    _code, out, _err = listing(fk, ["vfs_read"], out=Tty())
    assert out == "traceable   vfs_read(struct file *fil...\n" and len(out) == 41
    _code, out, _err = listing(fk, ["vfs_read"], out=Tty(), wide=True)
    assert out.startswith("traceable   vfs_read(") and out.endswith("-> ssize_t\n")
    _code, out, _err = listing(fk, ["vfs_read"])
    assert out.endswith("-> ssize_t\n")


def test_the_verdict_column_fits_eighty_columns(fk):
    _code, out, _err = listing(fk, ["*"], out=Tty())
    assert VERDICT_WIDTH == 11
    for line in out.splitlines():
        assert line[VERDICT_WIDTH] == " " and line[:VERDICT_WIDTH].strip() in (
            "traceable", "notrace", "kprobe-only", "blacklisted", "copy-only", "no-symbol",
            "not-loaded")


def test_json_for_scripts(fk):
    code, out, err = listing(fk, ["vfs_read", "zstd_build.isra.0", "mymod_open"], as_json=True)
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["version"] == 1 and doc["btf"] is True and doc["not_checked"] == []
    by = {f["name"]: f for f in doc["functions"]}
    assert by["vfs_read"] == {"name": "vfs_read", "verdict": "traceable", "module": None,
                              "prototype": "vfs_read(struct file *file, char *buf, size_t count, "
                                           "loff_t *pos) -> ssize_t",
                              "copy_of": None, "note": None, "symbols": 1}
    assert by["zstd_build.isra.0"]["copy_of"] == "zstd_build"
    assert by["mymod_open"]["module"] == "mymod"


def test_json_says_what_was_not_checked(fk):
    fk.filter_functions.unlink()
    (fk.btf_dir / "vmlinux").unlink()
    _code, out, _err = listing(fk, ["vfs_read"], as_json=True)
    doc = json.loads(out)
    assert doc["btf"] is False and len(doc["not_checked"]) == 2
    assert doc["functions"][0]["verdict"] == "unchecked" and doc["functions"][0]["prototype"] is None


def test_no_btf_is_one_line_and_names_still_listed(fk):
    (fk.btf_dir / "vmlinux").unlink()
    code, out, err = listing(fk, ["vfs_read"])
    assert code == 0 and out == "traceable   vfs_read\n"
    lines = err.splitlines()
    assert len(lines) == 3 and lines[1].startswith("ktui: no BTF: ") and lines[2] == "ktui: 1 function: 1 traceable"


def test_nothing_matching_is_exit_1_with_close_names(fk):
    assert listing(fk, ["vfs_raed"]) == (1, "", KERNEL + "ktui: no kernel function 'vfs_raed' (did you mean vfs_read?)\n")
    assert listing(fk, ["zzz*", "yyy"]) == (1, "", KERNEL + "ktui: no kernel function matches 'zzz*', 'yyy'\n")
    assert listing(fk, ["xsf:*"])[0] == 1


def test_a_pattern_that_matches_nothing_is_said_beside_those_that_do(fk):
    """Issue #29: `ktui list vfs_read vfs_raed` listed vfs_read, dropped the
    typo silently and exited 0."""
    code, out, err = listing(fk, ["vfs_read", "vfs_raed", "zzz*", "mymod_*"])
    assert code == 1
    assert [line.split()[1].split("(")[0] for line in out.splitlines()] == [
        "mymod:mymod_helper", "mymod:mymod_open", "vfs_read"]
    assert err.splitlines()[-3:] == ["ktui: no kernel function 'vfs_raed' (did you mean vfs_read?)",
                                     "ktui: no kernel function matches 'zzz*'",
                                     "ktui: 3 functions: 2 traceable, 1 notrace"]
    # an unloaded module's function is known by name: not a typo
    assert listing(fk, ["vfs_read", "tcp_vegas_init"])[0] == 0


def test_the_first_line_says_which_kernel_is_listed(fk):
    """Issue #29: on the host, `ktui list` listed the host's kernel without
    saying so, while `ktui vm` runs another."""
    _code, _out, err = listing(fk, ["vfs_read"], release="6.18.4-host", vm_kernel="6.1.0-57-amd64")
    assert err.splitlines()[0] == ("ktui: functions of the running kernel, 6.18.4-host (ktui vm runs "
                                   "6.1.0-57-amd64: `ktui vm list PATTERN` lists its functions)")
    _code, _out, err = listing(fk, ["vfs_read"], release="6.1.0-57-amd64", vm_kernel="6.1.0-57-amd64")
    assert err.splitlines()[0] == "ktui: functions of the running kernel, 6.1.0-57-amd64"


def test_what_was_not_checked_reads_as_a_sentence(fk):
    """Issue #29: the first stderr line was `not checked: fentry, so
    kprobe-only vs traceable (available_filter_functions: not found
    (tracefs not mounted?))`: hard to parse."""
    fk.filter_functions.unlink()
    _code, _out, err = listing(fk, ["vfs_read"])
    assert err.splitlines()[1] == (
        "ktui: not checked: which functions fentry can attach to (available_filter_functions not "
        "found: is tracefs mounted?); verdicts say unchecked, not traceable or kprobe-only")


@pytest.mark.parametrize("args, code, message", [
    (["list", ""], 2, "ktui: an empty pattern matches nothing; use '*' for every function\n"),
    (["list", "xfs:"], 2, "ktui: 'xfs:': expected MODULE:PATTERN, e.g. xfs:xfs_file_*\n"),
    (["list", "vfs_\u202eread"], 2, "ktui: pattern 5: U+202E RIGHT-TO-LEFT OVERRIDE is not allowed in a "
                                   "pattern (no control, invisible or text-direction characters)\n"),
    (["list", "vfs_\x1bread"], 2, "ktui: pattern 5: U+001B ESCAPE (a control character) is not allowed "
                                 "in a pattern (no control, invisible or text-direction characters)\n"),
])
def test_bad_patterns_on_the_command_line_are_one_line_exit_2(fk, monkeypatch, args, code, message):
    import ktui.listing as listing_mod

    real = listing_mod.run_list
    monkeypatch.setattr(listing_mod, "run_list", lambda p, **kw: real(p, catalog=fk.catalog(), **kw))
    r = CliRunner().invoke(cli.main, args)
    assert r.exit_code == code
    assert r.output == message  # the runner mixes stderr in


def test_entry_line_and_the_fast_lines_agree(fk):
    entries = fk.catalog().list(["*", "xfs:*"])
    assert entry_lines(entries) == "".join(entry_line(e) + "\n" for e in entries)
    assert entry_lines(entries, 30) == "".join(fit(entry_line(e), 30) + "\n" for e in entries)
    assert entry_lines([]) == ""


@pytest.mark.parametrize("change", ["none", "no filter list", "no config", "allowed by config",
                                    "no btf", "no blacklist"])
def test_the_bulk_text_says_what_the_entries_say(fk, change):
    """Catalog.text() computes in bulk what list() computes name by name."""
    from collections import Counter

    if change == "no filter list":
        fk.filter_functions.unlink()
    elif change == "no config":
        fk.config.unlink()
    elif change == "allowed by config":
        fk.config.write_text("CONFIG_KPROBES_ON_FTRACE=y\nCONFIG_KPROBE_EVENTS_ON_NOTRACE=y\n")
    elif change == "no btf":
        (fk.btf_dir / "vmlinux").unlink()
    elif change == "no blacklist":
        fk.blacklist.unlink()
    for patterns in (["*"], ["*_fn", "vfs_*"], ["zstd*"], ["nothing*"]):
        lines, counts = fk.catalog().text(patterns)
        entries = fk.catalog().list(patterns)
        assert lines == [entry_line(e) for e in entries]
        assert counts == Counter(e.verdict for e in entries)
    assert fk.catalog().text(["xfs:*"]) is None and fk.catalog().text(["tcp_vegas_init"]) is None


def test_the_bulk_text_says_what_the_entries_say_on_this_machine():
    """The same on this machine's own kernel (BTF, kallsyms, modules: what
    is readable here), where the numbers are real."""
    from collections import Counter

    from ktui.kernel.symbols.catalog import Catalog, Sources
    from ktui.btf.index import KernelBtf

    cat = Catalog(Sources(btf=KernelBtf()))
    lines, counts = cat.text(["*"])
    entries = cat.list(["*"])
    if len(entries) < 1000:
        pytest.skip("this machine lists few kernel functions")
    assert lines == [entry_line(e) for e in entries]
    assert counts == Counter(e.verdict for e in entries)
