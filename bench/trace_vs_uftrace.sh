#!/usr/bin/env bash
# `liveprobe trace '*'` against uftrace on a real program: jq 1.6 (Debian 12's source package)
# running its own test suite in one process (`jq --run-tests FILE`), every function of the
# executable traced. jq is built twice from the same source: a normal optimized build (Debian's
# flags, libjq linked statically into the executable so that '*' covers all of jq) for liveprobe,
# and the same compiled with -pg for `uftrace record` (linked again without -pg: no gprof at run
# time, the untraced -pg build pays only glibc's mcount stub). Each mode runs BENCH_RUNS times;
# the table gives the median wall and CPU (user + system, tracer included) times, their ratios
# to the untraced normal build and the overhead per call in ns ((traced - untraced) / calls,
# calls counted by `liveprobe trace --count '*'`).
#
# The workload is BENCH_TESTS (default 50) of the suite's 369 tests, evenly spread: jq compiles
# its builtins again for each test, about 6 million calls of tiny functions a test, so the whole
# suite is ~2.2e9 calls (~8 s untraced, ~70 GB of uftrace data at 32 bytes a call). jq's verdict
# ("N of N tests passed") is checked in each run. The per-event mode records every call into a
# trace file (`liveprobe trace -o FILE`, a few bytes a call: tools/liveprobe/trace_codec.hpp), as
# `uftrace record` does (32 bytes a call).
#
#   bench/trace_vs_uftrace.sh                      # 50 tests, 3 runs per mode (~10 minutes)
#   BENCH_TESTS=all BENCH_RUNS=1 bench/trace_vs_uftrace.sh
#   LIVEPROBE=/path/to/build/tools/liveprobe/liveprobe bench/trace_vs_uftrace.sh
#   bench/trace_vs_uftrace.sh --help
#
# Debian 12, as root: installs uftrace, jq's build dependencies (adding a deb-src entry when apt
# has none) and fetches jq's source with `apt-get source jq`. No python.
set -u -o pipefail

usage() {
    cat <<'EOF'
Usage: bench/trace_vs_uftrace.sh [--help]

Benchmarks `liveprobe trace '*'` (--count, --hist, per-event) against `uftrace record` on
jq 1.6 running its own test suite (one process: jq --run-tests FILE).

Steps: installs what is missing (uftrace, jq's build dependencies, a deb-src entry
/etc/apt/sources.list.d/liveprobe-src.sources if apt has no source index), fetches jq's
source (apt-get source jq), builds it twice (-O2 -g with Debian's hardening flags and libjq
static; the same with -pg), checks the tests pass, then times each mode BENCH_RUNS times and
prints a table (stdout; also written to WORK/results.txt): median wall and CPU seconds, ratio
to the untraced normal build, overhead per call in ns (calls: liveprobe --count's total), and
for the per-event mode (-o FILE) the events written and dropped. Progress goes to stderr; the output of
every run is kept in WORK/logs.

Environment:
  LIVEPROBE              the liveprobe tool (default: LIVEPROBE_BINARY_DIR/tools/liveprobe/liveprobe)
  LIVEPROBE_BINARY_DIR   liveprobe's build directory (default: build/ of this checkout)
  BENCH_WORK_DIR         work directory (default /tmp/liveprobe-bench-jq)
  BENCH_JQ_SRC           an unpacked jq 1.6 source tree to use instead of apt-get source
  BENCH_RUNS             runs per mode, the median is reported (default 3)
  BENCH_TESTS            how many tests of the suite the workload runs, evenly spread over it,
                         or "all" (default 50; the whole suite is ~2.2e9 calls: about 70 GB
                         of uftrace data and minutes per traced run)
  BENCH_TEST_FILES       the suite: test files of jq's tests/ (default "jq.test onig.test base64.test")
  BENCH_TIMEOUT          seconds before a run is stopped: SIGINT, SIGKILL 30 s later (default 1200)
  BENCH_JOBS             make -j (default 2)
  BENCH_REBUILD=1        rebuild jq even when a build with the same flags is there
  BENCH_LP_OPTS          extra options for every liveprobe trace (e.g. "--maxactive 128")
  BENCH_UFTRACE_OPTS     extra options for uftrace record (e.g. "--no-libcall")
  BENCH_SKIP_UFTRACE=1   leave uftrace out
  BENCH_UFTRACE_REPORT=1 also sum the calls of `uftrace report` (slow: minutes for 10 GB)
  BENCH_KEEP_UFTRACE=1   keep the last uftrace data directory (WORK/uftrace.data); else removed

Exit status: 0 when every mode ran and jq's tests passed in each, 1 otherwise.
EOF
}

case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    "") ;;
    *) echo "trace_vs_uftrace.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LIVEPROBE_BINARY_DIR:-$src/build}
