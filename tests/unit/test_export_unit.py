"""The exporter's systemd unit: not root, exactly the capabilities the
kernel asks of ktui (tests/kernel/test_export.py runs the exporter as
nobody with these and checks its counts), and the sandboxing ktui works
under, without the settings that would break it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.unitfile import UNIT, capabilities, service_settings

CAPS = {"bpf", "perfmon", "sys_admin", "dac_override", "syslog"}


@pytest.fixture(scope="module")
def unit() -> dict[str, list[str]]:
    return service_settings()


def test_it_runs_as_a_user_of_its_own_with_exactly_the_capabilities_ktui_needs(unit):
    assert unit["DynamicUser"] == ["yes"]
    assert "User" not in unit
    assert capabilities(unit, "AmbientCapabilities") == CAPS
    assert capabilities(unit, "CapabilityBoundingSet") == CAPS
    assert unit["NoNewPrivileges"] == ["yes"]


@pytest.mark.parametrize("key,value", [
    ("ProtectSystem", "strict"), ("ProtectHome", "yes"), ("PrivateTmp", "yes"), ("PrivateDevices", "yes"),
    ("ProtectKernelLogs", "yes"), ("ProtectControlGroups", "yes"), ("ProtectClock", "yes"),
    ("ProtectHostname", "yes"), ("RestrictNamespaces", "yes"), ("RestrictRealtime", "yes"),
    ("RestrictSUIDSGID", "yes"), ("LockPersonality", "yes"), ("UMask", "0077"),
    ("SystemCallArchitectures", "native"), ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"),
    ("SystemCallFilter", "@system-service bpf perf_event_open"), ("SystemCallErrorNumber", "EPERM"),
])
def test_its_sandboxing(unit, key, value):
    assert unit.get(key) == [value]


@pytest.mark.parametrize("key", ["ProtectKernelTunables", "ProtectKernelModules", "ProtectProc", "ProcSubset",
                                 "PrivateUsers", "MemoryDenyWriteExecute", "PrivateNetwork"])
def test_no_setting_that_breaks_ktui(unit, key):
    # tracefs read-only; /lib/modules hidden; other processes' maps and
    # kallsyms hidden; capabilities useless for bpf(); bcc's compiler; the
    # metrics port
    assert key not in unit


def test_systemd_rates_its_exposure_ok():
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing (Debian: systemd)"
    out = subprocess.run([analyze, "security", "--offline=true", str(UNIT)], capture_output=True, text=True,
                         timeout=60)
    last = out.stdout.strip().splitlines()[-1]
    # "→ Overall exposure level for ktui-export.service: 2.9 OK 🙂" (9.2 UNSAFE as root)
    level = float(last.split(":")[-1].split()[0])
    assert level < 4.0, last
