"""`ktui list CATEGORY/EVENT`: tracepoints and their fields, read from the
fixture tracefs of Debian's 6.1 and 6.12 kernels (tests/unit/tracefs.py):
the lines, the JSON, the exit codes and every message it can print."""

from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner

from ktui import cli
from ktui.kernel.symbols import tracepoint_list
from ktui.kernel.symbols.tracepoint_list import TracepointLister, own_fields
from ktui.lang import tracepoints
from ktui.lang.bind import bind_probe
from ktui.lang.spec import parse_spec
from ktui.listing import run_list
from tests.fakesysfs import FakeKernel
from tests.unit.tracefs import KERNELS, FormatsKernel, tracefs

OPENAT = ("syscalls/sys_enter_openat  __syscall_nr:s32 dfd:s32 filename:x64(const char *) "
          "flags:s32 mode:u64")


def listing(patterns, kernel="6.12", **kw):
    out, err = io.StringIO(), io.StringIO()
    kw.setdefault("release", "6.1.0-test")
    kw.setdefault("tracepoints", TracepointLister(tracefs(kernel)))
    code = run_list(patterns, out=out, err=err, **kw)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("kernel", KERNELS)
def test_one_line_per_event_with_its_fields_and_types(kernel):
    code, out, err = listing(["syscalls/sys_enter_open*", "sched/sched_process_exec", "kmem/kmalloc",
                              "irq/*"], kernel)
    assert code == 0
    assert out.splitlines() == [
        "irq/irq_handler_entry  irq:s32 name:string",
        "kmem/kmalloc  call_site:x64(unsigned long) ptr:x64(const void *) bytes_req:u64 "
        "bytes_alloc:u64 gfp_flags:u64 node:s32",
        # pid is the builtin: the field is written args.pid, as a spec writes it
        "sched/sched_process_exec  filename:string args.pid:s32 old_pid:s32",
        OPENAT,
    ]
    assert err == ("ktui: tracepoints of the running kernel, 6.1.0-test\n"
                   "ktui: 4 tracepoints\n")


@pytest.mark.parametrize("kernel", KERNELS)
def test_common_fields_are_left_out_and_unreadable_ones_say_so(kernel):
    _code, out, _err = listing(["*/*"], kernel)
    assert len(out.splitlines()) == 18 and "common_" not in out
    tcp = next(line for line in out.splitlines() if line.startswith("tcp/tcp_probe  "))
    assert tcp.startswith("tcp/tcp_probe  saddr:unreadable(__u8[28]) daddr:unreadable(__u8[28]) sport:u16")


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_listed_type_is_what_a_probe_reads(kernel):
    """The listing's type is the binding's default, field by field: one rule."""
    lister = TracepointLister(tracefs(kernel))
    events, _ = lister.list(["*/*"])
    checked = 0
    for event in events:
        for field in own_fields(event.format):
            listed = tracepoint_list.field_text(field)
            written, _, kind = listed.partition("(")[0].partition(":")
            if kind == "unreadable":
                continue
            probe = bind_probe(parse_spec(f"{event.name}:t:{written}"), FormatsKernel(kernel))
            assert probe.fetches[0].effective_type == kind, (event.name, written)
            checked += 1
    assert checked > 80


def test_json_gives_the_same_as_data():
    code, out, err = listing(["sched/sched_process_exec", "syscalls/sys_enter_openat"], as_json=True)
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc["version"] == 1 and set(doc) == {"version", "tracepoints"}
    exec_, openat = doc["tracepoints"]
    assert exec_["name"] == "sched/sched_process_exec" and isinstance(exec_["id"], int)
    assert exec_["fields"][0] == {"name": "filename", "ctype": "__data_loc char[]", "offset": 8, "size": 4,
                                  "signed": False, "type": "string", "loc": "data"}
    assert [f["name"] for f in exec_["fields"]] == ["filename", "pid", "old_pid"]
    assert openat["fields"][2] == {"name": "filename", "ctype": "const char *", "offset": 24, "size": 8,
                                   "signed": False, "type": "x64", "loc": ""}
    assert openat["error"] is None
    _code, out, _err = listing(["tcp/tcp_probe"], as_json=True)
    assert json.loads(out)["tracepoints"][0]["fields"][0]["type"] is None  # __u8[28]: not readable


@pytest.mark.parametrize("pattern, message", [
    ("sched/sched_swich", "no tracepoint sched/sched_swich (did you mean sched/sched_switch, "
                          "sched/sched_wakeup?)"),
    ("shced/*", "no tracepoint category 'shced' (did you mean sched?)"),
    ("shced/sched_switch", "no tracepoint category 'shced' (did you mean sched?): "
                           "no tracepoint shced/sched_switch"),
    ("sched/zz*", "no tracepoint matches 'sched/zz*'"),
    ("zz*/*", "no tracepoint matches 'zz*/*'"),
])
def test_nothing_matching_is_exit_1_with_close_names(pattern, message):
    assert listing([pattern]) == (1, "", "ktui: tracepoints of the running kernel, 6.1.0-test\n"
                                         f"ktui: {message}\n")


def test_a_pattern_that_matches_nothing_is_said_beside_those_that_do():
    code, out, err = listing(["kmem/kfree", "kmem/kfre", "kmem/kfree"])
    assert code == 1
    assert out == "kmem/kfree  call_site:x64(unsigned long) ptr:x64(const void *)\n"  # once
    assert err.splitlines()[1:] == ["ktui: no tracepoint kmem/kfre (did you mean kmem/kfree?)",
                                    "ktui: 1 tracepoint"]