lp=${LIVEPROBE:-$build/tools/liveprobe/liveprobe}
work=${BENCH_WORK_DIR:-/tmp/liveprobe-bench-jq}
runs=${BENCH_RUNS:-3}
ntests=${BENCH_TESTS:-50}
test_files=${BENCH_TEST_FILES:-jq.test onig.test base64.test}
timeout_s=${BENCH_TIMEOUT:-1200}
jobs=${BENCH_JOBS:-2}
read -r -a lp_opts <<<"${BENCH_LP_OPTS:-}"
read -r -a uft_opts <<<"${BENCH_UFTRACE_OPTS:-}"

t_script=$(date +%s.%N)
say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'trace_vs_uftrace.sh: error: %s\n' "$*" >&2; exit 1; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
steps=()
step_done() { steps+=("$(printf '%-44s %8s s' "$1" "$(since "$2")")"); }

[[ $runs =~ ^[1-9][0-9]*$ ]] || die "BENCH_RUNS must be a positive integer (got '$runs')"
[[ $ntests == all || $ntests =~ ^[1-9][0-9]*$ ]] || die "BENCH_TESTS must be a positive integer or 'all' (got '$ntests')"
[ -x "$lp" ] || die "no liveprobe tool at $lp: build liveprobe first (cmake -S $src -B $build && cmake --build $build -j2), or set LIVEPROBE / LIVEPROBE_BINARY_DIR"
mkdir -p "$work/logs" || die "cannot create $work"
logs=$work/logs

