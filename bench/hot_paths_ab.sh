#!/bin/bash
# The kretprobe's and the tracer's hot paths of two builds, interleaved (base, new, base, new,
# ...), in TSC cycles a call: liveprobe-kret-cycles (an empty kretprobe), and
# liveprobe-call-cycles traced with --hist, --count and -o (each build's own tool and library).
# Prints the median of each and new/base.
#
#   bash bench/hot_paths_ab.sh BASE_BUILD_DIR NEW_BUILD_DIR [PAIRS]
#
# e.g. with commit 26620ba built in a worktree:
#   git worktree add /tmp/base 26620ba && cmake -S /tmp/base -B /tmp/base/build \
#     -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/base/build -j2
#   bash bench/hot_paths_ab.sh /tmp/base/build build 7
set -euo pipefail
if [ $# -lt 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
base=$1 new=$2 pairs=${3:-7}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# one BUILD: a line "kret N", "hist N", "count N", "file N" (TSC cycles a call)
one() {
    local b=$1
    "$b/bench/liveprobe-kret-cycles" | sed -n 's/.*kretprobe (jump path) \([0-9.]*\)$/kret \1/p'
    "$b/tools/liveprobe/liveprobe" trace --hist cc_target -- "$b/bench/liveprobe-call-cycles" 2>&1 |
        sed -n 's/^TSC cycles per call of cc_target: \([0-9.]*\)$/hist \1/p'
    "$b/tools/liveprobe/liveprobe" trace --count cc_target -- "$b/bench/liveprobe-call-cycles" 2>&1 |
        sed -n 's/^TSC cycles per call of cc_target: \([0-9.]*\)$/count \1/p'
    "$b/tools/liveprobe/liveprobe" trace -o "$out/t.lptrace" cc_target -- "$b/bench/liveprobe-call-cycles" 2>&1 |
        sed -n 's/^TSC cycles per call of cc_target: \([0-9.]*\)$/file \1/p'
    rm -f "$out/t.lptrace"
}
for i in $(seq "$pairs"); do
    echo "pair $i of $pairs" >&2
    one "$base" | sed 's/^/base /' >>"$out/all"
    one "$new" | sed 's/^/new /' >>"$out/all"
done
echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource), $pairs interleaved pairs, TSC cycles a call (medians)"
for k in kret hist count file; do
    b=$(awk -v k=$k '$1 == "base" && $2 == k { print $3 }' "$out/all" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
    n=$(awk -v k=$k '$1 == "new" && $2 == k { print $3 }' "$out/all" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
    awk -v k=$k -v b="$b" -v n="$n" 'BEGIN { printf "%-5s base %7.1f  new %7.1f  new/base %.3f\n", k, b, n, n / b }'
done
