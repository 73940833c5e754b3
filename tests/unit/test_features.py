"""Kernel features probed once per kernel and cached (issue 28, "features
probed, not guessed"), on the host with a fake prober: what is cached and
what is asked again, a cache that cannot be trusted, and how a probe's
failure becomes yes, no or unknown. The probes themselves run against
real kernels in tests/kernel/test_features.py."""

from __future__ import annotations

import errno
import json
import os
import stat

import pytest

from ktui.kernel.maps import bpfsys
from ktui.kernel.machine import feature_probes, features
from ktui.kernel.maps.bpfasm import JNE_K, R0, Asm
from ktui.kernel.maps.bpfsys import BpfError
from ktui.kernel.machine.features import NAMES, Finding, detect, given
from ktui.kernel.generic.loader import program_text

# the real probes, with bpf(2) stubbed out below (conftest refuses any other use here)
probe_all = feature_probes.probe_all


class FakeProber:
    """Answers `answers` (name -> Finding; every other name: yes), and
    remembers what it was asked."""

    def __init__(self, **answers: Finding) -> None:
        self.answers = answers
        self.asked: list[set[str]] = []

    def __call__(self, names: set[str]) -> dict[str, Finding]:
        self.asked.append(set(names))
        return {n: self.answers.get(n, Finding(True, "fake")) for n in names}


def test_probed_once_then_from_the_cache(tmp_path):
    probe = FakeProber(kprobe_multi=Finding(False, "EOPNOTSUPP"), trace_args=Finding(False, "refused", 6))
    first = detect(directory=tmp_path / "ktui", probe=probe)
    assert probe.asked == [set(NAMES)] and first.source == "probed"
    assert first.has("kprobe_multi") is False and first.trace_args == 6 and first.func_arg_helpers
    path = first.path
    assert path.parent == tmp_path / "ktui"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    second = detect(directory=tmp_path / "ktui", probe=probe)
    assert len(probe.asked) == 1, "a later start probed again"
    assert second.source == "cache" and second.findings == first.findings


def test_a_cache_directory_given_as_a_str_is_a_path(tmp_path):
    """SessionOptions.cache_dir may be a str (the kernel tests' child, an
    embedding script): detect took `directory / name` and raised TypeError
    at the session's start (6.12's test_sigkill_leaves_a_disarmed_event...)."""
    probe = FakeProber()
    found = detect(directory=str(tmp_path / "ktui"), probe=probe)
    assert found.source == "probed" and found.path.parent == tmp_path / "ktui"
    assert detect(directory=str(tmp_path / "ktui"), probe=probe).source == "cache"


def test_unknown_answers_are_never_cached_and_asked_again(tmp_path):
    """No privilege now says nothing about the next start: an unknown is
    asked again, and never read back as a no."""
    probe = FakeProber(fentry=Finding(None, "not permitted"), run_stats=Finding(None, "not permitted"))
    first = detect(directory=tmp_path, probe=probe)
    assert first.has("fentry") is None and first.has("ringbuf") is True
    cached = json.loads(first.path.read_text())["findings"]
    assert "fentry" not in cached and "run_stats" not in cached and cached["ringbuf"]["have"] is True
    probe.answers = {}
    second = detect(directory=tmp_path, probe=probe)
    assert probe.asked[1] == {"fentry", "run_stats"}
    assert second.source == "cache+probed" and second.has("fentry") is True
    assert detect(directory=tmp_path, probe=probe).source == "cache"


def test_nothing_known_writes_nothing(tmp_path):
    probe = FakeProber(**{n: Finding(None, "not permitted") for n in NAMES})
    found = detect(directory=tmp_path / "ktui", probe=probe)
    assert found.path is None and not (tmp_path / "ktui").exists()
    assert set(found.unknown()) == set(NAMES)


def test_no_cache_probes_and_keeps_nothing(tmp_path):
    probe = FakeProber()
    detect(directory=tmp_path, probe=probe)
    again = detect(directory=tmp_path, probe=probe, use_cache=False)
    assert len(probe.asked) == 2 and again.source == "probed" and again.path is None


