#!/usr/bin/env bash
# `liveprobe trace -o FILE '*'` on a busy machine: does the reader keep up? The per-event mode's
# target is no event dropped at the default buffer sizes, and the rings only hold tens of
# milliseconds of jq's calls: when the tool's reader or writer gets no CPU for longer, the
# target's full rings drop events (and count them). This runs the workload of
# bench/trace_vs_uftrace.sh (jq running its own tests, every function traced) BENCH_RUNS times
# while BENCH_BUSY busy loops compete for the CPUs, and prints per run: the wall time, the CPU
# time the tool used (its own report), the events written and dropped.
#
#   bench/trace_busy.sh                  # 3 runs, 1 busy loop (this machine has 2 CPUs)
#   BENCH_BUSY=2 bench/trace_busy.sh
#   LIVEPROBE=/tmp/base/build/tools/liveprobe/liveprobe bench/trace_busy.sh   # another build
#
# It needs the jq build and workload of bench/trace_vs_uftrace.sh (run that first, once).
set -u -o pipefail

case "${1:-}" in
    -h | --help)
        sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
        cat <<'EOF'
Environment: LIVEPROBE (the tool), LIVEPROBE_BINARY_DIR (default build/), BENCH_WORK_DIR (default
/tmp/liveprobe-bench-jq), BENCH_RUNS (default 3), BENCH_BUSY (busy loops, default 1).
Exit status: 0 when every run ran and jq's tests passed in each, 1 otherwise.
EOF
        exit 0 ;;
    "") ;;
    *) echo "trace_busy.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LIVEPROBE_BINARY_DIR:-$src/build}
lp=${LIVEPROBE:-$build/tools/liveprobe/liveprobe}
work=${BENCH_WORK_DIR:-/tmp/liveprobe-bench-jq}
runs=${BENCH_RUNS:-3}
busy=${BENCH_BUSY:-1}
die() { echo "trace_busy.sh: $*" >&2; exit 1; }
[ -x "$lp" ] || die "no liveprobe tool at $lp (build liveprobe first, or set LIVEPROBE)"
[ -x "$work/jq-normal/jq" ] && [ -f "$work/suite.test" ] ||
    die "no jq build or workload in $work: run bench/trace_vs_uftrace.sh first (BENCH_SKIP_UFTRACE=1 is enough)"

pids=()
stop_busy() { [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; pids=(); }
trap stop_busy EXIT
for ((i = 0; i < busy; i++)); do
    (while :; do :; done) &
    pids+=($!)
done
echo "liveprobe: $lp; $busy busy loop(s); $runs run(s) of jq --run-tests $(grep -c . "$work/suite.test") lines of tests" >&2
printf '%-4s %8s %14s %12s %12s\n' run wall_s tool_cpu_s events dropped
status=0
out=$(mktemp -d)
for ((r = 1; r <= runs; r++)); do
    t0=$(date +%s.%N)
    (cd "$work/jq-normal" && "$lp" trace -o "$out/t.lptrace" '*' -- ./jq -L tests/modules --run-tests "$work/suite.test" \
        >"$out/stdout" 2>"$out/stderr")
    t1=$(date +%s.%N)
    grep -q "tests passed" "$out/stdout" || { status=1; echo "run $r: jq's tests did not pass: $(tail -n 3 "$out/stderr")" >&2; }
    cpu=$(sed -n 's/.*(the tool used \([0-9.]*\) s of CPU).*/\1/p' "$out/stderr")
    ev=$(sed -n 's/.*(\([0-9]*\) events written).*/\1/p' "$out/stderr")
    dr=$(sed -n 's/.*, \([0-9]*\) dropped (ring full).*/\1/p' "$out/stderr")
    printf '%-4s %8.2f %14s %12s %12s\n' "$r" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "${cpu:--}" "${ev:--}" "${dr:--}"
    rm -f "$out/t.lptrace"
done
rm -rf "$out"
exit $status
