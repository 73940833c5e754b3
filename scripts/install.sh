#!/usr/bin/env bash
# Idempotent set-up for ktui on Debian bookworm, as root.
# Installs only what is missing: apt packages, the venv, ktui in editable mode.
#   scripts/install.sh          what `make run` needs
#   scripts/install.sh --vm     plus the VM rig (ktui vm: qemu, stock kernels, virtme-ng)
#   scripts/install.sh --test   plus the test tooling and the VM rig
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
want_vm="${KTUI_WANT_VM:-0}"
for arg in "$@"; do
    case "$arg" in
        --test) want_test=1; want_vm=1 ;;
        --vm) want_vm=1 ;;
    esac
done

apt_pkgs=(python3-venv python3-bpfcc bpfcc-tools python3-numpy linux-headers-amd64
          tmux bpftool)
# Headers for the running kernel, where Debian has them (bcc compiles against them).
if apt-cache show "linux-headers-$(uname -r)" >/dev/null 2>&1; then
    apt_pkgs+=("linux-headers-$(uname -r)")
fi
if [ "$want_test" = 1 ]; then
    # tests/kernel/test_export.py scrapes `ktui export` with a real Prometheus
    # (the guest shares this root filesystem, so it finds the binary there).
    apt_pkgs+=(prometheus)
    # tests/unit/test_usyms.py and tests/kernel/test_user_stacks.py build a
    # small C program with frame pointers and read it back (nm, strip).
    apt_pkgs+=(gcc binutils)
    # USDT probes: the tests build a program with sys/sdt.h's probe points.
    apt_pkgs+=(systemtap-sdt-dev)
fi
if [ "$want_vm" = 1 ]; then
    # The VM rig: a stock Debian kernel booted under software emulation.
    apt_pkgs+=(qemu-system-x86 linux-image-amd64 linux-image-6.12-amd64
               linux-headers-6.12-amd64 busybox-static bpftrace)
fi

missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "install: apt packages: ${missing[*]}"
    if [ "$(id -u)" != 0 ]; then
        echo "install: need root to apt-get install ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Debian's kernel packages make an initramfs for each image (about 30 s
    # each here). The test VM never uses it: virtme-ng boots with one of its
    # own. Only a machine that boots from /boot does, so skip it where the
    # running kernel's image is not in /boot (a cloud VM started by its
    # hypervisor, a container, our CI): INITRD=No is initramfs-tools' own
    # switch. On a machine that boots from /boot, the image is made as ever.
    if [ ! -e "/boot/vmlinuz-$(uname -r)" ]; then
        export INITRD=No
    fi
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# bcc lives in the system Python's dist-packages: the venv must see them.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import bcc' 2>/dev/null; then
    echo "install: creating .venv (with system site packages for bcc)"
    rm -rf .venv
    /usr/bin/python3 -m venv --system-site-packages .venv
fi

# What pip installs, each part with its own stamp, so a later call with more
# options installs only what it adds: `make run` on a machine without
# kprobes ran install.sh and then install.sh --vm, and the second one pip
# installed ktui all over again (its stamp named both options).
base_stamp=.venv/.ktui-installed
pkgs=()
if [ ! -f "$base_stamp" ] || [ pyproject.toml -nt "$base_stamp" ]; then
    rm -f .venv/.ktui-installed-*  # a new pyproject.toml: every part again
    [ "$want_test" = 1 ] && pkgs+=(-e ".[test]") || pkgs+=(-e .)
elif [ "$want_test" = 1 ] && [ ! -f "$base_stamp-test" ]; then
    pkgs+=(-e ".[test]")
fi
# virtme-ng boots the throwaway VM (ktui vm, the kernel tests).
[ "$want_vm" = 1 ] && [ ! -f "$base_stamp-vm" ] && pkgs+=(virtme-ng==1.42)
if [ "${#pkgs[@]}" -gt 0 ]; then
    echo "install: pip install ${pkgs[*]}"
    .venv/bin/pip install -q --disable-pip-version-check "${pkgs[@]}"
    touch "$base_stamp"
    [ "$want_test" = 1 ] && touch "$base_stamp-test"
    [ "$want_vm" = 1 ] && touch "$base_stamp-vm"
fi
exit 0
