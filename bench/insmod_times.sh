#!/usr/bin/env bash
# Wall time of `liveprobe insmod` into a running process (samples/target), measured around the
# command as a user runs it: median of N loads of kretprobe_example func=do_sys_open, each followed
# by an rmmod, after a first load (reported apart: the first one also attaches the agent and
# reads the target's symbol tables).
# Usage: bench/insmod_times.sh [BUILD_DIR] [N]
set -euo pipefail
build=${1:-build}
n=${2:-10}
lp=$build/tools/liveprobe/liveprobe
mod=$build/samples/kretprobe_example.so
export LIVEPROBE_RUNTIME_DIR=$(mktemp -d)
"$build/samples/target" 0 20 >/dev/null 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$LIVEPROBE_RUNTIME_DIR"' EXIT
sleep 0.3
ms() { echo $(( ($2 - $1) / 1000 )); }
t0=$(date +%s%N); "$lp" insmod -p "$pid" "$mod" func=do_sys_open 2>/dev/null; t1=$(date +%s%N)
"$lp" rmmod -p "$pid" kretprobe_example
echo "first insmod (attach + symbol tables + load): $(ms "$t0" "$t1") us"
times=()
for _ in $(seq "$n"); do
    t0=$(date +%s%N); "$lp" insmod -p "$pid" "$mod" func=do_sys_open 2>/dev/null; t1=$(date +%s%N)
    times+=("$(ms "$t0" "$t1")")
    "$lp" rmmod -p "$pid" kretprobe_example
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n | tr '\n' ' ')
echo "insmod into a running process, $n times (us): $sorted"
echo "median: $(printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }') us"