def test_another_kernel_is_probed_afresh(tmp_path, monkeypatch):
    probe = FakeProber()
    detect(directory=tmp_path, probe=probe)
    monkeypatch.setattr(features, "kernel_key", lambda: "another-kernel")
    detect(directory=tmp_path, probe=probe)
    assert len(probe.asked) == 2
    assert len(list(tmp_path.glob("features-*.json"))) == 2


@pytest.mark.parametrize("spoil, words", [
    (lambda p: p.write_text("{not json"), "corrupt"),
    (lambda p: p.write_text(json.dumps({"format": features.PROBES_FORMAT, "key": "x", "findings": {}})), "corrupt"),
    (lambda p: p.chmod(0o666), "writable by group or others"),
])
def test_a_cache_not_to_trust_is_probed_again(tmp_path, spoil, words):
    probe = FakeProber()
    path = detect(directory=tmp_path, probe=probe).path
    spoil(path)
    said = []
    again = detect(directory=tmp_path, probe=probe, log=said.append)
    assert len(probe.asked) == 2 and again.has("ringbuf") is True
    assert any(words in line for line in said), said


def test_a_cached_answer_of_the_wrong_shape_is_corrupt(tmp_path):
    probe = FakeProber()
    path = detect(directory=tmp_path, probe=probe).path
    body = json.loads(path.read_text())
    body["findings"]["ringbuf"]["have"] = None  # an unknown never goes in: someone wrote it
    path.write_text(json.dumps(body))
    said = []
    detect(directory=tmp_path, probe=probe, log=said.append)
    assert len(probe.asked) == 2 and "corrupt" in said[0]


def test_the_cache_keeps_a_few_kernels(tmp_path, monkeypatch):
    probe = FakeProber()
    for i in range(features.MAX_FILES + 3):
        monkeypatch.setattr(features, "kernel_key", lambda i=i: f"kernel-{i}")
        detect(directory=tmp_path, probe=probe)
        os.utime(tmp_path / f"features-kernel-{i}.json", (1000 + i, 1000 + i))
    left = sorted(p.name for p in tmp_path.glob("features-*.json"))
    assert len(left) == features.MAX_FILES and "features-kernel-0.json" not in left


def test_one_probe_per_process(monkeypatch):
    """Every user of the features in a process gets the same answers: the
    first caller's (the cache makes later processes probe nothing)."""
    monkeypatch.setattr(features, "_memo", None)
    calls = []
    monkeypatch.setattr(features, "detect", lambda **kw: calls.append(kw) or given(ringbuf=True))
    assert features.kernel_features() is features.kernel_features(use_cache=False)
    assert len(calls) == 1


def test_given_features_and_what_follows():
    f = given(func_arg=None, trace_args=None)
    assert not f.func_arg_helpers and f.trace_args is None and f["fentry"].detail == "not probed"
    assert given(func_arg=True, trace_args=12).func_arg_helpers and given(trace_args=12).trace_args == 12
    assert given(trace_args=6)["trace_args"].word == "6" and given(fentry=None)["fentry"].word == "?"
    with pytest.raises(KeyError):
        given(fentry_typo=True)


def test_the_loader_defines_func_arg_helpers_from_the_probe_not_the_version():
    """program.c keys the tracing variant's argument reads on
    KTUI_FUNC_ARG_HELPERS, which the loader defines from the probed
    feature; the text no longer asks LINUX_VERSION_CODE, and refuses to
    compile without the define."""
    for helpers in (False, True):
        for kind in ("kprobe", "tracing", "tracepoint"):
            text = program_text(kind, func_arg_helpers=helpers)
            assert f"#define KTUI_FUNC_ARG_HELPERS {int(helpers)}\n" in text.split("#include", 1)[0]
    body = program_text().split("#include", 1)[1]
    assert "LINUX_VERSION_CODE" not in body and "#error" in body
    assert program_text(func_arg_helpers=False) != program_text(func_arg_helpers=True)  # two cache keys


