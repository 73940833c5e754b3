#!/usr/bin/env bash
# Run commands side by side and show each one's output whole, in the order
# given, once it has finished; exit with the first non-zero status.
#
#   scripts/in-parallel.sh LABEL COMMAND [LABEL COMMAND]...
#
# Why: `make test` boots one VM per kernel, and each VM runs single-threaded
# TCG (scripts/vm.sh), so one uses about one of our two host CPUs. Run one
# after the other, 6.1 and 6.12 took 18 + 16 minutes (CI 19); side by side
# the kernel part takes about as long as the longer one. Outputs are kept
# apart (interleaved pytest output would be unreadable) and printed whole.
set -uo pipefail
(( $# >= 2 && $# % 2 == 0 )) || { echo "usage: $0 LABEL COMMAND [LABEL COMMAND]..." >&2; exit 2; }
outdir="$(mktemp -d "${TMPDIR:-/tmp}/ktui-parallel.XXXXXX")"
pids=() labels=()
trap 'kill -- "${pids[@]}" 2>/dev/null; rm -rf "$outdir"' EXIT
trap 'exit 130' INT TERM
i=0
while (( $# )); do
    labels+=("$1")
    echo "== started: $1"
    # Ctrl-C reaches every command (one process group); a TERM to this
    # script reaches them through the EXIT trap (python -m ktui.vm stops
    # its QEMU on either).
    # with the CPU time it used (`times`: its processes', the VM's QEMU
    # among them): far below its wall time, the machine was busy elsewhere
    ( s=$SECONDS; bash -c "$2" >"$outdir/$i.out" 2>&1; rc=$?
      echo $(( SECONDS - s )) >"$outdir/$i.secs"; times >"$outdir/$i.cpu"; exit $rc ) &
    pids+=($!)
    shift 2; i=$((i + 1))
done
cpu_seconds() {  # FILE: the output of `times`; its second line, the children's user and system time
    sed -n 2p "$1" 2>/dev/null | tr -d 's' | tr 'm' ' ' | awk 'NF == 4 { printf "%.0f", $1 * 60 + $2 + $3 * 60 + $4 }'
}
status=0
for j in "${!pids[@]}"; do
    wait "${pids[$j]}"; rc=$?
    echo "== ${labels[$j]}: exit $rc after $(cat "$outdir/$j.secs" 2>/dev/null || echo '?') s" \
         "($(cpu_seconds "$outdir/$j.cpu") s of CPU)"
    cat "$outdir/$j.out"
    (( status == 0 && rc != 0 )) && status=$rc
done
pids=()
exit "$status"