# ---- 1. what is needed ---------------------------------------------------------------------------
t0=$(date +%s.%N)
apt_updated=
apt_install() {  # apt_install PKG...: installs the packages (as root)
    [ "$(id -u)" = 0 ] || die "missing packages ($*): run as root or install them"
    if [ -z "$apt_updated" ]; then
        say "apt-get update"
        apt-get update -q >"$logs/apt-update.log" 2>&1 || die "apt-get update failed (see $logs/apt-update.log)"
        apt_updated=1
    fi
    say "apt-get install $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >"$logs/apt-install.log" 2>&1 ||
        die "apt-get install $* failed: $(tail -n 3 "$logs/apt-install.log")"
}
need=()
command -v uftrace >/dev/null || need+=(uftrace)
command -v dpkg-buildflags >/dev/null || need+=(dpkg-dev)
command -v make >/dev/null && command -v gcc >/dev/null || need+=(build-essential)
command -v autoreconf >/dev/null || need+=(autoconf)
command -v automake >/dev/null || need+=(automake)
command -v libtoolize >/dev/null || need+=(libtool)
command -v timeout >/dev/null || die "no timeout(1) (coreutils)"
[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"

add_deb_src() {  # a deb-src entry mirroring the deb ones, when apt has no source index
    [ "$(id -u)" = 0 ] || die "apt has no source index for jq (no deb-src entry): run as root or set BENCH_JQ_SRC"
    "$src/scripts/add-deb-src.sh" || die "apt has no source index for jq, and none could be added"
    say "apt-get update"
    apt-get update -q >"$logs/apt-update.log" 2>&1 || die "apt-get update failed (see $logs/apt-update.log)"
    apt_updated=1
    [ -n "$(apt-cache showsrc jq 2>/dev/null)" ] || die "still no source package jq after adding deb-src"
}

if [ -n "${BENCH_JQ_SRC:-}" ]; then
    jqsrc=$(cd "$BENCH_JQ_SRC" && pwd) || die "BENCH_JQ_SRC=$BENCH_JQ_SRC: no such directory"
    [ -f "$jqsrc/tests/jq.test" ] || die "$jqsrc does not look like jq's source (no tests/jq.test)"
else
    jqsrc=$(find "$work/src" -mindepth 1 -maxdepth 1 -type d -name 'jq-*' 2>/dev/null | sort | tail -n 1)
    if [ -z "$jqsrc" ]; then
        [ -n "$(apt-cache showsrc jq 2>/dev/null)" ] || add_deb_src
        mkdir -p "$work/src"
        say "apt-get source jq (in $work/src)"
        if ! (cd "$work/src" && apt-get source -q jq) >"$logs/apt-source.log" 2>&1; then
            # The newest version's files may be missing on the mirror (a security update not
            # there yet): the other versions apt knows of, newest first.
            say "apt-get source jq failed ($(grep -m 1 "^E:" "$logs/apt-source.log")); trying each version apt knows of"
            for v in $(apt-cache showsrc jq | awk '/^Version:/ { print $2 }' | sort -r -V); do
                say "apt-get source jq=$v"
                rm -rf "$work/src" && mkdir -p "$work/src"
                (cd "$work/src" && apt-get source -q "jq=$v") >>"$logs/apt-source.log" 2>&1 && break
            done
        fi
        jqsrc=$(find "$work/src" -mindepth 1 -maxdepth 1 -type d -name 'jq-*' | sort | tail -n 1)
        [ -n "$jqsrc" ] || die "apt-get source jq failed: $(grep -E '^(E|W):' "$logs/apt-source.log" | tail -n 4)"
    fi
    # jq's build dependencies (bison, flex, libonig-dev, ...)
    if ! (cd "$jqsrc" && dpkg-checkbuilddeps) >"$logs/checkbuilddeps.log" 2>&1; then
        [ "$(id -u)" = 0 ] || die "jq's build dependencies are missing: $(cat "$logs/checkbuilddeps.log")"
        [ -n "$(apt-cache showsrc jq 2>/dev/null)" ] || add_deb_src
        say "apt-get build-dep jq"
        DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -q jq >"$logs/apt-build-dep.log" 2>&1 ||
            die "apt-get build-dep jq failed: $(tail -n 3 "$logs/apt-build-dep.log")"
    fi
fi
jqver=$(sed -n '1s/^jq (\([^)]*\)).*/\1/p' "$jqsrc/debian/changelog" 2>/dev/null)
say "jq source: $jqsrc${jqver:+ (Debian $jqver)}"
step_done "1. packages and jq source" "$t0"

# ---- 2. the two builds -------------------------------------------------------------------------
# build DIR EXTRA_CFLAGS: a copy of the source in DIR, configured and built in place (jq 1.6
# cannot build out of tree). libjq is static (--disable-shared): the executable holds all of jq.
build_jq() {
    local dir=$1 extra=$2 cflags cppflags ldflags stamp
    cflags=$(cd "$jqsrc" && DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CFLAGS)
    cppflags=$(cd "$jqsrc" && DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CPPFLAGS)
    ldflags=$(cd "$jqsrc" && DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get LDFLAGS)
    stamp="src=$jqsrc cflags=$cflags $extra cppflags=$cppflags ldflags=$ldflags"
    if [ -z "${BENCH_REBUILD:-}" ] && [ -x "$dir/jq" ] && [ "$(cat "$dir/.bench-stamp" 2>/dev/null)" = "$stamp" ]; then
        say "jq in $dir: already built"
        return 0
    fi
    say "building jq in $dir (CFLAGS=$cflags $extra)"
    rm -rf "$dir" && cp -a "$jqsrc" "$dir" || die "cannot copy $jqsrc to $dir"
    local log
    log=$logs/build-$(basename "$dir").log
    (
        cd "$dir" &&
            autoreconf -fi &&
            ./configure --disable-shared --enable-static --disable-docs --disable-valgrind \
                CFLAGS="$cflags $extra" CPPFLAGS="$cppflags" LDFLAGS="$ldflags" &&
            make -j"$jobs" &&
            # -pg: jq is linked again without -pg (no gcrt1.o, so no gprof profiling at run
            # time: the untraced -pg build pays only its mcount calls, as under uftrace).
            if [ -n "$extra" ]; then rm -f jq && make jq CFLAGS="$cflags"; fi
    ) >"$log" 2>&1 || die "building jq in $dir failed: $(tail -n 5 "$log") (full log: $log)"
    [ -x "$dir/jq" ] || die "no $dir/jq after the build (see $log)"
    echo "$stamp" >"$dir/.bench-stamp"
}
t0=$(date +%s.%N)
jq_n=$work/jq-normal
jq_pg=$work/jq-pg
build_jq "$jq_n" ""
step_done "2a. build jq (normal)" "$t0"
t0=$(date +%s.%N)
build_jq "$jq_pg" "-pg"
step_done "2b. build jq (-pg)" "$t0"
nm "$jq_n/jq" | grep " T jq_init$" >/dev/null || die "$jq_n/jq does not define jq_init (libjq not linked in statically?)"
ldd "$jq_n/jq" | grep libjq >/dev/null && die "$jq_n/jq uses a shared libjq (it must be static)"
nm -D "$jq_pg/jq" | grep ' mcount' >/dev/null || die "$jq_pg/jq does not call mcount (not built with -pg?)"
nm "$jq_pg/jq" | grep monstartup >/dev/null && die "$jq_pg/jq is linked for gprof (gcrt1.o)"

# ---- 3. the workload ---------------------------------------------------------------------------
# BENCH_TESTS tests of the suite, evenly spread over it (a test: a paragraph holding something
# other than comments; jq's test reader ends each test at a blank line).
suite=$work/suite.test
files=()
for f in $test_files; do
    [ -f "$jq_n/tests/$f" ] || die "no $jq_n/tests/$f"
    files+=("$jq_n/tests/$f")
done
count_tests() { awk 'BEGIN { RS = "" } { n = split($0, l, "\n"); for (i = 1; i <= n; i++) if (l[i] !~ /^[ \t]*(#.*)?$/) { c++; break } } END { print c + 0 }' "$1"; }
for f in "${files[@]}"; do cat "$f"; echo; done >"$work/suite-all.test"
total=$(count_tests "$work/suite-all.test")
[ "$ntests" = all ] && ntests=$total
[ "$ntests" -le "$total" ] || die "BENCH_TESTS=$ntests but the suite has $total tests"
awk -v want="$ntests" -v total="$total" 'BEGIN { RS = ""; ORS = "\n\n" }
    { n = split($0, l, "\n"); t = 0; for (i = 1; i <= n; i++) if (l[i] !~ /^[ \t]*(#.*)?$/) t = 1
      if (!t) next
      if (((c * want) % total) < want) print   # the c-th test (from 0): evenly spread
      c++ }' "$work/suite-all.test" >"$suite"
got=$(count_tests "$suite")
[ "$got" = "$ntests" ] || die "the workload holds $got tests, not $ntests"
mods=$jq_n/tests/modules
jqargs=(-L "$mods" --run-tests "$suite")
say "workload: jq ${jqargs[*]} ($ntests of the $total tests of: $test_files), run from the build's directory"

# run_timed DIR OUT ERR CMD...: CMD in DIR, stdout to OUT, stderr to ERR; sets T (wall seconds),
# C (CPU seconds, user + system, of the command and the processes it waited for) and RC.
run_timed() {
    local dir=$1 out=$2 err=$3 TIMEFORMAT='%3R %3U %3S' u s
    shift 3
    { time { (cd "$dir" && exec timeout -k 30 -s INT "$timeout_s" "$@"); } >"$out" 2>"$err"; } 2>"$work/.time"
    RC=$?
    read -r T u s <"$work/.time"
    C=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.3f", u + s }')
}
passed() { grep -q "^$ntests of $ntests tests passed" "$1"; }

declare -A MED CMED ALL FAIL NOTE SUMMARY
failed_any=0
# measure KEY LABEL DIR CHECK CMD...: BENCH_RUNS runs; CHECK "stdout": jq's verdict is looked for
# in the output, "status": only the exit status (stdout thrown away). Logs: logs/KEY.N.{out,err}.
measure() {
    local key=$1 label=$2 dir=$3 check=$4 i times=() cpus=() out err t1
    shift 4
    t1=$(date +%s.%N)
    for ((i = 1; i <= runs; i++)); do
        out=$logs/$key.$i.out
        err=$logs/$key.$i.err
        [ "$check" = status ] && out=/dev/null
        [ "$key" = uftrace ] && rm -rf "$work/uftrace.data"
        say "$label: run $i/$runs"
        run_timed "$dir" "$out" "$err" "$@"
        if [ "$RC" = 124 ] || [ "$RC" = 137 ]; then
            FAIL[$key]="timed out after ${timeout_s} s (run $i)"
        elif [ "$RC" != 0 ]; then
            FAIL[$key]="exit status $RC (run $i): $(grep -v '^Testing\|^liveprobe: started' "$err" | tail -n 3 | tr '\n' ' ')"
        elif [ "$check" = stdout ] && ! passed "$out"; then
            FAIL[$key]="jq's tests did not all pass (run $i): $(grep 'tests passed' "$out" || echo 'no verdict'); see $out"
        fi
        if [ -n "${FAIL[$key]:-}" ]; then
            say "$label: FAILED: ${FAIL[$key]}"
            sed 's/^/    /' "$err" | grep -v '^    Testing' | tail -n 20 >&2
            failed_any=1
            break
        fi
        say "$label: run $i: $T s (CPU $C s)"
        times+=("$T")
        cpus+=("$C")
        LAST_ERR=$err
        LAST_OUT=$out
        SUMMARY[$key]=$(grep "^liveprobe: .* functions traced" "$err" | tail -n 1)
    done
    ALL[$key]="${times[*]:-}"
    MED[$key]=$(printf '%s\n' "${times[@]:-}" | grep . | median)
    CMED[$key]=$(printf '%s\n' "${cpus[@]:-}" | grep . | median)
    step_done "4. $label (${#times[@]} runs)" "$t1"
}

# ---- 3b. the builds pass the tests; liveprobe can place its probes -----------------------------
t0=$(date +%s.%N)
run_timed "$jq_n" "$logs/check-normal.out" "$logs/check-normal.err" ./jq "${jqargs[@]}"
[ "$RC" = 0 ] && passed "$logs/check-normal.out" ||
    die "jq's tests fail untraced (normal build, exit $RC): $(grep 'tests passed' "$logs/check-normal.out") (see $logs/check-normal.out)"
run_timed "$jq_pg" "$logs/check-pg.out" "$logs/check-pg.err" ./jq "${jqargs[@]}"
[ "$RC" = 0 ] && passed "$logs/check-pg.out" ||
    die "jq's tests fail untraced (-pg build, exit $RC) (see $logs/check-pg.out)"
say "jq's tests pass untraced, both builds ($ntests of $ntests)"
# Placing and removing the probes: liveprobe trace of `jq --version` (main and a few calls).
declare -A START
for m in plain count hist events; do
    ts=()
    for ((i = 1; i <= runs; i++)); do
        case $m in
            plain) run_timed "$jq_n" /dev/null "$logs/start-$m.err" ./jq --version ;;
            count) run_timed "$jq_n" /dev/null "$logs/start-$m.err" "$lp" trace --count "${lp_opts[@]}" '*' -- ./jq --version ;;
            hist) run_timed "$jq_n" /dev/null "$logs/start-$m.err" "$lp" trace --hist "${lp_opts[@]}" '*' -- ./jq --version ;;
            events) run_timed "$jq_n" /dev/null "$logs/start-$m.err" "$lp" trace "${lp_opts[@]}" '*' -- ./jq --version ;;
        esac
        [ "$RC" = 0 ] || die "liveprobe trace ($m) '*' -- jq --version failed (exit $RC): $(cat "$logs/start-$m.err")"
        ts+=("$T")
    done
    START[$m]=$(printf '%s\n' "${ts[@]}" | median)
