#!/usr/bin/env bash
# Run a command as root inside a throwaway VM booting a stock Debian kernel.
#
#   scripts/vm.sh [--kernel VERSION] [--shell] -- COMMAND...
#
# Our build and CI machines run a kernel without kprobes (and locked down), so
# everything that touches the kernel runs here: virtme-ng boots Debian's
# kernel under software emulation (TCG; nested KVM hangs on these hosts) with
# the host's root filesystem shared read-only and the repo writable.
# COMMAND runs from the repo root; its exit status is this script's.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
kernel="${KTUI_VM_KERNEL:-}"
shell=0
while [ $# -gt 0 ]; do
    case "$1" in
        --kernel) kernel="$2"; shift 2 ;;
        --shell) shell=1; shift ;;
        --) shift; break ;;
        *) break ;;
    esac
done
if [ -z "$kernel" ]; then
    # The newest installed 6.1 kernel: Debian bookworm's stock kernel.
    kernel="$(ls /boot/vmlinuz-6.1.*-amd64 2>/dev/null | sort -V | tail -n1 | sed 's|/boot/vmlinuz-||')"
fi
[ -n "$kernel" ] && [ -e "/boot/vmlinuz-$kernel" ] || {
    echo "vm: no kernel image /boot/vmlinuz-${kernel:-?} (run scripts/install.sh --test)" >&2; exit 2; }
[ -d "/lib/modules/$kernel/build" ] || {
    echo "vm: headers for $kernel missing (apt-get install linux-headers-$kernel)" >&2; exit 2; }
export PATH="$repo/.venv/bin:$PATH"
command -v vng >/dev/null || { echo "vm: vng missing (run scripts/install.sh --test)" >&2; exit 2; }

cmd="$*"
[ -n "$cmd" ] || cmd="bash"
# The guest's console is noisy: the command's own output goes to a file in
# the shared, writable repo and is printed afterwards.
out="$repo/.vmout"
mkdir -p "$out"
log="$out/guest-$$.log"
rc_file="$out/rc-$$"
rm -f "$rc_file"
# KTUI_VM_VERBOSE=1: the guest kernel's messages (lockups, stalls) go to the console log.
verbose=()
[ "${KTUI_VM_VERBOSE:-0}" = 1 ] && verbose=(-v)
# Single-threaded TCG by default (KTUI_VM_QEMU_OPTS overrides; set it empty
# for QEMU's multi-threaded TCG). Under multi-threaded TCG, putting a kprobe
# on vfs_read while the other vCPU ran it oopsed the guest (an instruction
# fetch at 0 from vfs_read+5, then RCU stalls) in 3 of 4 benchmark startups:
# the patched text was not seen the same way by both vCPUs. One host thread
# running both vCPUs in turn has not crashed since, and ran the kernel suite
# faster (3.5 min instead of 4.4).
qemu_opts=("--qemu-opts=${KTUI_VM_QEMU_OPTS--accel tcg,thread=single}")
[ -z "${KTUI_VM_QEMU_OPTS-x}" ] && qemu_opts=()
inner="cd '$repo' && mount -t debugfs none /sys/kernel/debug 2>/dev/null; export PATH='$repo/.venv/bin':\$PATH; ( $cmd ) > '$log' 2>&1; echo \$? > '$rc_file'"
if [ "$shell" = 1 ]; then
    # Interactive: COMMAND is a script run as the guest's shell, on the
    # guest console, with the host terminal's size and TERM.
    exec vng "${verbose[@]}" "${qemu_opts[@]}" -r "/boot/vmlinuz-$kernel" --disable-kvm --memory 3G --cpus 2 --rwdir "$repo" \
        --shell "$cmd"
fi
set +e
timeout "${KTUI_VM_TIMEOUT:-2400}" vng "${verbose[@]}" "${qemu_opts[@]}" -r "/boot/vmlinuz-$kernel" --disable-kvm --memory 3G --cpus 2 \
    --rwdir "$repo" -- "$inner" > "$out/console-$$.log" 2>&1
vng_rc=$?
set -e
cat "$log" 2>/dev/null || true
if [ ! -f "$rc_file" ]; then
    echo "vm: the guest did not finish (vng exit $vng_rc); console log:" >&2
    tail -n 40 "$out/console-$$.log" >&2
    exit 3
fi
rc="$(cat "$rc_file")"
rm -f "$rc_file" "$log" "$out/console-$$.log"
exit "$rc"
