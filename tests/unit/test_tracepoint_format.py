"""`lang.tracepoints`: tracefs format files parsed exactly (Debian's 6.1
and 6.12 kernels), read from a tracefs tree, and every one-line refusal."""

from __future__ import annotations

import os

import pytest

from ktui.lang import tracepoints
from ktui.lang.tracepoints import (
    NEEDS_ROOT,
    TracepointError,
    TracepointField as F,
    list_events,
    parse_format,
    read_format,
)
from tests.unit.tracefs import DATA, KERNELS, fixture_format, tracefs

COMMON = (F("common_type", "unsigned short", 0, 2, False), F("common_flags", "unsigned char", 2, 1, False),
          F("common_preempt_count", "unsigned char", 3, 1, False), F("common_pid", "int", 4, 4, True))
SYSCALL_NR = F("__syscall_nr", "int", 8, 4, True)
IDS = {  # event -> (6.1's id, 6.12's id)
    "syscalls/sys_enter_openat": (659, 749), "syscalls/sys_enter_read": (717, 809),
    "sched/sched_process_exec": (312, 303), "sched/sched_switch": (319, 310), "kmem/kmalloc": (552, 626),
}


def fields(kernel: str) -> dict[str, tuple[F, ...]]:
    # 6.1 says `signed:1` of char arrays and of exec's __data_loc (char is signed on x86); 6.12 does not
    old = kernel == "6.1"
    return {
        "syscalls/sys_enter_openat": COMMON + (
            SYSCALL_NR, F("dfd", "int", 16, 8, False), F("filename", "const char *", 24, 8, False),
            F("flags", "int", 32, 8, False), F("mode", "umode_t", 40, 8, False)),
        "syscalls/sys_enter_read": COMMON + (
            SYSCALL_NR, F("fd", "unsigned int", 16, 8, False), F("buf", "char *", 24, 8, False),
            F("count", "size_t", 32, 8, False)),
        "sched/sched_process_exec": COMMON + (
            F("filename", "char", 8, 4, old, loc="data"), F("pid", "pid_t", 12, 4, True),
            F("old_pid", "pid_t", 16, 4, True)),
        "sched/sched_switch": COMMON + (
            F("prev_comm", "char", 8, 16, old, array=16), F("prev_pid", "pid_t", 24, 4, True),
            F("prev_prio", "int", 28, 4, True), F("prev_state", "long", 32, 8, True),
            F("next_comm", "char", 40, 16, old, array=16), F("next_pid", "pid_t", 56, 4, True),
            F("next_prio", "int", 60, 4, True)),
        "kmem/kmalloc": COMMON + (
            F("call_site", "unsigned long", 8, 8, False), F("ptr", "const void *", 16, 8, False),
            F("bytes_req", "size_t", 24, 8, False), F("bytes_alloc", "size_t", 32, 8, False),
            F("gfp_flags", "unsigned long", 40, 8, False), F("node", "int", 48, 4, True)),
    }


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("event", sorted(IDS))
def test_every_field_is_parsed_exactly(kernel, event):
    fmt = fixture_format(kernel, event)
    assert fmt.name == event.split("/")[1]
    assert fmt.id == IDS[event][KERNELS.index(kernel)]
    assert fmt.fields == fields(kernel)[event]


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_fixture_parses(kernel):
    formats = sorted((DATA / kernel / "events").glob("*/*/format"))
    assert len(formats) == 18  # the 17 fetched with the language, and kmem/kfree (memory.yaml)
    for path in formats:
        fmt = parse_format(path.read_text())
        assert fmt.fields[:4] == COMMON, path
        assert len({f.name for f in fmt.fields}) == len(fmt.fields)


def test_types_as_they_read():
    issue = {f.name: f for f in fixture_format("6.12", "block/block_rq_issue").fields}
    assert issue["rwbs"].type_text == "char[8]" and issue["rwbs"].is_char
    assert issue["cmd"].type_text == "__data_loc char[]"
    assert issue["sector"].ctype == "sector_t"
    tcp = {f.name: f for f in fixture_format("6.1", "tcp/tcp_probe").fields}
    assert tcp["saddr"] == F("saddr", "__u8", 8, 28, False, array=28) and not tcp["saddr"].is_char
    skb = {f.name: f for f in fixture_format("6.12", "skb/kfree_skb").fields}
    assert skb["reason"].ctype == "enum skb_drop_reason" and skb["location"].is_pointer
    assert fixture_format("6.12", "kmem/mm_page_alloc").field("gfp_flags").ctype == "unsigned long"