done
step_done "3. checks, probe placement (jq --version)" "$t0"

# ---- 4. the measurements -----------------------------------------------------------------------
load_before=$(cut -d " " -f 1-3 /proc/loadavg)
awk -v l="${load_before%% *}" 'BEGIN { exit !(l > 0.5) }' &&
    say "warning: load average $load_before before the measurements: other work on this machine makes the wall times noisy (see the cpu columns)"
measure untraced "untraced" "$jq_n" stdout ./jq "${jqargs[@]}"
[ -n "${FAIL[untraced]:-}" ] && die "the untraced runs failed: ${FAIL[untraced]}"

measure count "liveprobe trace --count '*'" "$jq_n" stdout "$lp" trace --count "${lp_opts[@]}" '*' -- ./jq "${jqargs[@]}"
calls=
if [ -z "${FAIL[count]:-}" ]; then
    summary=$(grep '^liveprobe: .* functions traced' "$LAST_ERR" | tail -n 1)
    calls=$(sed -n 's/.* traced, \([0-9]*\) calls.*/\1/p' <<<"$summary")
    nfuncs=$(sed -n 's/^liveprobe: \([0-9]*\) functions traced.*/\1/p' <<<"$summary")
    sum=$(awk 'NF == 2 && $2 ~ /^[0-9]+$/ { s += $2 } END { printf "%.0f", s }' "$LAST_OUT")
    called=$(sed -n 's/^(\([0-9]*\) of [0-9]* functions called)$/\1/p' "$LAST_OUT")
    not_traced=$(grep -c '^liveprobe: not traced' "$LAST_ERR")
    more=$(sed -n 's/^liveprobe: \.\.\. and \([0-9]*\) more not traced/\1/p' "$LAST_ERR")
    [ -n "$more" ] && not_traced=$((not_traced + more))
    [ "$sum" = "$calls" ] || NOTE[count]="the counts add up to $sum, the summary says $calls"
    [ -n "$calls" ] && [ "$calls" -gt 0 ] || { FAIL[count]="no call count in: $summary"; failed_any=1; calls=; }