# ------------------------------------------------------------------ how probes answer


def _bpf_error(err: int, log: str = "") -> BpfError:
    return BpfError(err, "loading program ktui_feature", log)


def test_a_refusal_for_want_of_privilege_is_unknown_never_no(monkeypatch):
    def refuse(*a, **kw):
        raise _bpf_error(errno.EPERM)

    monkeypatch.setattr(bpfsys, "map_create", refuse)
    monkeypatch.setattr(bpfsys, "prog_load", refuse)
    monkeypatch.setattr(bpfsys, "btf_load", refuse)
    monkeypatch.setattr(bpfsys, "enable_stats", refuse)
    found = probe_all(btf_opener=lambda: None)
    assert set(found) == set(NAMES)
    # no BTF is a real no for fentry; everything that needed bpf(2) is unknown
    unknown = {n for n, f in found.items() if f.have is None}
    assert unknown == set(NAMES) - {"fentry", "tracing_cookie", "func_arg", "trace_args"}
    assert {found[n].detail for n in unknown} == {feature_probes.NOT_PERMITTED}


def test_an_unknown_helper_is_a_no(monkeypatch):
    """The verifier's "unknown func" (a helper this kernel does not give
    kprobe programs) is the kernel's own no, as libbpf reads it."""
    monkeypatch.setattr(bpfsys, "map_create", lambda *a, **kw: os.open(os.devnull, os.O_RDONLY))

    def load(insns, **kw):
        raise _bpf_error(errno.EINVAL, "0: R1=ctx()\n1: (85) call unknown#174\ninvalid func unknown#174\n")

    monkeypatch.setattr(bpfsys, "prog_load", load)
    found = probe_all({"kprobe_cookie"})
    assert found["kprobe_cookie"] == Finding(False, "bpf_get_attach_cookie is not offered to kprobe programs")


@pytest.mark.parametrize("err, have, words", [
    (errno.EOPNOTSUPP, False, "CONFIG_FPROBE"),
    (errno.EINVAL, False, "refused BPF_TRACE_KPROBE_MULTI"),
    (errno.EPERM, None, "not permitted"),
    (errno.ENOENT, None, "No such file"),
])
def test_kprobe_multi_answers(monkeypatch, err, have, words):
    monkeypatch.setattr(bpfsys, "prog_load", lambda *a, **kw: os.open(os.devnull, os.O_RDONLY))

    def link(prog, symbols):
        raise BpfError(err, "linking kprobe_multi")

    monkeypatch.setattr(bpfsys, "link_kprobe_multi", link)
    found = probe_all({"kprobe_multi"})["kprobe_multi"]
    assert found.have is have and words in found.detail, found


def test_a_probe_that_breaks_is_unknown(monkeypatch):
    def broken(*a, **kw):
        raise RuntimeError("a bug")

    monkeypatch.setattr(bpfsys, "map_create", broken)
    found = probe_all({"ringbuf"})["ringbuf"]
    assert found.have is None and "a bug" in found.detail


def test_the_assembler_resolves_forward_jumps():
    code = Asm().mov_imm(R0, 1).jump(JNE_K, R0, 7, "out").mov_imm(R0, 2).map_fd(1, 5).label("out").exit().code()
    assert len(code) == 6 * 8
    assert code[8:16] == bytes([JNE_K, 0]) + (3).to_bytes(2, "little") + (7).to_bytes(4, "little")
    with pytest.raises(ValueError):
        Asm().label("back").jump(JNE_K, R0, 0, "back").code()


def test_the_task_storage_btf_is_whole():
    blob = feature_probes._int_btf()
    magic, version, flags, hdr_len, type_off, type_len, str_off, str_len = \
        __import__("struct").unpack_from("<HBBIIIII", blob)
    assert (magic, version, hdr_len) == (0xEB9F, 1, 24)
    assert len(blob) == hdr_len + type_len + str_len and str_off == type_len
    assert blob[hdr_len + str_off:] == b"\0int\0long\0"
