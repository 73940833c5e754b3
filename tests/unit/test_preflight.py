"""Preflight: every finding on a fake file-system root, no root or kernel needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktui.kernel.machine.preflight import (
    CAP_BPF,
    CAP_PERFMON,
    CAP_SYS_ADMIN,
    check_environment,
    effective_caps,
    lockdown_mode,
    preflight,
    preflight_warnings,
)

RELEASE = "6.1.0-test-amd64"
MOUNTS = "sysfs /sys sysfs rw 0 0\nsecurityfs /sys/kernel/security securityfs rw 0 0\n" \
         "debugfs /sys/kernel/debug debugfs rw 0 0\ntracefs /sys/kernel/tracing tracefs rw 0 0\n"


def touch(root: Path, rel: str, text: str = "") -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


@pytest.fixture
def good(tmp_path: Path) -> Path:
    """A machine where everything is in place."""
    touch(tmp_path, "sys/bus/event_source/devices/kprobe/type", "6\n")
    touch(tmp_path, "sys/kernel/security/lockdown", "[none] integrity confidentiality\n")
    (tmp_path / f"lib/modules/{RELEASE}/build").mkdir(parents=True)
    touch(tmp_path, "sys/kernel/btf/vmlinux")
    (tmp_path / "sys/kernel/debug/kprobes").mkdir(parents=True)
    touch(tmp_path, "sys/kernel/tracing/trace")
    touch(tmp_path, "proc/self/mounts", MOUNTS)
    touch(tmp_path, "proc/cmdline", "quiet\n")
    return tmp_path


def run(root: Path, **kw):
    args = dict(root=root, euid=0, caps=0, release=RELEASE, have_bcc=lambda: True)
    args.update(kw)
    return check_environment(**args)


def keys(findings, fatal=None):
    return [p.key for p in findings if fatal is None or p.fatal is fatal]


def test_good_machine_has_no_findings(good):
    assert run(good) == []


def test_every_message_is_one_line_and_says_what_to_do(tmp_path):
    # An empty root: everything is missing, non-root, no caps, no bcc.
    found = run(tmp_path, euid=1000, have_bcc=lambda: False)
    assert set(keys(found, True)) == {"root", "bcc", "kprobes", "headers"}
    assert set(keys(found, False)) == {"lockdown-unknown", "btf", "debugfs", "tracefs"}
    for p in found:
        assert "\n" not in p.message
        assert ":" in p.message  # "what is wrong: what to do"
    # fatal problems come first
    assert [p.fatal for p in found] == sorted((p.fatal for p in found), reverse=True)


@pytest.mark.parametrize("caps,ok", [
    (0, False),
    (1 << CAP_BPF, False),
    (1 << CAP_PERFMON, False),
    ((1 << CAP_BPF) | (1 << CAP_PERFMON), True),
    (1 << CAP_SYS_ADMIN, True),
])
def test_non_root_needs_bpf_and_perfmon(good, caps, ok):
    found = run(good, euid=1000, caps=caps)
    assert ("root" in keys(found)) is not ok
    if not ok:
        assert "CAP_BPF+CAP_PERFMON" in found[0].message and "sudo" in found[0].message


BPF_PERFMON = (1 << CAP_BPF) | (1 << CAP_PERFMON)


@pytest.mark.parametrize("paranoid,caps,warned", [
    ("3\n", BPF_PERFMON, True),  # Debian's default: a kprobe needs CAP_SYS_ADMIN
    ("3\n", BPF_PERFMON | (1 << CAP_SYS_ADMIN), False),
    ("2\n", BPF_PERFMON, False),  # upstream's highest: CAP_PERFMON opens it
    (None, BPF_PERFMON, False),  # not readable: nothing said
])
def test_debians_perf_paranoid_3_says_a_kprobe_needs_cap_sys_admin(good, paranoid, caps, warned):
    if paranoid is not None:
        touch(good, "proc/sys/kernel/perf_event_paranoid", paranoid)
    found = {p.key: p for p in run(good, euid=1000, caps=caps)}
    assert ("perf_paranoid" in found) is warned
    if warned:
        assert not found["perf_paranoid"].fatal
        assert "kernel.perf_event_paranoid is 3" in found["perf_paranoid"].message
        assert "CAP_SYS_ADMIN" in found["perf_paranoid"].message
    # as root nothing is said, whatever the sysctl
    assert "perf_paranoid" not in keys(run(good, euid=0, caps=0))


def test_a_refused_kprobe_says_which_privilege_this_kernel_wants():
    from ktui.kernel.attach.privilege import perf_permission_reason

    debian = perf_permission_reason(caps=BPF_PERFMON, paranoid=3)
    assert "kernel.perf_event_paranoid is 3" in debian and "CAP_SYS_ADMIN" in debian
    assert "perf_event_paranoid=2" in debian  # the other way out
    assert "need root or CAP_PERFMON" in perf_permission_reason(caps=BPF_PERFMON, paranoid=2)
    assert "need root or CAP_PERFMON" in perf_permission_reason(caps=1 << CAP_SYS_ADMIN, paranoid=3)


def test_root_needs_no_caps(good):
    assert "root" not in keys(run(good, euid=0, caps=0))


def test_caps_read_from_proc_status(tmp_path):
    status = touch(tmp_path, "status", "Name:\tx\nCapEff:\t000001fffeffffff\n")
    assert effective_caps(status) == 0x1fffeffffff
    assert effective_caps(touch(tmp_path, "bad", "CapEff:\tzz\n")) == 0
    assert effective_caps(tmp_path / "missing") == 0


def test_missing_bcc_names_the_package(good):
    found = run(good, have_bcc=lambda: False)
    assert keys(found) == ["bcc"]
    assert "python3-bpfcc" in found[0].message


def test_no_kprobes_points_to_ktui_vm(good):
    (good / "sys/bus/event_source/devices/kprobe/type").unlink()
    found = run(good)
    assert keys(found) == ["kprobes"]
    assert "CONFIG_KPROBES" in found[0].message and "`ktui vm`" in found[0].message


@pytest.mark.parametrize("text,key,fatal", [
    ("none integrity [confidentiality]\n", "lockdown", True),
    ("none [integrity] confidentiality\n", "lockdown", False),
    ("[none] integrity confidentiality\n", None, None),
])
def test_lockdown_levels(good, text, key, fatal):
    touch(good, "sys/kernel/security/lockdown", text)
    found = run(good)
    if key is None:
        assert found == []
    else:
        assert keys(found) == [key] and found[0].fatal is fatal
    if fatal:
        assert "`ktui vm`" in found[0].message


def test_lockdown_unreadable_without_securityfs_says_mount_it(good):
    (good / "sys/kernel/security/lockdown").unlink()
    touch(good, "proc/self/mounts", MOUNTS.replace("securityfs", "xfs"))
    found = run(good)
    assert keys(found) == ["lockdown-unknown"] and not found[0].fatal
    assert "mount -t securityfs" in found[0].message


def test_lockdown_from_boot_line_when_securityfs_is_missing(good):
    (good / "sys/kernel/security/lockdown").unlink()
    touch(good, "proc/self/mounts", "")
    touch(good, "proc/cmdline", "quiet lockdown=confidentiality\n")
    assert keys(run(good), True) == ["lockdown"]


def test_lockdown_without_lsm_but_securityfs_mounted_is_silent(good):
    (good / "sys/kernel/security/lockdown").unlink()
    assert run(good) == []


def test_lockdown_mode_parsing(tmp_path):
    assert lockdown_mode(touch(tmp_path, "l", "none [integrity] confidentiality")) == "integrity"
    assert lockdown_mode(touch(tmp_path, "m", "garbage")) is None
    assert lockdown_mode(tmp_path / "missing") is None


def test_headers_missing(good):
    (good / f"lib/modules/{RELEASE}/build").rmdir()
    found = run(good)
    assert keys(found) == ["headers"]
    assert f"linux-headers-{RELEASE}" in found[0].message


def test_dangling_build_symlink_counts_as_missing(good):
    build = good / f"lib/modules/{RELEASE}/build"
    build.rmdir()
    build.symlink_to(good / "nowhere")
    assert keys(run(good)) == ["headers"]


def test_kheaders_replace_headers(good):
    (good / f"lib/modules/{RELEASE}/build").rmdir()
    touch(good, "sys/kernel/kheaders.tar.xz")
    assert run(good) == []


def test_btf_missing_is_only_a_warning(good):
    (good / "sys/kernel/btf/vmlinux").unlink()
    found = run(good)
    assert keys(found) == ["btf"] and not found[0].fatal


def test_debugfs_and_tracefs_not_mounted_are_warnings_with_the_mount_command(good):
    (good / "sys/kernel/debug/kprobes").rmdir()
    (good / "sys/kernel/tracing/trace").unlink()
    touch(good, "proc/self/mounts", "securityfs /sys/kernel/security securityfs rw 0 0\n")
    found = run(good)
    assert keys(found) == ["debugfs", "tracefs"]
    assert not any(p.fatal for p in found)
    assert "mount -t debugfs" in found[0].message
    assert "mount -t tracefs" in found[1].message


def test_preflight_and_warnings_split_by_fatality(tmp_path):
    args = dict(root=tmp_path, euid=0, caps=0, release=RELEASE, have_bcc=lambda: True)
    fatal, warn = preflight(**args), preflight_warnings(**args)
    assert fatal and warn
    assert all(p.fatal for p in fatal) and not any(p.fatal for p in warn)
    assert len(fatal) + len(warn) == len(check_environment(**args))


def test_the_real_host_never_raises():
    # Whatever this machine is, preflight answers with findings, not exceptions.
    for p in check_environment():
        assert p.message and "\n" not in p.message