fi
in_elf=$(readelf -Ws "$jq_n/jq" | awk '$4 == "FUNC" && $3 != 0 && $7 != "UND" && $8 !~ /^_(start|init|fini)$/ { print $2 }' | sort -u | wc -l)

measure hist "liveprobe trace --hist '*'" "$jq_n" stdout "$lp" trace --hist "${lp_opts[@]}" '*' -- ./jq "${jqargs[@]}"
# Per event: every call recorded into a trace file (-o), as uftrace record does; `liveprobe
# trace -i FILE` shows it afterwards, as uftrace replay.
measure events "liveprobe trace -o FILE '*'" "$jq_n" stdout "$lp" trace -o "$work/events.lptrace" "${lp_opts[@]}" '*' -- ./jq "${jqargs[@]}"
ev_read='' ev_dropped='' ev_unringed='' ev_missed='' ev_bytes=''
if [ -f "$work/events.lptrace" ]; then
    ev_bytes=$(stat -c %s "$work/events.lptrace")
    rm -f "$work/events.lptrace"
fi
if [ -z "${FAIL[events]:-}" ]; then
    summary=$(grep '^liveprobe: .* functions traced' "$LAST_ERR" | tail -n 1)
    ev_read=$(sed -n 's/.*(\([0-9]*\) events written).*/\1/p' <<<"$summary")
    ev_dropped=$(sed -n 's/.*, \([0-9]*\) dropped (ring full).*/\1/p' <<<"$summary")
    ev_unringed=$(sed -n 's/.*, \([0-9]*\) without a ring.*/\1/p' <<<"$summary")
    ev_missed=$(sed -n 's/.*, missed \(.*\)$/\1/p' <<<"$summary")
