"""Plans for the generic program: what each fetch and filter becomes.

The kernel test (tests/kernel/test_generic.py) proves the values equal the
compiled programs'; these pin the encoding on the host."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from ktui.kernel.generic import abi
from ktui.kernel.generic.plan import NotGeneric, build_plan, errno_check, record_size
from ktui.lang.filters import parse_filter
from ktui.lang.model import ARG_REGISTERS
from ktui.lang.spec import parse_spec
from ktui.record.layout import HEADER_SIZE, probe_layout


def plan_of(spec: str, filt: str | None = None) -> abi.Plan:
    probe = parse_spec(spec)
    if filt is not None:
        probe = dataclasses.replace(probe, filter=parse_filter(filt))
    return build_plan(probe, gen=7)


def test_call_probe_arguments_are_registers_and_return_probe_arguments_are_saved():
    call = plan_of("vfs_read:c:a3")
    assert call.fetch[0].src == abi.SRC_REG
    assert abi.PT_REGS[call.fetch[0].reg] == ARG_REGISTERS[2]
    assert call.flags & abi.F_REGS and not call.flags & abi.F_RETURN
    ret = plan_of("vfs_read:r:a3")
    assert ret.fetch[0].src == abi.SRC_ARG and ret.fetch[0].reg == 2
    assert ret.flags & abi.F_RETURN and not ret.flags & abi.F_REGS


def test_dereference_chain_is_innermost_first():
    plan = plan_of("f:c:+8(+16(-24(rdi))):u16")
    f = plan.fetch[0]
    assert f.nderef == 3
    assert list(f.offs)[:3] == [-24, 16, 8]
    assert f.width == 2 and f.kind == abi.K_UINT


# symbol is laid out as a signed 64-bit slot (record.layout.slot_kind), formatted unsigned
@pytest.mark.parametrize("ftype,kind,width", [
    ("u8", abi.K_UINT, 1), ("s16", abi.K_SINT, 2), ("x32", abi.K_UINT, 4), ("s64", abi.K_SINT, 8),
    ("symbol", abi.K_SINT, 8), ("string", abi.K_KSTR, 0), ("ustring", abi.K_USTR, 0),
])
def test_fetch_types(ftype, kind, width):
    f = plan_of(f"f:c:+0(a1):{ftype}").fetch[0]
    assert (f.kind, f.width) == (kind, width)


def test_payload_offsets_are_the_compiled_layout():
    spec = "f:c:a1,s=+0(a2):string,c=comm,a3:s32"
    plan = plan_of(spec)
    layout = probe_layout(parse_spec(spec))
    for i, slot in enumerate(layout.slots):
        if slot.kind == "header":
            assert plan.fetch[i].kind == abi.K_HEADER
        else:
            assert plan.fetch[i].dest == slot.offset


def test_retval_is_signed_and_a_fetch_name_resolves_first():
    plan = plan_of("f:r:n=a2", "retval < 0 && n > 10")
    c0, c1 = plan.cmps[0], plan.cmps[1]
    assert (c0.lsrc, c0.sign, c0.op) == (abi.SRC_RETVAL, 1, abi.CMP_OPS.index("<"))
    assert (c1.lsrc, c1.lreg, c1.sign, c1.rsrc, c1.imm) == (abi.SRC_VAL, 0, 0, abi.SRC_CONST, 10)


def test_negative_constant_compares_signed():
    c = plan_of("f:c:a1", "a1 > -1").cmps[0]
    assert c.sign == 1 and c.imm == 2**64 - 1


def _truth_of(plan: abi.Plan, results: tuple[bool, ...]) -> bool:
    bits = sum(1 << i for i, r in enumerate(results) if r)
    return bool(plan.truth >> bits & 1)


@pytest.mark.parametrize("filt,fn", [
    ("a1 == 1", lambda a: a),
    ("!(a1 == 1)", lambda a: not a),
    ("a1 == 1 && a2 == 2", lambda a, b: a and b),
    ("a1 == 1 || a2 == 2 && a3 == 3", lambda a, b, c: a or (b and c)),
    ("(a1 == 1 || a2 == 2) && !(a3 == 3 || a1 == 1)", lambda a, b, c: (a or b) and not (c or a)),
])
def test_truth_table_is_the_filter(filt, fn):
    plan = plan_of("f:c", filt)
    n = plan.ncmps
    assert n == fn.__code__.co_argcount  # a repeated comparison is evaluated once
    for results in itertools.product((False, True), repeat=n):
        assert _truth_of(plan, results) == fn(*results)


def test_string_comparison_words_and_mask():
    c = plan_of("f:c:s=+0(a1):string", 's == "0123456789"').cmps[0]
    assert c.kind == abi.CMP_STR and c.lsrc == abi.SRC_STRVAL
    assert c.nwords == 2  # 10 characters and the NUL
    assert c.str[0] == int.from_bytes(b"01234567", "little")
    assert c.str[1] == int.from_bytes(b"89", "little")
    assert c.last_mask == (1 << 24) - 1  # "8", "9" and the NUL count


def test_comm_longer_than_the_kernel_keeps_never_matches():
    plan = plan_of("f:c", 'comm == "0123456789abcdef" || a1 == 1')
    assert plan.ncmps == 1  # the impossible comparison became a constant
    assert _truth_of(plan, (True,)) and not _truth_of(plan, (False,))
    plan = plan_of("f:c", 'comm != "0123456789abcdef"')
    assert plan.ncmps == 0 or plan.truth & 1


def test_too_many_comparisons_is_not_generic():
    filt = " || ".join(f"a1 == {i}" for i in range(abi.MAX_CMPS + 1))
    with pytest.raises(NotGeneric, match="comparisons"):
        plan_of("f:c", filt)
    plan_of("f:c", " || ".join(f"a1 == {i}" for i in range(abi.MAX_CMPS)))


def test_counting_probe_does_not_emit():
    plan = plan_of("f:c")
    assert not plan.flags & abi.F_EMITS and plan.nfetch == 0


def test_sampling_and_record_size():
    probe = dataclasses.replace(parse_spec("f:c:a1"), sample=10, rate_limit=5)
    plan = build_plan(probe, gen=1)
    assert (plan.sample, plan.rate_limit) == (10, 5)


@pytest.mark.parametrize("spec,payload", [
    ("f:c", 0), ("f:c:comm,pid", 0), ("f:c:a1", 8), ("f:c:a1,a2", 16),
    ("f:c:+0(a1):string", 64), ("f:c:a1,+0(a2):ustring,a3", 80),
])
def test_a_record_is_exactly_its_probes_header_and_payload(spec, payload):
    """Not the largest of the session: a probe that fetches one integer
    sends 56 bytes, whatever its neighbours fetch, and no byte the hit did
    not write."""
    plan = build_plan(parse_spec(spec), gen=1)
    assert plan.record_size == HEADER_SIZE + payload == record_size(parse_spec(spec))


def test_the_fetches_the_filter_reads_run_first():
    """A hit the filter turns away reads nothing else: the fetches its
    comparisons read run before it (fetch_before), the rest after it
    (fetch_after), only for a hit that passed."""
    plan = plan_of("f:c:name=+0(a2):ustring,size=a3,fd=a1", "fd == 3 && name == \"x\"")
    assert (plan.fetch_before, plan.fetch_after) == (0b101, 0b010)


def test_a_filter_on_comm_alone_runs_no_fetch_before_it():
    plan = plan_of("f:c:fname=+0(a2):ustring,c=comm", 'comm == "nobody"')
    assert (plan.fetch_before, plan.fetch_after) == (0, 0b01)  # comm is in the header: no fetch


@pytest.mark.parametrize("errno,width,returns,mode,check", [
    ("", 4, "int", 4, "int"), ("", 8, "long", 8, "long"), ("", 8, "pointer", 8, "pointer"),
    ("", 0, "void", 0, "off: void"), ("off", 4, "int", 0, "off: by the probe set"),
    ("on", 8, "long", 8, "long"), ("", None, "", 0, "off: no BTF"), ("on", None, "", abi.ERRNO_GUESS, "guessed"),
])
def test_errno_mode_follows_the_functions_return_type(errno, width, returns, mode, check):
    probe = dataclasses.replace(parse_spec("f:r:retval"), errno=errno, errno_width=width, return_class=returns)
    assert build_plan(probe, gen=1).errno_mode == mode
    assert errno_check(probe) == check


def test_a_call_probe_counts_no_errno():
    assert plan_of("f:c:a1").errno_mode == 0


def test_c_declarations_match_the_ctypes_layout():
    text = abi.c_declarations()
    assert "struct ktui_plan {" in text and "u64 truth;" in text
    assert f"#define KTUI_MAX_CMPS {abi.MAX_CMPS}" in text
    # every field of every struct is declared, in order
    for cls in (abi.Fetch, abi.Cmp, abi.Plan, abi.Config):
        block = text.split(f"struct ktui_{cls.__name__.lower()} {{", 1)[1].split("};", 1)[0]
        names = [line.split()[-1].split("[")[0].rstrip(";") for line in block.strip().splitlines()]
        assert names == [name for name, _ in cls._fields_]


def _flags(spec: str, filt: str | None = None, tracing: bool = False, **changes) -> int:
    probe = parse_spec(spec)
    if filt is not None:
        probe = dataclasses.replace(probe, filter=parse_filter(filt))
    if changes:
        probe = dataclasses.replace(probe, **changes)
    return build_plan(probe, gen=1, tracing=tracing).flags


def _work(spec: str, filt: str | None = None, tracing: bool = False, **changes) -> int:
    return _flags(spec, filt, tracing, **changes) & (abi.F_REGS | abi.F_ARGS | abi.F_TIME | abi.F_CPU)


# What each hit gathers before the plan runs: only what the plan reads.
@pytest.mark.parametrize("spec,filt,tracing,expected", [
    # a counting probe: nothing at all, by kprobe or by fentry
    ("f:c", None, False, 0),
    ("f:c", None, True, 0),
    # its filter reads an argument: the register (kprobe), the argument (fentry)
    ("f:c", "a3 == 7", False, abi.F_REGS),
    ("f:c", "a3 == 7", True, abi.F_ARGS),
    ("f:c", "rdx == 7", False, abi.F_REGS),
    # a filter on the CPU, the pid, comm
    ("f:c", "cpu == 0", True, abi.F_CPU),
    ("f:c", "pid == 1", True, 0),
    ("f:c", 'comm == "x"', False, 0),
    # a fetch: an event (time and CPU for its header) and what it reads
    ("f:c:a3", None, False, abi.F_REGS | abi.F_TIME | abi.F_CPU),
    ("f:c:a3", None, True, abi.F_ARGS | abi.F_TIME | abi.F_CPU),
    ("f:c:comm,pid", None, True, abi.F_TIME | abi.F_CPU),
    # a counting return probe: its latency, no arguments saved
    ("f:r", None, False, abi.F_TIME),
    ("f:r", None, True, abi.F_TIME),
    ("f:r", "retval < 0", True, abi.F_TIME),
    # ... unless its return reads them: the entry half saves them
    ("f:r", "a2 == 5", False, abi.F_ARGS | abi.F_TIME),
    ("f:r:retval,a3", None, True, abi.F_ARGS | abi.F_TIME | abi.F_CPU),
    ("f:r:retval", None, False, abi.F_TIME | abi.F_CPU),
    ("f:r:rax", None, False, abi.F_REGS | abi.F_TIME | abi.F_CPU),
])
def test_work_flags_are_what_the_plan_reads(spec, filt, tracing, expected):
    assert _work(spec, filt, tracing) == expected


def _bare(spec: str, filt: str | None = None, tracing: bool = False, **changes) -> bool:
    return bool(_flags(spec, filt, tracing, **changes) & abi.F_BARE)


# F_BARE: the hit is the set-wide filters and the count (a return: the latency), nothing else.
@pytest.mark.parametrize("tracing", [False, True])
def test_only_a_probe_that_just_counts_is_bare(tracing):
    assert _bare("f:c", tracing=tracing)
    assert _bare("f:c", f'comm != "{"x" * 20}"', tracing)  # a filter known to pass
    assert not _bare("f:c", f'comm == "{"x" * 20}"', tracing)  # ... known to fail
    assert not _bare("f:c", "pid == 1", tracing)
    assert not _bare("f:c", 'comm == "x"', tracing)
    assert not _bare("f:c:a3", tracing=tracing)  # it emits
    assert _bare("f:r", tracing=tracing)  # a return probe: it counts and times
    assert not _bare("f:r", "retval < 0", tracing)
    assert not _bare("f:r:retval", tracing=tracing)
    assert not _bare("f:c:pid", tracing=tracing, rate_limit=5)


def test_a_filter_known_in_advance_is_its_truth_table_alone():
    """A string longer than its field never matches: no comparison is left
    for the kernel, and the table's one bit says whether every hit passes
    (the program reads it when there is no comparison). Validated input
    cannot reach this today (literals are capped below the fields: comm 15,
    strings 63); a Probe built in code can, and the plan must not rely on
    the checks upstream."""
    never = dataclasses.replace(parse_spec("f:c"), filter=parse_filter(f'comm == "{"x" * 20}"'))
    always = dataclasses.replace(parse_spec("f:c"), filter=parse_filter(f'comm != "{"x" * 20}"'))
    plain = parse_spec("f:c")
    for probe, passes in ((never, 0), (always, 1), (plain, 1)):
        plan = build_plan(probe, gen=1)
        assert (plan.ncmps, plan.truth & 1) == (0, passes), probe


def test_with_events_off_a_hit_is_counted_and_aggregated_but_written_nowhere():
    """`ktui export` (SessionOptions.events off): no F_EMITS, so the program
    returns after the count and the aggregations; a call no longer takes
    the time or the CPU an event's header needed, what the filter and the
    aggregations read is read as before, and a probe whose fetches were
    only the header's (comm, pid) becomes bare: a counter's program."""
    from ktui.lang.spec import parse_probe_text

    def off(spec, filt=None):
        probe = parse_probe_text(spec)
        if filt is not None:
            probe = dataclasses.replace(probe, filter=parse_filter(filt))
        return build_plan(probe, gen=1, events=False), build_plan(probe, gen=1)

    gathers = abi.F_REGS | abi.F_ARGS | abi.F_TIME | abi.F_CPU
    for spec in ("f:c:a3", "f:c:comm,pid", "f:c:a1,a2"):  # a counter's program, whatever it fetched
        quiet, loud = off(spec)
        assert loud.flags & abi.F_EMITS and not quiet.flags & (abi.F_EMITS | gathers), spec
        assert quiet.flags & abi.F_BARE and not loud.flags & abi.F_BARE, spec
        assert quiet.fetch_after == 0, spec
    quiet, _ = off("f:c:a3", "a1 == 5")  # the filter's register still gathered
    assert quiet.flags & gathers == abi.F_REGS and not quiet.flags & abi.F_BARE
    quiet, loud = off("f:r:retval")
    # a return's value is the bare path's too (its errnos): it counts and times
    assert quiet.flags & (abi.F_TIME | abi.F_CPU | abi.F_EMITS | abi.F_BARE) == abi.F_TIME | abi.F_BARE
    # a filter and an aggregation read what they read, events or not
    quiet, loud = off("f:c:a1,a3 count(a3)", "a1 == 5")
    assert not quiet.flags & abi.F_EMITS
    for field in ("ncmps", "agg", "fetch_before", "fetch_agg", "nfetch"):
        assert getattr(quiet, field) == getattr(loud, field), field
    assert quiet.flags & ~abi.F_EMITS & ~(abi.F_TIME | abi.F_CPU) == loud.flags & ~abi.F_EMITS & ~(abi.F_TIME | abi.F_CPU)


def test_a_rate_limit_needs_the_time():
    assert _work("f:c:pid", rate_limit=5) & abi.F_TIME
    assert _work("f:c:pid", sample=3) & abi.F_TIME  # it emits
