#!/bin/bash
# `ktui record`'s CPU in place, split into user and system time: one 1M-read
# flood of bench-out/workload under `ktui record --attach kprobe` (kprobe:
# no fentry variant compiling in the background while timed), the tool's
# utime/stime from /proc over the flood and 1 s after, as vm_suite counts
# CPU. Inside the VM, from the repo root, after a warm-up (the generic
# program cached):
#
#   bash benchmarks/record_inplace.sh "" plain after
#   bash benchmarks/record_inplace.sh /path/to/other/tree plain before
#
# $1: another tree's checkout to import ktui from ("" = this one);
# $2: plain, or profile (under cProfile, into bench-out/record-$3.prof;
#     startup is then slow enough that the flood can start before the
#     program is in); $3: a tag for the output line.
TREE=$1; MODE=$2; TAG=$3
PY=$PWD/.venv/bin/python
bench-out/workload rounds 1000000 1 > /tmp/wl.out & W=$!
sleep 0.3
if [ -n "$TREE" ]; then export PYTHONPATH=$TREE; fi
if [ "$MODE" = profile ]; then
  $PY -m cProfile -o bench-out/record-$TAG.prof -m ktui record --attach kprobe -e vfs_read:c:a3 --pid $W -o /tmp/split.ktrec --force --log /tmp/split.log 2>/tmp/split.err & K=$!
else
  $PY -m ktui record --attach kprobe -e vfs_read:c:a3 --pid $W -o /tmp/split.ktrec --force --log /tmp/split.log 2>/tmp/split.err & K=$!
fi
unset PYTHONPATH
for i in $(seq 120); do grep -q "live" /tmp/split.err && break; sleep 0.5; done
sleep 3
read -r u0 s0 < <(awk '{print $14, $15}' /proc/$K/stat)
kill -USR1 $W
for i in $(seq 240); do grep -q '^[0-9]' /tmp/wl.out && break; sleep 0.25; done
sleep 1
read -r u1 s1 < <(awk '{print $14, $15}' /proc/$K/stat)
kill -INT $K; wait $K; kill $W 2>/dev/null
echo "split $TAG: flood $(cat /tmp/wl.out | tail -1) ns; utime $(( u1 - u0 )) stime $(( s1 - s0 )) ticks (1/100 s)"
grep "events\|hits" /tmp/split.err