fi
measure pg "-pg build, untraced" "$jq_pg" stdout ./jq "${jqargs[@]}"

uft_bytes='' uft_records='' uft_report=''
if [ -n "${BENCH_SKIP_UFTRACE:-}" ]; then
    FAIL[uftrace]="skipped (BENCH_SKIP_UFTRACE)"
else
    # uftrace writes 32 bytes a call (an entry and an exit record): room for them, with 10% to spare.
    avail=$(df -Pk "$work" | awk 'NR == 2 { print $4 }')
    need_k=$(awk -v c="${calls:-0}" 'BEGIN { printf "%.0f", c * 32 * 1.1 / 1024 }')
    if [ -n "$calls" ] && [ "$need_k" -gt "$avail" ]; then
        FAIL[uftrace]="skipped: needs ~$((need_k / 1048576)) GiB in $work, $((avail / 1048576)) GiB free (lower BENCH_TESTS)"
        say "uftrace record: ${FAIL[uftrace]}"
        failed_any=1
    else
        measure uftrace "uftrace record" "$jq_pg" stdout uftrace record "${uft_opts[@]}" -d "$work/uftrace.data" ./jq "${jqargs[@]}"
        if [ -d "$work/uftrace.data" ]; then
            uft_bytes=$(du -sb "$work/uftrace.data" | awk '{ print $1 }')
            uft_records=$(find "$work/uftrace.data" -name '*.dat' -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s / 32 }')
            if [ -n "${BENCH_UFTRACE_REPORT:-}" ]; then
                t0=$(date +%s.%N)
                say "uftrace report (sum of the calls)"
                uft_report=$(uftrace report -d "$work/uftrace.data" --no-pager 2>/dev/null |
                    awk '$(NF - 1) ~ /^[0-9]+$/ { s += $(NF - 1) } END { printf "%.0f", s }')
                step_done "uftrace report" "$t0"
            fi
            if [ -z "${BENCH_KEEP_UFTRACE:-}" ]; then rm -rf "$work/uftrace.data"; fi
        fi
    fi