def test_rel_loc_and_an_array_sized_by_a_macro():
    fmt = parse_format("name: x\nID: 7\nformat:\n"
                       "\tfield:__rel_loc char[] msg;\toffset:8;\tsize:4;\tsigned:0;\n"
                       "\tfield:char comm[TASK_COMM_LEN];\toffset:12;\tsize:16;\tsigned:1;\n"
                       "\tfield:unsigned long long t;\toffset:32;\tsize:8;\n")
    assert fmt.fields == (F("msg", "char", 8, 4, False, loc="rel"), F("comm", "char", 12, 16, True, array=16),
                          F("t", "unsigned long long", 32, 8, False))
    assert fmt.fields[0].type_text == "__rel_loc char[]"


@pytest.mark.parametrize("text, words", [
    ("", "not a tracepoint format: no name: or ID: line"),
    ("name: x\nID: seven\n", "format line 2: ID is not a number"),
    ("name: x\nID: 1\n\tfield:int a;\toffset:x;\tsize:4;\n", "format line 3: expected offset:N; size:N;"),
    ("name: x\nID: 1\n\tfield:;\toffset:0;\tsize:4;\n", "format line 3: cannot read the field"),
])
def test_what_does_not_parse_says_where(text, words):
    with pytest.raises(TracepointError) as info:
        parse_format(text)
    assert str(info.value).startswith(words)


# ---------------------------------------------------------------- tracefs


def test_read_format_reads_under_the_root():
    fmt = read_format("sched", "sched_switch", tracefs("6.1"))
    assert fmt == fixture_format("6.1", "sched/sched_switch")
    assert list_events("syscalls", tracefs("6.12")) == ["sys_enter_openat", "sys_enter_read",
                                                         "sys_exit_openat", "sys_exit_read"]


@pytest.mark.parametrize("category, name, message", [
    ("sched", "sched_swich", "no tracepoint sched/sched_swich (did you mean sched/sched_switch, "
                             "sched/sched_wakeup?)"),
    ("schedd", "sched_switch", "no tracepoint category 'schedd' (did you mean sched?): "
                               "no tracepoint schedd/sched_switch"),
    ("nothing", "x", "no tracepoint category 'nothing': no tracepoint nothing/x"),
])
def test_no_such_event_says_the_close_names(category, name, message):
    with pytest.raises(TracepointError) as info:
        read_format(category, name, tracefs("6.12"))
    assert info.value.message == message and info.value.unknown


@pytest.mark.parametrize("name", ["..", "a/b", "x y", ""])
def test_a_name_is_never_a_path(name):
    with pytest.raises(TracepointError, match="not a tracepoint name"):
        read_format("sched", name, tracefs("6.12"))


def test_tracefs_not_mounted_and_not_readable(tmp_path, monkeypatch):
    monkeypatch.setattr(tracepoints, "TRACEFS_ROOTS", (str(tmp_path / "tracing"), str(tmp_path / "debug")))
    with pytest.raises(TracepointError) as info:
        read_format("sched", "sched_switch")
    assert info.value.message.startswith("tracefs is not mounted")

    def denied(path, *args, **kwargs):  # tracefs is mode 0700: a user cannot stat inside it
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tracepoints.os, "stat", denied)
    with pytest.raises(TracepointError) as info:
        read_format("sched", "sched_switch")
    assert info.value.message == NEEDS_ROOT


def test_an_unreadable_format_says_root(tmp_path, monkeypatch):
    event = tmp_path / "events" / "sched" / "sched_switch"
    event.mkdir(parents=True)
    (event / "format").write_text("name: sched_switch\nID: 1\n")
    real_open = open

    def denied(path, *args, **kwargs):
        if str(path).endswith("format"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", denied)
    with pytest.raises(TracepointError) as info:
        read_format("sched", "sched_switch", tmp_path)
    assert info.value.message == "reading tracepoint formats needs root (tracefs is mode 0700)"
