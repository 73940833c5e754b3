"""A wildcard's matches and names (`lang.bind_wildcard`,
`kernel.symbols.wildcard_matches`): a tracepoint pattern's fields bound
in every event it matches and refused where they read differently; a
kernel-function pattern matched against available_filter_functions, less
what cannot attach."""

from __future__ import annotations

import pytest

from ktui.kernel.symbols.wildcard_matches import function_matches, read_blacklist
from ktui.lang.bind import bind_probe
from ktui.lang.bind_wildcard import MIXED_RETURNS, expand_events
from ktui.lang.kernel_names import KernelNames
from ktui.lang.model import SpecError, positional
from ktui.lang.spec import parse_probe_text
from tests.unit.tracefs import KERNELS, tracefs


class _NoBtf:
    def problem(self) -> str:
        return "no BTF here"


def bind(text: str, kernel: str = "6.12"):
    return bind_probe(parse_probe_text(text), KernelNames(_NoBtf(), tracefs=str(tracefs(kernel))), text=text)


def bind_error(text: str, kernel: str = "6.12") -> str:
    with pytest.raises(SpecError) as info:
        bind(text, kernel)
    assert "\n" not in str(info.value)
    return info.value.message


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_pattern_binds_its_fields_in_every_event_it_matches(kernel):
    probe = bind("syscalls/sys_exit_*:t:ret", kernel)
    assert probe.members == ("syscalls/sys_exit_openat", "syscalls/sys_exit_read")
    assert str(probe.target) == "syscalls/sys_exit_*"  # the pattern, as written
    assert [(str(positional(f.expr)), f.effective_type) for f in probe.fetches] == [("+16(record)", "s64")]
    assert bind("syscalls/sys_*_read:t", kernel).members == ("syscalls/sys_enter_read", "syscalls/sys_exit_read")


def test_a_field_one_match_lacks_is_refused_naming_that_match():
    message = bind_error("syscalls/sys_enter_*:t:fd")
    assert message.startswith("syscalls/sys_enter_* matches syscalls/sys_enter_openat, and there:")
    assert "no field 'fd'" in message


def test_a_field_at_another_place_in_one_match_is_refused():
    # sched_process_exec's pid and sched_wakeup's are at different offsets
    message = bind_error("sched/sched_*e*:t:args.pid")
    assert "does not lay out its fields as" in message and "narrow the pattern" in message


def test_a_filter_name_is_bound_alike_too():
    probe = bind("syscalls/sys_enter_*:t if __syscall_nr == 0")
    assert len(probe.members) == 2 and probe.bindings


def test_a_pattern_that_matches_nothing_says_how_to_list():
    assert "no tracepoint matches nope/*" in bind_error("nope/*:t")
    assert "ktui list 'syscalls/*'" in bind_error("syscalls/sys_nothing_*:t")


def test_a_kernel_function_pattern_binds_nothing_and_reads_no_errno():
    probe = bind("tcp_*:r:retval")
    assert probe.members is None and probe.errno_width == 0 and probe.return_class == MIXED_RETURNS


def test_expand_events_globs_either_part():
    events = {"syscalls": ["sys_enter_read", "sys_exit_read"], "sched": ["sched_switch"]}
    assert expand_events("*/sys_e*_read", sorted(events), events.__getitem__) == (
        "syscalls/sys_enter_read", "syscalls/sys_exit_read")
    assert expand_events("sch*/*", sorted(events), events.__getitem__) == ("sched/sched_switch",)


NAMES = frozenset({"tcp_sendmsg", "tcp_recvmsg", "tcp_v4_rcv", "__ftrace_invalid_address___42", "[ext4]",
                   "tcp_kprobe_refused", "udp_sendmsg"})


def test_function_patterns_leave_out_what_cannot_attach():
    assert function_matches("tcp_*", NAMES, frozenset({"tcp_kprobe_refused"})) == (
        "tcp_recvmsg", "tcp_sendmsg", "tcp_v4_rcv")
    assert function_matches("*", NAMES, frozenset()) == tuple(sorted(NAMES - {"__ftrace_invalid_address___42",
                                                                               "[ext4]"}))


def test_a_function_pattern_that_matches_nothing_is_one_line():
    with pytest.raises(SpecError) as info:
        function_matches("tcq_*", NAMES, frozenset())
    assert "tcq_*" in info.value.message and info.value.col == 1


def test_the_blacklist_is_read_by_name(tmp_path):
    listed = tmp_path / "blacklist"
    listed.write_text("0xffffffff81000000-0xffffffff81000010\tdo_int3\n0xffffffff81000020-0xffffffff81000030\tnmi\n")
    assert read_blacklist((tmp_path / "absent", listed)) == {"do_int3", "nmi"}
    assert read_blacklist((tmp_path / "absent",)) == frozenset()
