#!/usr/bin/env bash
# Attach times: `liveprobe attach` on fresh targets, N times each on an idle one (asleep in
# nanosleep), a busy one (4 threads computing, the main thread waiting for them) and a busier
# one (the main thread computing too), and the median of each, as
# reported by the tool (the wall time of the whole attach: checks, finding a thread, loading
# the library, starting the agent, and its first answer).
#   bash bench/attach_times.sh [BUILD_DIR] [N]
set -euo pipefail
build=${1:-build}
n=${2:-10}
lp=$build/tools/liveprobe/liveprobe
target=$build/tests/lp_attach_target
export LIVEPROBE_RUNTIME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/liveprobe-bench.XXXXXX")
trap 'rm -rf "$LIVEPROBE_RUNTIME_DIR"' EXIT

measure() {  # measure MODE ARG: prints N times in ms, one per line
    for _ in $(seq "$n"); do
        "$target" "$1" "$2" >/dev/null &
        local pid=$!
        sleep 0.3
        "$lp" attach -p "$pid" | sed -n 's/.* in \([0-9.]*\) ms.*/\1/p'
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
median() { sort -n | awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

idle=$(measure nanosleep 60000)
busy=$(measure workers 60)
busier=$(measure busy 60)
echo "idle (nanosleep):                  $(echo "$idle" | tr '\n' ' ')"
echo "busy (4 threads computing):        $(echo "$busy" | tr '\n' ' ')"
echo "busier (the main thread computing): $(echo "$busier" | tr '\n' ' ')"
echo "median attach: idle $(echo "$idle" | median) ms, busy $(echo "$busy" | median) ms, busier $(echo "$busier" | median) ms ($n each, $(nproc) CPUs)"