def test_functions_and_tracepoints_in_one_listing(tmp_path):
    fk = FakeKernel(tmp_path)
    code, out, err = listing(["vfs_read", "sched/sched_wakeup"], catalog=fk.catalog())
    assert code == 0
    assert out.splitlines() == [
        "traceable   vfs_read(struct file *file, char *buf, size_t count, loff_t *pos) -> ssize_t",
        "sched/sched_wakeup  args.comm:string args.pid:s32 prio:s32 target_cpu:s32",
    ]
    assert err.splitlines() == ["ktui: functions and tracepoints of the running kernel, 6.1.0-test",
                                "ktui: 1 function: 1 traceable", "ktui: 1 tracepoint"]
    code, out, _err = listing(["vfs_raed", "sched/sched_wakeup"], catalog=fk.catalog())
    assert code == 1 and out.count("\n") == 1
    code, out, _err = listing(["vfs_read", "kmem/kfree"], catalog=fk.catalog(), as_json=True)
    doc = json.loads(out)
    assert [f["name"] for f in doc["functions"]] == ["vfs_read"]
    assert [t["name"] for t in doc["tracepoints"]] == ["kmem/kfree"]


def test_the_first_line_names_the_vm_kernel_too():
    _code, _out, err = listing(["kmem/kfree"], release="6.18.4-host", vm_kernel="6.1.0-57-amd64")
    assert err.splitlines()[0] == ("ktui: tracepoints of the running kernel, 6.18.4-host (ktui vm runs "
                                   "6.1.0-57-amd64: `ktui vm list PATTERN` lists its tracepoints)")


def test_without_root_tracefs_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(tracepoints, "tracefs_root",
                        lambda: (_ for _ in ()).throw(tracepoints.TracepointError(tracepoints.NEEDS_ROOT)))
    monkeypatch.setattr(tracepoint_list, "tracefs_root", tracepoints.tracefs_root)
    code, out, err = listing(["sched/*"], tracepoints=TracepointLister())
    assert (code, out) == (1, "")
    assert err.splitlines()[1:] == ["ktui: tracefs is mode 0700: listing tracepoints needs root"]
    # the same when only the events directory refuses (a root given, read as a user)
    real = tracepoints.os.scandir
    monkeypatch.setattr(tracepoints.os, "scandir", lambda p: (_ for _ in ()).throw(PermissionError(13, "no")))
    code, _out, err = listing(["sched/*"])
    assert code == 1 and err.splitlines()[1:] == ["ktui: tracefs is mode 0700: listing tracepoints needs root"]
    monkeypatch.setattr(tracepoints.os, "scandir", real)
    # ... or only the format files
    monkeypatch.setattr(tracepoints, "open", lambda *a: (_ for _ in ()).throw(PermissionError(13, "no")),
                        raising=False)
    code, out, err = listing(["sched/*"])
    assert (code, out) == (1, "")
    assert err.splitlines()[1:] == ["ktui: tracefs is mode 0700: listing tracepoints needs root"]
    monkeypatch.delattr(tracepoints, "open")
    # functions are still listed beside it
    code, out, err = listing(["vfs_read", "sched/*"], catalog=FakeKernel(tmp_path).catalog(),
                             tracepoints=TracepointLister())
    assert code == 1 and out.startswith("traceable   vfs_read(")
    assert "ktui: tracefs is mode 0700: listing tracepoints needs root" in err.splitlines()


def test_tracefs_not_mounted_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(tracepoints, "TRACEFS_ROOTS", (str(tmp_path / "tracing"),))
    code, out, err = listing(["sched/*"], tracepoints=TracepointLister())
    assert (code, out) == (1, "")
    assert err.splitlines()[1] == ("ktui: tracefs is not mounted (neither /sys/kernel/tracing nor "
                                   "/sys/kernel/debug/tracing has events/): mount -t tracefs nodev "
                                   "/sys/kernel/tracing")
    assert len(err.splitlines()) == 2


def test_an_event_whose_format_does_not_read_is_listed_with_why(tmp_path):
    for name, text in (("good", "name: good\nID: 1\nformat:\n\tfield:int x;\toffset:8;\tsize:4;\tsigned:1;\n"),
                       ("bad", "nothing here\n")):
        (tmp_path / "events" / "cat" / name).mkdir(parents=True)
        (tmp_path / "events" / "cat" / name / "format").write_text(text)
    code, out, _err = listing(["cat/*"], tracepoints=TracepointLister(tmp_path))
    assert code == 0
    assert out.splitlines() == ["cat/bad  # cat/bad: not a tracepoint format: no name: or ID: line",
                                "cat/good  x:s32"]


# (`/x` is a file's functions since `ktui list PATH:GLOB`: tests/unit/test_list_binary.py)
@pytest.mark.parametrize("pattern", ["a/b/c", "sched/"])
def test_a_malformed_tracepoint_pattern_is_exit_2(monkeypatch, pattern):
    import ktui.listing as listing_mod

    real = listing_mod.run_list
    monkeypatch.setattr(listing_mod, "run_list",
                        lambda p, **kw: real(p, tracepoints=TracepointLister(tracefs("6.1")), **kw))
    r = CliRunner().invoke(cli.main, ["list", "kmem/kfree", pattern])
    assert r.exit_code == 2
    assert r.output == (f"ktui: {pattern!r}: expected CATEGORY/EVENT, e.g. 'sched/*' or "
                        "'syscalls/sys_enter_open*'\n")