fi

# ---- 5. the table ------------------------------------------------------------------------------
base=${MED[untraced]}
cbase=${CMED[untraced]}
ratio() { awk -v t="$1" -v b="$2" 'BEGIN { printf "%.2fx", t / b }'; }
nspc() { [ -n "$calls" ] && awk -v t="$1" -v b="$2" -v c="$calls" 'BEGIN { printf "%.1f", (t - b) * 1e9 / c }' || echo "?"; }
human() { awk -v n="$1" 'BEGIN { split("B KiB MiB GiB TiB", u); i = 1; while (n >= 1024 && i < 5) { n /= 1024; i++ }; printf "%.1f %s", n, u[i] }'; }
fmt='%-32s %8s %8s %8s %8s %8s %8s  %s\n'

{
    echo "liveprobe trace '*' vs uftrace record: jq ${jqver:-1.6} running $ntests of the $total tests of its suite"
    echo "  ($test_files; one process: jq -L tests/modules --run-tests suite.test)"
    echo "liveprobe: $lp ($(git -C "$(dirname "$lp")" log -1 --format='commit %h, %cd' --date=short 2>/dev/null || echo 'not in a git checkout'))"
    echo "uftrace: $(uftrace --version 2>/dev/null | head -n 1); kernel $(uname -r); $(nproc) CPUs: $(grep -m 1 'model name' /proc/cpuinfo | sed 's/.*: //')"
    echo "median of $runs runs; ratios and ns/call against the untraced normal build; calls: liveprobe --count's total"
    echo "wall: elapsed seconds; cpu: user + system seconds of the whole run (tracer and program)"
    echo "load average (1, 5, 15 min) before the measurements: $load_before, after: $(cut -d " " -f 1-3 /proc/loadavg)"
    echo
    printf "$fmt" "mode" "wall s" "ratio" "ns/call" "cpu s" "ratio" "ns/call" "notes (wall seconds of each run)"
    printf "$fmt" "----" "------" "-----" "-------" "-----" "-----" "-------" "-----"
    row() {  # row KEY LABEL NOTES
        local key=$1 label=$2 notes=$3
        if [ -z "${MED[$key]:-}" ]; then
            printf "$fmt" "$label" "-" "-" "-" "-" "-" "-" \
                "$(case ${FAIL[$key]:-} in skipped*) ;; *) printf "FAILED: " ;; esac)${FAIL[$key]:-}"
            return
        fi
        local ns=- cns=-
        if [ "$key" != untraced ]; then
            ns=$(nspc "${MED[$key]}" "$base")
            cns=$(nspc "${CMED[$key]}" "$cbase")
        fi
        [ -n "${FAIL[$key]:-}" ] && notes="$notes; FAILED: ${FAIL[$key]}"
        printf "$fmt" "$label" "${MED[$key]}" "$(ratio "${MED[$key]}" "$base")" "$ns" \
            "${CMED[$key]}" "$(ratio "${CMED[$key]}" "$cbase")" "$cns" "$notes"
    }
    row untraced "untraced (normal build)" "runs: ${ALL[untraced]}"
    row count "liveprobe trace --count '*'" "runs: ${ALL[count]:-}"
    row hist "liveprobe trace --hist '*'" "runs: ${ALL[hist]:-}"
    row events "liveprobe trace -o FILE '*'" "${ev_read:-?} events written ($(awk -v b="${ev_bytes:-0}" 'BEGIN { printf "%.1f GiB", b / 2^30 }')), ${ev_dropped:-?} dropped, ${ev_unringed:-?} without a ring, ${ev_missed:-?} missed; runs: ${ALL[events]:-}"
    row pg "-pg build, untraced" "runs: ${ALL[pg]:-}"
    row uftrace "uftrace record (-pg build)" "${uft_records:+$uft_records calls recorded, }${uft_bytes:+$(human "$uft_bytes") of data; }runs: ${ALL[uftrace]:-}"
    echo
    echo "calls (liveprobe --count '*', normal build): ${calls:-?}; functions: '*' matched ${nfuncs:-?} of the executable's $in_elf sized functions (_start/_init/_fini excluded), ${not_traced:-?} not traced, ${called:-?} called"
    [ -n "${NOTE[count]:-}" ] && echo "note (--count): ${NOTE[count]}"
    for k in count hist events; do
        [ -n "${SUMMARY[$k]:-}" ] && echo "liveprobe's summary, $k (last run): ${SUMMARY[$k]#liveprobe: }"
    done
    if [ -n "${MED[uftrace]:-}" ] && [ -n "${MED[pg]:-}" ] && [ -n "$calls" ]; then
        echo "uftrace over the untraced -pg build: $(nspc "${MED[uftrace]}" "${MED[pg]}") ns/call wall, $(nspc "${CMED[uftrace]}" "${CMED[pg]}") cpu; uftrace's own call count: ${uft_records:-?} (data bytes / 32)${uft_report:+, $uft_report (uftrace report)}"
    fi
    echo "probe placement and removal (jq --version, ${nfuncs:-?} probes; median wall s): untraced ${START[plain]}, --count ${START[count]}, --hist ${START[hist]}, per event ${START[events]}"
    echo
    echo "targets (wall):"
    verdict() { [ "$1" = 1 ] && echo "met" || echo "NOT met"; }
    if [ -n "${MED[count]:-}" ]; then
        echo "  --count '*' <= 4x untraced: $(ratio "${MED[count]}" "$base") -> $(verdict "$(awk -v t="${MED[count]}" -v b="$base" 'BEGIN { print (t / b <= 4) }')")"
    fi
    if [ -n "${MED[hist]:-}" ]; then
        echo "  --hist '*' <= 15x untraced: $(ratio "${MED[hist]}" "$base") -> $(verdict "$(awk -v t="${MED[hist]}" -v b="$base" 'BEGIN { print (t / b <= 15) }')")"
    fi
    if [ -n "${MED[events]:-}" ] && [ -n "${MED[uftrace]:-}" ] && [ -n "$calls" ]; then
        e=$(nspc "${MED[events]}" "$base")
        u=$(nspc "${MED[uftrace]}" "$base")
        ok=$(awk -v e="$e" -v u="$u" -v d="${ev_dropped:-1}" 'BEGIN { print (e <= u / 2 && d == 0) }')
        echo "  per event <= 1/2 of uftrace's ns/call, none dropped: $e vs $u ns/call, ${ev_dropped:-?} dropped -> $(verdict "$ok")"
    fi
} | tee "$work/results.txt"

{
    echo
    echo "step times:"
    printf '  %s\n' "${steps[@]}"
    echo "  total: $(since "$t_script") s; logs in $logs; table in $work/results.txt"
} | tee -a "$work/results.txt" >&2
exit "$failed_any"
