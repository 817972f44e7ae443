#!/bin/bash
# What a trace costs a call when it runs in a session after the first (another trace already
# runs in the process: trace/handlers.hpp, slot 1) against the first session's (slot 0), in TSC
# cycles a call of cc_target (bench/programs/call_cycles.cpp), for --hist, --count and the
# per-event mode (-o). Both are traces with -p of a program started by `liveprobe run` that
# waits (LP_CC_WAIT); in the second, a `trace --count lp_gen_f1` (a function it never calls)
# holds slot 0 first. Runs alternate (first, second, first, ...); prints the medians and
# second/first.
#
#   bash bench/sessions_cost.sh [BUILD_DIR] [PAIRS]
set -euo pipefail
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
b=${1:-build} pairs=${2:-7}
lp=$b/tools/liveprobe/liveprobe
cc=$b/bench/liveprobe-call-cycles
out=$(mktemp -d)
export LIVEPROBE_RUNTIME_DIR=$out/run
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$out"' EXIT
# placed FILE: waits until the trace writing FILE placed its probes.
placed() {
    for _ in $(seq 1000); do grep -q '^liveprobe: placed' "$1" 2>/dev/null && return 0; sleep 0.01; done
    echo "no probes placed: $(cat "$1")" >&2
    exit 1
}
# one SLOT MODE...: prints "SLOT MODE CYCLES" (SLOT: first or second).
one() {
    local slot=$1 mode=$2
    shift 2
    rm -f "$out/p.out" "$out/t0.out" "$out/t1.out" "$out/t.lptrace"
    LP_CC_WAIT=1 "$lp" run -- "$cc" >"$out/p.out" 2>&1 &
    local runner=$! pid=
    for _ in $(seq 1000); do
        grep -q '^waiting$' "$out/p.out" 2>/dev/null &&
            pid=$(sed -n 's/^liveprobe: started PID \([0-9]*\)$/\1/p' "$out/p.out") && [ -n "$pid" ] && break
        sleep 0.01
    done
    [ -n "$pid" ] || { echo "the program did not start: $(cat "$out/p.out")" >&2; exit 1; }
    if [ "$slot" = second ]; then
        "$lp" trace -p "$pid" --count lp_gen_f1 >"$out/t0.out" 2>&1 &
        placed "$out/t0.out"
    fi
    "$lp" trace -p "$pid" "$@" cc_target >"$out/t1.out" 2>&1 &
    placed "$out/t1.out"
    kill -USR1 "$pid"
    wait "$runner"
    wait
    sed -n "s/^TSC cycles per call of cc_target: \([0-9.]*\)$/$slot $mode \1/p" "$out/p.out"
}
for i in $(seq "$pairs"); do
    echo "pair $i of $pairs" >&2
    for slot in first second; do
        one "$slot" hist --hist >>"$out/all"
        one "$slot" count --count >>"$out/all"
        one "$slot" file -o "$out/t.lptrace" >>"$out/all"
    done
done
echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource), $pairs interleaved pairs, TSC cycles a call (medians)"
med() { awk -v s="$1" -v k="$2" '$1 == s && $2 == k { print $3 }' "$out/all" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for k in hist count file; do
    f=$(med first "$k") s=$(med second "$k")
    awk -v k=$k -v f="$f" -v s="$s" 'BEGIN { printf "%-5s first session %7.1f  second %7.1f  second/first %.3f\n", k, f, s, s / f }'
done
