"""lang.wildcards: a pattern's matches and its one-line refusals."""

from ktui.lang import wildcards
from ktui.lang.limits import WILDCARD_MAX_MULTI, WILDCARD_MAX_SINGLE

FUNCTIONS = ["tcp_v4_connect", "tcp_v4_rcv", "tcp_v6_connect", "tcp_sendmsg", "udp_sendmsg",
             "tcp_v4_connect", "Tcp_odd", "tcp_recvmsg"]


def test_expand_is_sorted_unique_and_case_sensitive():
    assert wildcards.expand("tcp_*", FUNCTIONS) == (
        "tcp_recvmsg", "tcp_sendmsg", "tcp_v4_connect", "tcp_v4_rcv", "tcp_v6_connect")
    assert wildcards.expand("tcp_v?_connect", FUNCTIONS) == ("tcp_v4_connect", "tcp_v6_connect")
    assert wildcards.expand("[tu]*_sendmsg", FUNCTIONS) == ("tcp_sendmsg", "udp_sendmsg")
    assert wildcards.expand("nothing*", FUNCTIONS) == ()
    assert wildcards.expand("*", iter(FUNCTIONS)) == tuple(sorted(set(FUNCTIONS)))


def test_expand_takes_tracepoints_whole():
    events = ["syscalls/sys_enter_read", "syscalls/sys_exit_read", "sched/sched_switch"]
    assert wildcards.expand("syscalls/sys_enter_*", events) == ("syscalls/sys_enter_read",)
    assert wildcards.expand("*/sys_*_read", events) == ("syscalls/sys_enter_read", "syscalls/sys_exit_read")


def test_too_many_is_one_line_with_the_numbers_and_narrower_patterns():
    names = [f"tcp_v4_f{i}" for i in range(900)] + [f"tcp_v6_f{i}" for i in range(334)]
    line = wildcards.too_many("tcp_*", 1234, WILDCARD_MAX_SINGLE, wildcards.FUNCTIONS, names)
    assert line == ("tcp_* matches 1,234 kernel functions, more than the 512 ktui attaches one by one "
                    "on this kernel: narrow the pattern (tcp_v4_*, tcp_v6_*, ...)")
    multi = wildcards.too_many("*", 60000, WILDCARD_MAX_MULTI, wildcards.FUNCTIONS)
    assert "more than the 4,096 ktui attaches in one kprobe_multi link" in multi
    assert "\n" not in multi and multi.endswith(": narrow the pattern")  # `*`: no narrower prefix to offer


def test_too_many_for_tracepoints():
    line = wildcards.too_many("*/*", 2000, WILDCARD_MAX_SINGLE, wildcards.TRACEPOINTS)
    assert line.startswith("*/* matches 2,000 tracepoints, more than the 512 ktui attaches one by one")


def test_matches_nothing_has_a_did_you_mean():
    assert wildcards.matches_nothing("tpc_*", wildcards.FUNCTIONS, ["tcp_sendmsg", "tcp_recvmsg"]) == (
        "tpc_* matches no kernel functions on this kernel (did you mean tcp_sendmsg, tcp_recvmsg?)")
    assert wildcards.matches_nothing("zz/*", wildcards.TRACEPOINTS, []) == (
        "zz/* matches no tracepoints on this kernel")
