"""Binding a tracepoint probe's names to its record's fields (`lang.bind`,
`lang.bind_fields`): each kind of field's exact expression and type, filter
and aggregation names, the refusals, and a recording's round trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktui.lang.bind import bind_probe, fetch_types, with_fetch_types
from ktui.lang.kernel_names import KernelNames
from ktui.lang.model import Binding, DataLoc, Deref, Named, Record, SpecError, positional
from ktui.lang.probeset import load_probeset, loads_probeset
from ktui.lang.probeset_write import dumps_probeset
from ktui.lang.spec import parse_probe_text
from ktui.lang.tracepoints import sys_enter_user_string_note
from tests.unit.tracefs import DATA, KERNELS, FormatsKernel, tracefs
REPO = Path(__file__).resolve().parents[2]

OPENAT = "syscalls/sys_enter_openat"


def bind(text: str, kernel: str = "6.12"):
    return bind_probe(parse_probe_text(text), FormatsKernel(kernel), text=text)


def bind_error(text: str, kernel: str = "6.12") -> SpecError:
    with pytest.raises(SpecError) as info:
        bind(text, kernel)
    assert "\n" not in str(info.value)
    return info.value


def read(probe) -> list[tuple[str, str, str | None]]:
    return [(str(positional(f.expr)), f.effective_type, f.ctype) for f in probe.fetches]


# ---------------------------------------------------------------- each kind of field


@pytest.mark.parametrize("kernel", KERNELS)
def test_syscall_arguments_keep_their_c_types_width(kernel):
    # every argument of a sys_enter record is 8 bytes: int dfd must read -100 (AT_FDCWD)
    probe = bind(f"{OPENAT}:t:dfd,flags,mode,__syscall_nr", kernel)
    assert read(probe) == [("+16(record)", "s32", "int"), ("+32(record)", "s32", "int"),
                           ("+40(record)", "u64", "umode_t"), ("+8(record)", "s32", "int")]
    assert read(bind("syscalls/sys_enter_read:t:fd,count", kernel)) == [
        ("+16(record)", "u32", "unsigned int"), ("+32(record)", "u64", "size_t")]
    assert read(bind("syscalls/sys_exit_read:t:ret", kernel)) == [("+16(record)", "s64", "long")]


def test_the_binding_itself():
    fetch = bind(f"{OPENAT}:t:dfd").fetches[0]
    assert fetch.expr == Named("dfd")
    assert fetch.expr.binding == Binding(Deref(16, Record()), "s32", "int")


def test_a_user_string_reads_through_the_pointer():
    probe = bind(f"{OPENAT}:t:filename:ustring,name=filename:string,filename2=filename")
    assert read(probe) == [("+0(+24(record))", "ustring", "const char *"),
                           ("+0(+24(record))", "string", "const char *"),
                           ("+24(record)", "x64", "const char *")]  # untyped: the address


def test_inline_and_dynamic_char_arrays_are_text_in_the_record():
    assert read(bind("sched/sched_switch:t:prev_comm,next_comm:string")) == [
        ("+8(record)", "string", "char[16]"), ("+40(record)", "string", "char[16]")]
    probe = bind("sched/sched_process_exec:t:filename")
    assert probe.fetches[0].expr.binding == Binding(DataLoc(8), "string", "__data_loc char[]")
    assert read(bind("irq/irq_handler_entry:t:name")) == [("__data_loc(+12)", "string", "__data_loc char[]")]


def test_a_rel_loc_field(tmp_path: Path):
    event = tmp_path / "events" / "test" / "rel"
    event.mkdir(parents=True)
    (event / "format").write_text("name: rel\nID: 9\nformat:\n"
                                  "\tfield:__rel_loc char[] msg;\toffset:8;\tsize:4;\tsigned:0;\n")
    names = KernelNames(btf=object(), tracefs=str(tmp_path))
    probe = bind_probe(parse_probe_text("test/rel:t:msg"), names)
    assert probe.fetches[0].expr.binding == Binding(DataLoc(8, relative=True), "string", "__rel_loc char[]")


def test_pointers_and_code_addresses_default_to_hex():
    assert read(bind("kmem/kmalloc:t:call_site,ptr,bytes_req,gfp_flags,node,site=call_site:symbol")) == [
        ("+8(record)", "x64", "unsigned long"), ("+16(record)", "x64", "const void *"),
        ("+24(record)", "u64", "size_t"), ("+40(record)", "u64", "unsigned long"),
        ("+48(record)", "s32", "int"), ("+8(record)", "symbol", "unsigned long")]


def test_sizes_and_signs_from_the_format():
    assert read(bind("skb/kfree_skb:t:reason,protocol")) == [
        ("+36(record)", "u32", "enum skb_drop_reason"), ("+32(record)", "u16", "unsigned short")]
    assert read(bind("kmem/kmem_cache_alloc:t:accounted")) == [("+52(record)", "u8", "bool")]
    assert read(bind("sched/sched_switch:t:prev_pid,prev_state,common_pid")) == [
        ("+24(record)", "s32", "pid_t"), ("+32(record)", "s64", "long"), ("+4(record)", "s32", "int")]


def test_the_users_type_wins_for_integers():
    assert read(bind(f"{OPENAT}:t:dfd:s64,flags:x32")) == [("+16(record)", "s64", "int"),
                                                           ("+32(record)", "x32", "int")]


def test_a_dereference_reads_through_a_pointer_field():
    probe = bind(f"{OPENAT}:t:+8(filename):u32")
    assert read(probe) == [("+8(+24(record))", "u32", None)]
    assert probe.fetches[0].expr.inner.binding == Binding(Deref(24, Record()), "x64", "const char *")


def test_args_reaches_a_field_named_like_a_builtin():
    probe = bind("sched/sched_process_exec:t:args.pid,pid,old_pid")
    assert read(probe) == [("+12(record)", "s32", "pid_t"), ("pid", "u32", None),
                           ("+16(record)", "s32", "pid_t")]
    probe = bind("sched/sched_process_exec:t:filename if args.pid > 1")
    assert probe.bindings["args.pid"].binding == Binding(Deref(12, Record()), "s32", "pid_t")


# ---------------------------------------------------------------- filters and aggregations


def test_filter_names_are_bound_from_the_record():
    probe = bind("syscalls/sys_enter_read:t:count if count > 4096 && fd == 3")
    assert probe.bindings["fd"].binding == Binding(Deref(16, Record()), "u32", "unsigned int")
    probe = bind(f"{OPENAT}:t if flags > 0")
    assert probe.bindings["flags"].binding == Binding(Deref(32, Record()), "s32", "int")
    probe = bind('sched/sched_switch:t:prev_state if prev_comm == "bash"')
    assert probe.bindings["prev_comm"].binding.type == "string"


def test_a_fetched_char_array_compares_with_text():
    probe = bind('sched/sched_switch:t:prev_comm if prev_comm == "bash"')
    assert probe.bindings == {}  # the fetch's value is compared
    err = bind_error("sched/sched_switch:t:prev_comm if prev_comm > 3")
    assert err.message == 'filter: prev_comm is a string; compare it with a quoted "text"'


def test_aggregation_names_are_bound():
    probe = bind("syscalls/sys_enter_read:t count(comm) sum(count)")
    assert str(positional(probe.agg.sum.expr)) == "+32(record)" and probe.agg.sum.effective_type == "u64"
    probe = bind("syscalls/sys_exit_read:t:ret hist(ret)")
    assert str(positional(probe.agg.hist.expr)) == "+16(record)"


def test_text_is_no_count_key_yet():
    err = bind_error("sched/sched_switch:t count(prev_comm)")
    assert err.message == ("count: prev_comm is not an integer, comm, func or cgroup "
                           "(it is text: text keys other than comm, func and cgroup are not counted yet)")


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("text, col, message", [
    (f"{OPENAT}:t:filname", 29, f"{OPENAT} has no field 'filname' (did you mean filename, flags?): its fields "
                                "are __syscall_nr, dfd, filename, flags, mode, and common_pid, common_flags, ..."),
    ("sched/sched_process_exec:t:filename:ustring", 37,
     "filename is a __data_loc char[] in the tracepoint's record, kernel memory: read it as :string"),
    ("sched/sched_switch:t:prev_comm:ustring", 32,
     "prev_comm is a char[16] in the tracepoint's record, kernel memory: read it as :string"),
    ("sched/sched_switch:t:prev_comm:u64", 32, "prev_comm is text (char[16]): read it as :string, not :u64"),
    ("tcp/tcp_probe:t:saddr", 17, "saddr is an array of __u8: not readable yet"),
    (f"{OPENAT}:t:dfd:string", 33, "dfd is a int, not a pointer or a char array: :string reads text"),
    ("sched/sched_switch:t:+8(prev_comm):u32", 25,
     "+OFFSET(prev_comm) reads memory at prev_comm, but prev_comm is a char[16], not a pointer"),
    ("sched/sched_swich:t", 1, "no tracepoint sched/sched_swich (did you mean sched/sched_switch, "
                               "sched/sched_wakeup?)"),
    ("syscalls/sys_enter_read:t:count if flags > 1", 36,
     "filter: syscalls/sys_enter_read has no field 'flags' (did you mean common_flags?)"),
    (f"{OPENAT}:t:filename if filename == \"/etc\"", 53, "filter: filename is an integer"),
])
def test_refusals_name_the_column(text, col, message):
    err = bind_error(text)
    assert err.col == col, str(err)
    assert err.message.startswith(message), str(err)


def test_without_a_kernel_or_where_tracefs_is_closed():
    probe = parse_probe_text(f"{OPENAT}:t:filename:ustring")
    with pytest.raises(SpecError, match="need its format from tracefs"):
        bind_probe(probe, None)

    class Closed(FormatsKernel):
        def tracepoint_format(self, tracepoint):
            from ktui.lang.tracepoints import NEEDS_ROOT, TracepointError

            raise TracepointError(NEEDS_ROOT)

    with pytest.raises(SpecError) as info:
        bind_probe(probe, Closed())
    assert str(info.value) == "1: reading tracepoint formats needs root (tracefs is mode 0700)"


def test_a_kernel_without_formats_leaves_the_probe_to_where_it_runs():
    class BtfOnly:  # the guest's names, for `ktui vm`
        def problem(self):
            return None

    probe = parse_probe_text(f"{OPENAT}:t:filename:ustring")
    assert bind_probe(probe, BtfOnly()) is probe


def test_kernel_names_reads_each_format_once(tmp_path):
    names = KernelNames(btf=object(), tracefs=str(tracefs("6.1")))
    first = names.tracepoint_format(OPENAT)
    assert names.tracepoint_format(OPENAT) is first
    assert names.tracefs_problem() is None


# ---------------------------------------------------------------- the note, recordings, sets


def test_the_sys_enter_user_string_note():
    note = sys_enter_user_string_note(bind(f"opens={OPENAT}:t:filename:ustring"))
    assert note == ("at sys_enter a user string that is not paged in yet reads as empty (the probe "
                    "cannot fault it in); a return probe on the syscall's function "
                    "(e.g. do_sys_openat2:r:filename:ustring) reads it after the kernel copied it")
    assert sys_enter_user_string_note(bind(f"{OPENAT}:t:filename")) is None
    assert sys_enter_user_string_note(bind("sched/sched_process_exec:t:filename")) is None
    assert sys_enter_user_string_note(parse_probe_text("do_sys_openat2:c:+0(a2):ustring")) is None


def test_a_recording_keeps_a_tracepoint_probes_types():
    probe = bind(f"{OPENAT}:t:dfd,filename:ustring,comm")
    ps = loads_probeset(dumps_probeset(__import__("ktui.lang.model", fromlist=["ProbeSet"]).ProbeSet(
        "rec", probes=(probe,))))
    replayed = with_fetch_types(ps.probes[0], fetch_types(probe))
    assert replayed == probe
    assert [(f.effective_type, f.ctype) for f in replayed.fetches] == [
        ("s32", "int"), ("ustring", "const char *"), ("string", None)]
    assert replayed.fetches[0].expr.binding.expr is None  # a replay cannot read


@pytest.mark.parametrize("kernel", KERNELS)
def test_the_example_set_binds_on_both_kernels(kernel):
    path = REPO / "probesets" / "syscalls.yaml"
    ps = load_probeset(path, FormatsKernel(kernel))
    assert [p.name for p in ps.probes] == ["opens", "reads", "read_ret", "exec"]
    assert loads_probeset(dumps_probeset(ps)) == ps
    opens = ps.probes[0]
    assert read(opens) == [("+0(+24(record))", "ustring", "const char *"), ("+32(record)", "x32", "int")]
    assert sys_enter_user_string_note(opens) is not None
    assert path.read_text().startswith("# ")


# ---------------------------------------------------------------- ktui check


@pytest.fixture
def cli_kernel(monkeypatch, tmp_path):
    """`ktui check` binds to the little BTF of namedkernel.py and to the
    fixture tracefs of 6.12 (or, with `.tracefs = None`, to none)."""
    from ktui import cli
    from ktui.btf.index import KernelBtf
    from tests.unit.namedkernel import write_btf

    btf_dir = write_btf(tmp_path)
    names = KernelNames(KernelBtf(btf_dir=btf_dir, notes=tmp_path / "sys/kernel/notes"),
                        tracefs=str(tracefs("6.12")))
    monkeypatch.setattr(cli, "_kernel_names", lambda: names)
    return names


def check(*args):
    from click.testing import CliRunner

    from ktui import cli

    return CliRunner().invoke(cli.main, ["check", *args])


def test_check_binds_tracepoints_like_functions(cli_kernel, tmp_path, monkeypatch):
    good = tmp_path / "good.yaml"
    good.write_text((REPO / "probesets" / "syscalls.yaml").read_text())
    r = check("--syntax-only", str(good))
    assert r.exit_code == 0 and "ok (4 probes)" in r.output, r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"name: bad\nprobes:\n  - {OPENAT}:t:filname:ustring\n")
    r = check("--syntax-only", str(bad))
    # the syntax-only check reads no formats: only the :ustring at sys_enter is worth a word
    warning, ok = r.output.splitlines()
    assert warning.startswith(f"{bad}:3:5: warning: probe 1 ({OPENAT}:t:filname:ustring): at sys_enter a user")
    assert ok == f"{bad}: ok (1 probe)" and r.exit_code == 0
    from ktui import cli
    from ktui.kernel.symbols.namecheck import FunctionCheck

    lines = []
    monkeypatch.setattr(cli.click, "echo", lambda text="", **kw: lines.append(text))
    assert cli._check_files((str(bad),), FunctionCheck(), False) == 1
    assert lines == [f"{bad}:3:33: probe 1 ({OPENAT}:t:filname:ustring): spec: {OPENAT} has no field 'filname' "
                     "(did you mean filename, flags?): its fields are __syscall_nr, dfd, filename, flags, "
                     "mode, and common_pid, common_flags, ..."]


def test_check_where_tracefs_cannot_be_read_says_so_in_one_line(cli_kernel, tmp_path, monkeypatch):
    from ktui import cli
    from ktui.kernel.symbols.namecheck import FunctionCheck
    from ktui.lang import tracepoints

    monkeypatch.setattr(tracepoints, "TRACEFS_ROOTS", (str(tmp_path / "none"),))
    cli_kernel.tracefs = None
    path = tmp_path / "set.yaml"
    path.write_text(f"name: s\nprobes:\n  - {OPENAT}:t:filename:ustring\n  - vfs_read:c:count\n")
    lines = []
    monkeypatch.setattr(cli.click, "echo", lambda text="", **kw: lines.append(text))
    assert cli._check_files((str(path),), FunctionCheck(), False) == 0
    assert len(lines) == 2 and "warning:" in lines[0] and "at sys_enter" in lines[0]  # not bound, still known
    assert "ok (2 probes" in lines[1] and "tracepoints not checked: tracefs is not mounted" in lines[1]


def test_an_e_tracepoint_binds_or_says_why_in_one_line(cli_kernel):
    from ktui import cli

    ps = cli.load_inputs((), (f"{OPENAT}:t:dfd",))
    assert str(positional(ps.probes[0].fetches[0].expr)) == "+16(record)"
    with pytest.raises(SpecError) as info:
        cli.load_inputs((), (f"{OPENAT}:t:dfd,nope",))
    assert str(info.value).startswith(f"-e #1:33: {OPENAT} has no field 'nope'")
