"""A hit's context (task, softirq, hardirq, NMI), issue 28: where the
program reads it (kallsyms and BTF), how it rides in the record's cpu
field, and how every output says it. The kernel's side, that the program
reads the right count, is tests/kernel/test_interrupt_context.py's."""

from __future__ import annotations

import io
import json

import numpy as np

from ktui.btf.decode import RawBtf
from ktui.kernel.codegen import generate
from ktui.kernel.generic import abi
from ktui.kernel.symbols.interrupt_context import NOT_KNOWN, ContextAddresses, context_addresses
from ktui.lang.spec import parse_spec
from ktui.pipeline.format import event_columns
from ktui.pipeline.ndjson import NdjsonSink
from ktui.record.decode import Decoder
from ktui.record.feed import Event
from ktui.record.layout import record_layout
from tests.btfbuild import BtfBuilder

KALLSYMS_6_1 = """\
00000000000199e8 A this_cpu_off
000000000001ef70 A nmi_state
000000000001fb40 A __preempt_count
ffffffffb4756330 T hrtimer_interrupt
ffffffffb5a1cb60 D __per_cpu_offset
"""
KALLSYMS_6_12 = """\
000000000001ff70 A nmi_state
00000000000351c0 A pcpu_hot
ffffffffa2de9e20 D __per_cpu_offset
"""


def pcpu_hot_btf() -> RawBtf:
    """struct pcpu_hot as 6.12 has it: preempt_count inside an anonymous
    struct inside an anonymous union."""
    b = BtfBuilder()
    u8, int_, ptr = b.int("u8", 1), b.int("int", 4, signed=True), b.int("long unsigned int", 8)
    inner = b.struct("", 16, [("current_task", ptr, 0), ("preempt_count", int_, 64), ("cpu_number", int_, 96)])
    pad = b.array(u8, 64, int_)
    union = b.struct("", 64, [("", inner, 0), ("pad", pad, 0)], union=True)
    b.struct("pcpu_hot", 64, [("", union, 0)])
    b.struct("preempt_count_is_not_here", 8, [("preempt_count", ptr, 0)])
    return RawBtf(b.blob())


def test_6_1_reads_its_per_cpu_preempt_count(tmp_path):
    path = tmp_path / "kallsyms"
    path.write_text(KALLSYMS_6_1)
    assert context_addresses(path) == ContextAddresses(0xffffffffb5a1cb60, 0x1fb40, 0x1ef70)


def test_the_running_kernels_addresses_are_read_once_a_process_once_known(monkeypatch):
    from ktui.kernel.symbols import interrupt_context

    reads = []
    answers = [NOT_KNOWN, ContextAddresses(1, 2, 3), ContextAddresses(4, 5, 6)]
    monkeypatch.setattr(interrupt_context, "_known", [])
    monkeypatch.setattr(interrupt_context, "_read_addresses", lambda path, btf: reads.append(path) or answers.pop(0))
    assert context_addresses() == NOT_KNOWN  # not root yet, say: asked again next time
    assert context_addresses() == context_addresses() == ContextAddresses(1, 2, 3)
    assert reads == [interrupt_context.KALLSYMS] * 2


def test_6_12_reads_the_count_inside_pcpu_hot_at_its_btf_offset(tmp_path):
    path = tmp_path / "kallsyms"
    path.write_text(KALLSYMS_6_12)
    found = context_addresses(path, btf=pcpu_hot_btf)
    assert found == ContextAddresses(0xffffffffa2de9e20, 0x351c0 + 8, 0x1ff70)
    assert context_addresses(path) == NOT_KNOWN  # no BTF: the offset is not guessed


def test_without_addresses_the_context_is_not_known(tmp_path):
    path = tmp_path / "kallsyms"
    path.write_text(KALLSYMS_6_1.replace("ffffffffb5a1cb60", "0000000000000000"))  # not root
    assert context_addresses(path) == NOT_KNOWN and not NOT_KNOWN.known
    assert context_addresses(tmp_path / "missing") == NOT_KNOWN


def test_the_programs_write_the_context_into_the_cpu_field():
    program = generate([parse_spec("vfs_read:c:a3")], context=(0x1000, 0x2000, 0x3000))
    assert "#define KTUI_CONTEXT_ADDRS 4096ULL, 8192ULL, 12288ULL" in program.text
    assert "ktui_context_of(KTUI_CONTEXT_ADDRS) << KTUI_CONTEXT_SHIFT" in program.text
    # the generic program: the addresses are config, set when it is loaded
    names = [name for name, _t in abi.Config._fields_]
    assert names[-3:] == ["context_cpu_offsets", "context_preempt_count", "context_nmi_state"]


def test_the_generic_engine_configures_its_programs_context():
    from ktui.kernel.generic.engine import GenericEngine

    engine = GenericEngine.__new__(GenericEngine)
    engine.pid, engine.comm, engine.exclude_pids, engine.cgroup_fd = None, None, (), None
    engine.context = (0x1000, 0x2000, 0x3000)
    config = engine._config()
    assert (config.context_cpu_offsets, config.context_preempt_count, config.context_nmi_state) == (
        0x1000, 0x2000, 0x3000)


def decoded(cpu_field: int, spec: str = "vfs_read:c:a3,cpu") -> Event:
    probe = parse_spec(spec)
    decoder = Decoder(record_layout([probe]), [probe], [7])
    records = np.zeros(1, dtype=decoder.dtype)
    records["cpu"] = cpu_field
    (event,) = decoder.batch(records).events()
    return event


def test_a_record_says_its_context_and_its_cpu_apart():
    softirq = decoded(3 | (2 << 24))
    assert (softirq.cpu, softirq.context, softirq.in_interrupt) == (3, "softirq", True)
    assert softirq.values[1] == 3  # a `cpu` fetch is the CPU alone
    assert [decoded(1 | (n << 24)).context for n in range(6)] == ["", "task", "softirq", "hardirq", "nmi", ""]
    assert decoded(5).context == ""  # before contexts (an older recording): not known


def test_every_output_says_an_interrupts_context():
    probe = parse_spec("net_rx_action:c")
    event = Event(probe_id=1, ts_ns=1_000_000, cpu=0, pid=412, tid=412, comm="curl", latency_ns=None,
                  values=(), context="softirq")
    assert event_columns(event, probe)[-1] == "[softirq]"
    task = Event(probe_id=1, ts_ns=1_000_000, cpu=0, pid=412, tid=412, comm="curl", latency_ns=None,
                 values=(), context="task")
    assert event_columns(task, probe)[-1] == ""  # the usual case says nothing
    out = io.StringIO()
    NdjsonSink(out, feed=None)._write([event, task, Event(1, 1, 0, 1, 1, "x", None, ())], {})
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line.get("context") for line in lines] == ["softirq", "task", None]
