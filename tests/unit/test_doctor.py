"""`ktui doctor` (issue 28): what the kernel has, what ktui does with it,
what could not be checked and why; one screen at 80 columns, exit 0,
--json for scripts, and `ktui vm doctor` through the VM's passthrough."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import ktui.doctor
import ktui.vm
from ktui import cli
from ktui.doctor import Checkup, render, to_json
from ktui.kernel.machine.features import NAMES, Finding, given
from ktui.kernel.machine.preflight import Problem

SCREEN = (80, 24)

# Debian's 6.1, as the probes find it (tests/kernel/test_features.py)
DEBIAN_6_1 = given(ringbuf=True, ringbuf_no_wakeup=True, kprobe_cookie=True, fentry=True,
                   tracing_cookie=True, func_arg=True, trace_args=6, task_storage=True,
                   kprobe_multi=False, kprobe_recursion_misses=False, tracing_recursion_misses=True,
                   run_stats=True, batch_lookup=True)
DEBIAN_6_1.findings["kprobe_multi"] = Finding(False, "EOPNOTSUPP: the kernel is built without CONFIG_FPROBE")
NOT_ROOT = given(**{n: None for n in NAMES if n != "trace_args"}, trace_args=None)
for _name in NAMES:
    NOT_ROOT.findings[_name] = Finding(None, "bpf(2) not permitted: needs root (or CAP_BPF and CAP_PERFMON)")


def checkup(features=DEBIAN_6_1, **kw) -> Checkup:
    return Checkup(release="6.1.0-57-amd64", features=features, **kw)


def fits(text: str) -> None:
    lines = text.splitlines()
    assert all(len(line) <= SCREEN[0] for line in lines), [line for line in lines if len(line) > SCREEN[0]]
    assert len(lines) <= SCREEN[1], f"{len(lines)} lines:\n{text}"


def test_a_6_1_kernel_on_one_screen():
    text = render(checkup())
    fits(text)
    assert "yes  fentry/fexit" in text and "6  arguments a trampoline takes" in text
    assert "no  kprobe_multi links" in text and "CONFIG_FPROBE" in text
    assert "engine      generic" in text
    assert "kprobe NOT counted (kernels before 6.7), fentry/fexit counted" in text
    assert "(<= 6 args)" in text
    assert "kretprobe misses counted (tracefs events)" in text
    assert "Could not check: nothing" in text


def test_it_says_whether_events_say_their_interrupt_context():
    for where in ("__preempt_count", "pcpu_hot"):  # whole, in 80 columns
        text = render(checkup(context=where))
        fits(text)
        assert f"context     events say task/softirq/hardirq/nmi (from {where})\n" in text
    assert "context     events do NOT say softirq/hardirq/nmi (not root)" in render(checkup(NOT_ROOT, root=False))
    assert "(preempt count not found)" in render(checkup())


def test_not_root_says_why_once():
    text = render(checkup(NOT_ROOT, root=False, environment=[
        Problem("root", "need root or CAP_BPF+CAP_PERFMON: run with sudo")]))
    fits(text)
    assert text.count("bpf(2) not permitted") == 1 and "every feature: bpf(2) not permitted" in text
    assert "need root or CAP_BPF+CAP_PERFMON: run with sudo" in text
    assert "compiled by bcc, per probe set (cookies not checked)" in text
    assert "not root" in text.splitlines()[0]


def test_no_tracefs_and_lockdown_are_said():
    text = render(checkup(tracefs=False, environment=[
        Problem("lockdown", "kernel lockdown is 'integrity': probes work, but debugfs is restricted", False),
        Problem("tracefs", "tracefs is not mounted: leftover kprobe_events cannot be listed; mount -t "
                           "tracefs none /sys/kernel/tracing", False)]))
    fits(text)
    assert "kretprobe misses NOT counted: no writable tracefs" in text
    assert "lockdown is 'integrity'" in text and "mount -t" in text


def test_a_kernel_without_cookies_or_ring_buffer():
    old = given(ringbuf=False, kprobe_cookie=False, fentry=True, trace_args=6, run_stats=False,
                kprobe_recursion_misses=False, tracing_recursion_misses=False)
    text = render(checkup(old))
    fits(text)
    assert "compiled by bcc, per probe set (no cookies on kprobe links)" in text
    assert "perf buffers (no BPF ring buffer)" in text and "not available" in text


def test_json_says_the_same():
    body = json.loads(to_json(checkup()))
    assert body["kernel"] == "6.1.0-57-amd64" and body["root"] is True
    assert set(body["features"]) == set(NAMES)
    assert body["features"]["kprobe_multi"]["have"] is False
    assert body["features"]["trace_args"] == {"description": "arguments a trampoline takes", "have": False,
                                              "detail": "given", "value": 6}
    assert body["ktui"]["engine"].startswith("generic") and body["unchecked"] == []


@pytest.fixture
def gathered(monkeypatch):
    made = []

    def fake_gather(*, use_cache=True):
        made.append(use_cache)
        return checkup()

    monkeypatch.setattr(ktui.doctor, "gather", fake_gather)
    return made


def test_the_command_exits_0(gathered):
    r = CliRunner().invoke(cli.main, ["doctor"])
    assert r.exit_code == 0 and "What the kernel has" in r.output and gathered == [True]
    r = CliRunner().invoke(cli.main, ["doctor", "--json", "--no-cache"])
    assert r.exit_code == 0 and json.loads(r.output)["kernel"] and gathered[-1] is False


def test_a_failure_is_one_line(monkeypatch):
    def broken(*, use_cache=True):
        raise OSError(5, "Input/output error\nsecond line")

    monkeypatch.setattr(ktui.doctor, "gather", broken)
    r = CliRunner().invoke(cli.main, ["doctor"])
    assert r.exit_code == 4 and r.output.count("\n") == 1 and r.output.startswith("ktui: doctor:")
    assert "Traceback" not in r.output


def test_ktui_vm_doctor_runs_doctor_in_the_guest(monkeypatch):
    started = []
    monkeypatch.setattr(ktui.vm, "run_in_vm", lambda argv, kernel=None, workload=True: started.append(argv) or 0)
    r = CliRunner().invoke(cli.main, ["vm", "--kernel", "6.12", "doctor", "--json"])
    assert r.exit_code == 0, r.output
    assert started == [["doctor", "--json"]]
