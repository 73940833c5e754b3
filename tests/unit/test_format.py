"""ktui.pipeline.format: values by fetch type, strings, errnos, times, latencies, counts."""

from __future__ import annotations

import dataclasses

import pytest

from ktui.lang.model import Arg, Fetch, RetVal
from ktui.lang.spec import parse_spec
from ktui.pipeline.format import (
    as_errno,
    errno_name,
    event_columns,
    fetch_pairs,
    format_count,
    format_event,
    format_fetch,
    format_latency,
    format_ts,
    format_value,
    printable,
    quote_string,
    short_name,
    to_signed,
)
from ktui.record.feed import Event


@pytest.mark.parametrize(
    "value, ftype, text",
    [
        (255, "x8", "0xff"),
        (-1, "x32", "0xffffffff"),  # hex shows the bits
        (0x1234, "x64", "0x1234"),
        (0xFF, "s8", "-1"),  # signed reinterprets the width
        (0xFFFFFFF7, "s32", "-9"),
        (-9, "s64", "-9"),
        (0x7F, "s8", "127"),
        (-1, "u8", "255"),  # unsigned masks to the width
        (-1, "u64", str(2**64 - 1)),
        (70000, "u16", str(70000 & 0xFFFF)),
        (42, "u32", "42"),
    ],
)
def test_integers_by_type(value, ftype, text):
    assert format_value(value, ftype) == text


def test_to_signed():
    assert to_signed(0x80, 8) == -128
    assert to_signed(0x7F, 8) == 127
    assert to_signed(2**64 - 1, 64) == -1


def test_strings_are_quoted_and_escaped():
    assert format_value("/etc/passwd", "string") == '"/etc/passwd"'
    assert format_value('a"b\\c', "ustring") == '"a\\"b\\\\c"'
    assert format_value("tab\there\nnl\x01\x7f", "string") == '"tab\\there\\nnl\\x01\\x7f"'
    # escape sequences from kernel memory must never reach the terminal
    assert "\x1b" not in format_value("\x1b[2J", "string")
    assert format_value("\x1b[2J", "string") == '"\\x1b[2J"'


def test_string_bytes_and_undecodable_bytes():
    assert quote_string(b"ab\xff\x00") == '"ab\\xff\\0"'
    assert quote_string(b"ok".decode() + "\udcff") == '"ok\\xff"'  # surrogateescape'd byte
    assert quote_string("café") == '"café"'  # printable unicode stays
    assert quote_string("\u200b") == '"\\u200b"'  # invisible stays visible


def test_string_fetch_that_holds_an_int():
    assert format_value(0xDEAD, "string") == "<0xdead>"


def test_symbols_use_the_symbolizer_or_hex():
    calls = []

    def symbolize(addr: int) -> str:
        calls.append(addr)
        return "vfs_read+0x10"

    assert format_value(0xFFFFFFFF81234567, "symbol", symbolize) == "vfs_read+0x10"
    assert calls == [0xFFFFFFFF81234567]
    assert format_value(0xFFFFFFFF81234567, "symbol") == "0xffffffff81234567"
    assert format_value(-1, "symbol") == "0xffffffffffffffff"


def test_retval_errors_get_their_errno_name():
    ret = Fetch(RetVal(), label="ret")
    assert format_fetch(ret, -9) == "-9 (EBADF)"
    assert format_fetch(ret, 0) == "0"
    assert format_fetch(ret, -5000) == "-5000"  # beyond MAX_ERRNO: not an error code
    as_ptr = Fetch(RetVal(), type="x64")
    assert format_fetch(as_ptr, 2**64 - 12) == "0xfffffffffffffff4 (ENOMEM)"  # ERR_PTR
    assert format_fetch(Fetch(Arg(1), type="s64"), -9) == "-9"  # only return values


def test_errno_helpers():
    assert errno_name(9) == errno_name(-9) == "EBADF"
    assert errno_name(4000) == "E4000"
    assert as_errno(-2) == 2 and as_errno(2) is None and as_errno(2**64 - 2) == 2


