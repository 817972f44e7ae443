#!/bin/bash
# What issue 34's per-call features cost in the target, beside plain --count and --hist:
# --filter (true and false), --by (tid, an argument), --hist-of, --stacks (counted per stack,
# and --folded), and one event per call (no aggregate) for reference. Each variant traces
# liveprobe-call-cycles (bench/programs/call_cycles.cpp: cc_target called 30 million times,
# the fewest TSC cycles per call of a batch of 10,000), ROUNDS times interleaved; prints the
# median of each, less the untraced run's, and its ratio to --count's and --hist's.
#
#   bash bench/views_cost.sh [BUILD_DIR] [ROUNDS]      (defaults: build, 3)
set -euo pipefail
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
b=${1:-build} rounds=${2:-3}
lp=$b/tools/liveprobe/liveprobe cc=$b/bench/liveprobe-call-cycles
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
variants=(
    "untraced|"
    "count|--count"
    "hist|--hist"
    "events|"
    "count --filter 'arg0 != 7' (true)|--count --filter arg0!=7"
    "count --filter 'arg0 == 7' (false)|--count --filter arg0==7"
    "hist --filter 'duration > 1ms' (false)|--hist --filter duration>1ms"
    "count --by tid|--count --by tid"
    "count --by arg0|--count --by arg0"
    "hist --by tid|--hist --by tid"
    "hist-of arg0|--hist-of arg0"
    "count --stacks (per stack)|--count --stacks"
    "folded|--folded"
)
cycles() { sed -n 's/^TSC cycles per call of cc_target: \([0-9.]*\)$/\1/p'; }
for r in $(seq "$rounds"); do
    for v in "${variants[@]}"; do
        name=${v%%|*} args=${v#*|}
        echo "round $r of $rounds: $name" >&2
        if [ "$name" = untraced ]; then c=$("$cc" | cycles)
        else
            # shellcheck disable=SC2086
            c=$("$lp" trace $args cc_target -- "$cc" 2>/dev/null | cycles)
        fi
        echo "$name|$c" >>"$out/all"
    done
done
median() { awk -F'|' -v k="$1" '$1 == k { print $2 }' "$out/all" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
base=$(median untraced) count=$(median count) hist=$(median hist)
echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource), $rounds rounds, TSC cycles a call"
printf '%-42s %10s %10s %10s %10s\n' variant cycles added "/count" "/hist"
for v in "${variants[@]}"; do
    name=${v%%|*}
    m=$(median "$name")
    awk -v n="$name" -v m="$m" -v b="$base" -v c="$count" -v h="$hist" 'BEGIN {
        printf "%-42s %10.1f %10.1f %10.2f %10.2f\n", n, m, m - b, (m - b) / (c - b), (m - b) / (h - b) }'
done
