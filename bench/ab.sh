#!/bin/bash
# Side by side: two builds of liveprobe-bench, run interleaved (base, new, base, new, ...) so
# that a shared machine's slow minutes hit both alike; prints the minimum and the median
# ns per benchmark of each.
#
#   bash bench/ab.sh BASE_BENCH NEW_BENCH [FILTER] [RUNS]
#
# e.g. with the previous commit built in a worktree:
#   git worktree add /tmp/base HEAD~1 && cmake -S /tmp/base -B /tmp/base/build \
#     -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/base/build --target liveprobe-bench
#   bash bench/ab.sh /tmp/base/build/bench/liveprobe-bench build/bench/liveprobe-bench 'Opt|Kret' 9
set -euo pipefail
if [ $# -lt 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
base=$1 new=$2 filter=${3:-.} runs=${4:-7}
for b in "$base" "$new"; do
    [ -x "$b" ] || { echo "ab.sh: $b is not an executable" >&2; exit 1; }
done
for i in $(seq "$runs"); do
    echo "run $i of $runs" >&2
    for v in base new; do
        b=$new; [ $v = base ] && b=$base
        "$b" --benchmark_filter="$filter" --benchmark_min_time=0.3 2>/dev/null |
            awk -v v=$v '/^BM_/ && $3 == "ns" { print $1, v, $2 }'
    done
done | sort -k1,1 -k2,2 -k3g |
    awk '{ k = $1 " " $2; a[k] = a[k] " " $3 }
         END { for (k in a) { n = split(a[k], x, " "); printf "%-44s %-4s min %9.2f  median %9.2f ns\n", substr(k, 1, index(k, " ") - 1), substr(k, index(k, " ") + 1), x[1], x[int((n + 1) / 2)] } }' |
    sort