def test_fetch_pairs_names_values_and_extra_values():
    probe = parse_spec("vfs_read:r:ret=retval,a3:u32")
    assert fetch_pairs(probe, (-14, 2**32 + 5)) == [("ret", "-14 (EFAULT)"), ("a3", "5")]
    assert fetch_pairs(None, (1, "x")) == [("v1", "1"), ("v2", '"x"')]


@pytest.mark.parametrize(
    "ns, text",
    [
        (None, "-"),
        (0, "0ns"),
        (999, "999ns"),
        (1000, "1.00us"),
        (12345, "12.3us"),
        (123456, "123us"),
        (999_960, "1.00ms"),  # not "1000us"
        (1_500_000, "1.50ms"),
        (999_999_999, "1.00s"),
        (3_400_000_000, "3.40s"),
        (7_200_000_000_000, "7200s"),
    ],
)
def test_format_latency(ns, text):
    assert format_latency(ns) == text


@pytest.mark.parametrize(
    "n, text",
    [(0, "0"), (99_999, "99999"), (100_000, "100.0k"), (123_456, "123.5k"), (12_345_678, "12.35M"),
     (3_000_000_000, "3.00G"), (2.5, "2.5"), (12.0, "12"), (150.4, "150")],
)
def test_format_count(n, text):
    assert format_count(n) == text


def test_format_ts_is_monotonic_seconds_with_micros():
    assert format_ts(4_242_000_001_999) == "4242.000001"
    assert format_ts(5) == "0.000000"


def test_event_line():
    probe = parse_spec("vfs_read:r:ret=retval,count=a3")
    event = Event(probe_id=3, ts_ns=4_242_000_060_000, cpu=2, pid=1005, tid=1007, comm="cat",
                  latency_ns=1200, values=(-9, 4096))
    assert event_columns(event, probe) == (
        "4242.000060", "002", "cat[1005/1007]", "", "vfs_read:r", "ret=-9 (EBADF) count=4096 lat=1.20us",
    )
    assert format_event(event, probe) == "4242.000060 002 cat[1005/1007] vfs_read:r ret=-9 (EBADF) count=4096 lat=1.20us"
    labelled = dataclasses.replace(probe, label="reads")
    assert short_name(labelled) == "reads"
    gone = format_event(dataclasses.replace(event, pid=1, tid=1, latency_ns=None, values=()), None)
    assert gone == "4242.000060 002 cat[1] #3"
    # the task's cgroup after it, a container's scope as runtime:id
    docker = "system.slice/docker-" + "0123456789ab" + "cd" * 26 + ".scope"
    assert format_event(dataclasses.replace(event, cgroup=docker), probe) == \
        "4242.000060 002 cat[1005/1007] docker:0123456789ab vfs_read:r ret=-9 (EBADF) count=4096 lat=1.20us"


def test_comm_is_made_printable():
    assert printable("kworker/0:1") == "kworker/0:1"
    assert printable("evil\x1b[31m") == "evil\\x1b[31m"


def test_ndjson_names_an_errno_as_the_dashboard_does():
    """format said E200 and ndjson said 200 for the same unknown errno."""
    import io
    import json

    from ktui.lang.spec import parse_spec
    from ktui.pipeline.ndjson import NdjsonSink
    from ktui.record.feed import ProbeState, ProbeStats, ProbeStatus, StatsSnapshot

    class OneProbe:
        def statuses(self):
            return {0: ProbeStatus(0, parse_spec("vfs_read:r"), ProbeState.ATTACHED)}

    out = io.StringIO()
    NdjsonSink(out, OneProbe()).on_stats(StatsSnapshot(0.0, {0: ProbeStats(0, errnos=((9, 2), (200, 1)))}))
    errnos = json.loads(out.getvalue())["probes"][0]["errnos"]
    assert errnos == {errno_name(9): 2, errno_name(200): 1} == {"EBADF": 2, "E200": 1}
