#!/bin/bash
# What `liveprobe trace --serve` costs when it is left on (issue 35, point 3): 20 functions of a
# real server kept in histograms, and a scrape of 1,000 functions.
#
#   bash bench/metrics_cost.sh [BUILD_DIR] [OUT_FILE]    (root; defaults: build, stdout only)
#   RUNS=10 SECS=5 NICE=-10 bash bench/metrics_cost.sh   (interleaved pairs, seconds of wrk a
#                                                        run, the nice of all it starts)
#
# The server: a private nginx (Debian's nginx-light, scripts/deps.sh), a copy of /usr/sbin/nginx
# named lpbench-nginx run with -p DIR -c CONF from tests/chaos/nginx.conf.in (1 worker, `user
# root`, a free loopback port, a 4 KiB page), pinned to CPU 0; its load, wrk -t1 -c8 (--timeout
# 10s), pinned to CPU 1 with the tool and curl. The 20 functions (NGX_FUNCS below) are the request path an SRE
# would keep an eye on: parsing, the phases, the content and filter chain, finalizing, and the
# pool allocator (several calls a request); each is checked to be called on every request.
# Everything the script starts runs at nice NICE (-10), so that a shared machine's other load
# disturbs it less.
#  1. calls/s: `trace -p WORKER --count` of the 20 during one wrk run of SECS s.
#  2. ns a call of a --hist probe: bench/programs/call_cycles.cpp calling 20 functions in turn
#     (`liveprobe-call-cycles 20`), traced with --hist on those 20, less the untraced run (TSC
#     cycles a call, the median of 3 interleaved pairs; ns at the TSC's rate measured here).
#  3. The predicted overhead: calls a request x ns a call / the worker's CPU time a request
#     (untraced; all its threads' /proc/PID/task/*/schedstat, ns), and as a share of one core.
#  4. nginx's own benchmark: RUNS pairs of wrk runs, untraced then traced, interleaved; a traced
#     run is a fresh `trace --serve 127.0.0.1:0 --follow-name lpbench-nginx --hist` of the 20
#     (master and worker), attached before the run and stopped (probes removed) after it, with
#     one scrape at its end. Medians, min-max, ratio of medians; the worker's CPU us a request,
#     whose traced-untraced difference over the calls a request is the ns a call in nginx itself.
#  5. A scrape of 1,000 functions: a generated C program calling 1,000 noinline functions
#     (2 million calls/s, in 10 ms periods) under `trace --serve -p PID --hist 'lpb_f*'`:
#     the time of a curl of /metrics (median of 20, text and OpenMetrics), the body's size; the
#     target's CPU time in windows of SECS s without and with a scrape every 100 ms (3 of each,
#     interleaved), its agent thread's share (the trace-sync a scrape asks), and the target's own
#     TSC cycles a call (median of its batches) in each: a scrape reads the tool's mapping of the
#     shared memory, and the target's hit path is the same instructions with or without it.
# Prints Markdown tables with the machine (CPU, clocksource, load average) and the commands.
set -euo pipefail
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
    sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
b=$(cd "${1:-build}" && pwd) outfile=${2:-}
runs=${RUNS:-10} secs=${SECS:-5} nice=${NICE:--10}
# CPU 0: the server (and the 1,000-function target); CPU 1: wrk, the tool, curl; both at nice
# $nice, so that the other load of a shared machine disturbs them less (NICE=0: none).
on0=(nice -n "$nice" taskset -c 0) on1=(nice -n "$nice" taskset -c 1)
lp=$b/tools/liveprobe/liveprobe cc=$b/bench/liveprobe-call-cycles
for f in "$lp" "$cc"; do [ -x "$f" ] || { echo "$f: not built (cmake --build $b -j2)" >&2; exit 1; }; done
for c in wrk curl taskset gcc python3; do command -v $c >/dev/null || { echo "$c: not installed" >&2; exit 1; }; done
[ -x /usr/sbin/nginx ] || { echo "/usr/sbin/nginx: not installed (scripts/deps.sh: nginx-light)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run as root (nginx's workers run as root, as in tests/chaos)" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 CPUs (nginx on one, wrk on the other)" >&2; exit 1; }
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/lp-metrics-cost.XXXXXX)
export LIVEPROBE_RUNTIME_DIR=${LIVEPROBE_RUNTIME_DIR:-$tmp/run}
mkdir -p -m 700 "$LIVEPROBE_RUNTIME_DIR"
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "metrics_cost: $*" >&2; }
wait_for() { for _ in $(seq 600); do "$@" && return 0; sleep 0.05; done; return 1; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# cpu_ns PID: the CPU time of all the process's threads, ns (schedstat's first field).
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%d\n", s }'; }
# agent_ns PID: the same, the main thread left out (the agent's threads).
agent_ns() {
    local t s=0
    for t in /proc/"$1"/task/*; do [ "${t##*/}" = "$1" ] || s=$((s + $(cut -d' ' -f1 "$t/schedstat" 2>/dev/null || echo 0))); done
    echo $s
}
# stats: reads numbers, prints "median min max q1 q3".
stats() { sort -g | awk '{ a[NR] = $1 } END { if (!NR) { print "- - - - -"; exit }
    m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
    print m, a[1], a[NR], a[int((NR + 3) / 4)], a[int((3 * NR + 3) / 4)] }'; }
calc() { awk "BEGIN { printf \"$1\n\", $2 }"; }

# --- the machine -------------------------------------------------------------------------------
cpu_model=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)
cat >"$tmp/tsc.c" <<'EOF'
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC_RAW, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(void) {
    double t0 = now(); unsigned long long c0 = __rdtsc();
    while (now() - t0 < 0.3) {}
    double t1 = now(); unsigned long long c1 = __rdtsc();
    printf("%.4f\n", (c1 - c0) / (t1 - t0) / 1e9);
    return 0;
}
EOF
gcc -O2 -o "$tmp/tsc" "$tmp/tsc.c"
tsc_ghz=$("$tmp/tsc")
log "$cpu_model, clocksource $clocksource, TSC $tsc_ghz GHz, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# --- nginx -------------------------------------------------------------------------------------
NGX_FUNCS=(
    ngx_http_process_request ngx_http_process_request_header ngx_http_process_request_uri
    ngx_http_parse_request_line ngx_http_parse_header_line ngx_http_handler
    ngx_http_core_run_phases ngx_http_core_find_config_phase ngx_http_core_access_phase
    ngx_http_core_content_phase ngx_http_map_uri_to_path ngx_open_cached_file
    ngx_http_send_header ngx_http_output_filter ngx_http_write_filter ngx_linux_sendfile_chain
    ngx_http_finalize_request ngx_http_free_request ngx_palloc ngx_pcalloc
)
ng=$tmp/nginx
mkdir -p "$ng/www" "$ng/tmp"
cp /usr/sbin/nginx "$ng/lpbench-nginx"
head -c 3000 /dev/urandom | base64 >"$ng/www/index.html"
port=$(free_port)
sed -e "s|@DIR@|$ng|g" -e "s|@PORT@|$port|g" -e "s|@WORKERS@|1|g" "$here/tests/chaos/nginx.conf.in" >"$ng/nginx.conf"
"${on0[@]}" "$ng/lpbench-nginx" -p "$ng/" -c "$ng/nginx.conf" -e "$ng/error.log" >"$ng/stdout" 2>&1 &
master=$!
pids+=("$master")
url=http://127.0.0.1:$port/index.html
wait_for curl -sf -o /dev/null "$url" || { echo "nginx did not start:" >&2; cat "$ng/stdout" "$ng/error.log" >&2; exit 1; }
worker=
for _ in $(seq 100); do worker=$(ps --ppid "$master" -o pid= | tr -d ' '); [ -n "$worker" ] && break; sleep 0.1; done
[ -n "$worker" ] || { echo "nginx started no worker" >&2; exit 1; }
log "nginx $(/usr/sbin/nginx -v 2>&1 | sed 's/.*nginx\///'): master $master, worker $worker (CPU 0), port $port"
ngx_version=$(/usr/sbin/nginx -v 2>&1 | sed 's/.*nginx\///')
# wrk_run FILE: one run of wrk on CPU 1; the worker's CPU ns over it in $run_cpu, its requests
# in $run_req, requests/s in $run_rps.
wrk_run() {
    local c0 c1 t0
    t0=$(date +%s%N) c0=$(cpu_ns "$worker")
    "${on1[@]}" wrk -t1 -c8 -d"${secs}s" --timeout 10s "$url" >"$1" 2>&1
    c1=$(cpu_ns "$worker")
    run_cpu=$((c1 - c0)) run_ns=$(( $(date +%s%N) - t0 ))
    run_req=$(sed -nE 's/^ *([0-9]+) requests in .*/\1/p' "$1")
    run_rps=$(sed -nE 's/^Requests\/sec: *([0-9.]+).*/\1/p' "$1")
    [ -n "$run_req" ] && ! grep -qE 'Non-2xx|Socket errors' "$1" || { echo "wrk failed:" >&2; cat "$1" >&2; exit 1; }
}
"${on1[@]}" wrk -t1 -c8 -d2s "$url" >/dev/null  # warm-up

# 1. Calls per second of the 20, counted.
log "1. calls/s: trace --count of the 20 functions during ${secs} s of wrk"
"${on1[@]}" "$lp" trace -p "$worker" --count "${NGX_FUNCS[@]}" >"$tmp/count.out" 2>"$tmp/count.err" &
tool=$!
pids+=("$tool")
wait_for grep -q 'placed' "$tmp/count.err" || { cat "$tmp/count.err" >&2; exit 1; }
wrk_run "$tmp/count.wrk"
count_req=$run_req count_rps=$run_rps count_cpu=$run_cpu
count_secs=$(sed -nE 's/^ *[0-9]+ requests in ([0-9.]+)s.*/\1/p' "$tmp/count.wrk")
kill -INT "$tool"
wait "$tool" || true
for f in "${NGX_FUNCS[@]}"; do
    n=$(awk -v f="$f" '$1 == f { print $2 }' "$tmp/count.out")
    [ -n "$n" ] || { echo "$f: not in the counts:" >&2; cat "$tmp/count.out" "$tmp/count.err" >&2; exit 1; }
    [ "$n" -ge "$count_req" ] || { echo "$f: $n calls for $count_req requests: not on every request" >&2; exit 1; }
    echo "$f $n"
done >"$tmp/counts"
calls=$(awk '{ s += $2 } END { print s }' "$tmp/counts")
calls_per_req=$(calc %.2f "$calls / $count_req")
calls_per_s=$(calc %.0f "$calls / $count_secs")

# 2. ns a call of a --hist probe, 20 functions in turn.
log "2. ns a call: liveprobe-call-cycles 20, untraced and under --hist of lp_gen_f0..19 (3 pairs)"
gen20=()
for i in $(seq 0 19); do gen20+=("lp_gen_f$i"); done
cyc() { sed -nE 's/^TSC cycles per call of .*: ([0-9.]+)$/\1/p'; }
for r in 1 2 3; do
    "$cc" 20 | cyc >>"$tmp/cc.untraced"
    "$lp" trace --hist "${gen20[@]}" -- "$cc" 20 2>"$tmp/cc.err" | cyc >>"$tmp/cc.hist" || { cat "$tmp/cc.err" >&2; exit 1; }
done
cc_un=$(stats <"$tmp/cc.untraced" | cut -d' ' -f1)
cc_hist=$(stats <"$tmp/cc.hist" | cut -d' ' -f1)
cc_added=$(calc %.1f "$cc_hist - $cc_un")
ns_call=$(calc %.2f "$cc_added / $tsc_ghz")

# 4. Interleaved runs.
attached_both() { local n; n=$(grep -c 'serving the calls of PID' "$1" 2>/dev/null) || true; [ "${n:-0}" -ge 2 ]; }
log "4. $runs pairs of wrk runs (${secs} s), untraced and under trace --serve --hist of the 20"
for r in $(seq "$runs"); do
    wrk_run "$tmp/u$r.wrk"
    echo "$run_rps $run_cpu $run_req $run_ns" >>"$tmp/untraced"
    "${on1[@]}" "$lp" trace --serve 127.0.0.1:0 --follow-name lpbench-nginx --hist "${NGX_FUNCS[@]}" 2>"$tmp/serve$r.err" &
    tool=$!
    pids+=("$tool")
    wait_for attached_both "$tmp/serve$r.err" ||
        { echo "trace --serve did not attach to nginx's two processes:" >&2; cat "$tmp/serve$r.err" >&2; exit 1; }
    murl=$(grep -o 'http://[^ ]*' "$tmp/serve$r.err" | head -1)
    wrk_run "$tmp/t$r.wrk"
    echo "$run_rps $run_cpu $run_req $run_ns" >>"$tmp/traced"
    curl -s "$murl" >"$tmp/scrape$r.prom"
    served=$(awk -v p="pid=\"$worker\"" 'index($0, "liveprobe_calls_total{" p) == 1 { s += $2 } END { printf "%d\n", s }' "$tmp/scrape$r.prom")
    [ "$served" -ge $((run_req * ${calls_per_req%.*})) ] ||
        { echo "run $r: the scrape has $served calls of the worker for $run_req requests" >&2; exit 1; }
    kill -TERM "$tool"
    wait "$tool" || true
    log "  run $r: untraced $(sed -n "${r}p" "$tmp/untraced" | cut -d' ' -f1) req/s, traced $run_rps req/s"
done
col() { awk -v c="$1" '{ print $c }' "$2"; }
read -r un_rps un_rps_min un_rps_max un_rps_q1 un_rps_q3 < <(col 1 "$tmp/untraced" | stats)
read -r tr_rps tr_rps_min tr_rps_max tr_rps_q1 tr_rps_q3 < <(col 1 "$tmp/traced" | stats)
read -r un_us un_us_min un_us_max un_us_q1 un_us_q3 < <(awk '{ print $2 / $3 / 1000 }' "$tmp/untraced" | stats)
read -r tr_us tr_us_min tr_us_max tr_us_q1 tr_us_q3 < <(awk '{ print $2 / $3 / 1000 }' "$tmp/traced" | stats)
read -r un_load _ < <(awk '{ print $2 / $4 * 100 }' "$tmp/untraced" | stats)
read -r tr_load _ < <(awk '{ print $2 / $4 * 100 }' "$tmp/traced" | stats)

# 3. The prediction.
pred_share=$(calc %.2f "$calls_per_req * $ns_call / ($un_us * 1000) * 100")
pred_core=$(calc %.2f "$calls_per_s * $ns_call / 1e9 * 100")
pred_core_un=$(calc %.2f "$un_rps * $calls_per_req * $ns_call / 1e9 * 100")
meas_share=$(calc %.2f "($tr_us - $un_us) / $un_us * 100")
insitu_ns=$(calc %.1f "($tr_us - $un_us) * 1000 / $calls_per_req")

# 5. Scrapes of 1,000 functions.
log "5. a scrape of 1,000 functions"
awk 'BEGIN {
    print "#include <stdio.h>\n#include <stdlib.h>\n#include <time.h>\n#include <x86intrin.h>"
    for (i = 0; i < 1000; i++)
        printf "__attribute__((noipa)) long lpb_f%d(long x) { x = x * %d + %d; return x ^ (x >> %d); }\n", i, 2 * i + 3, i, i % 13 + 1
    printf "long (*const lpb_table[1000])(long) = {"
    for (i = 0; i < 1000; i++) printf "%slpb_f%d", i ? ", " : "", i
    print "};"
}' >"$tmp/many.c"
cat >>"$tmp/many.c" <<'EOF'
/* Every 10 ms, BATCHES batches of one call of each function (20: 2 million calls/s); each
   second, the median and the least TSC cycles a call of that second's batches. */
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
    int batches = argc > 1 ? atoi(argv[1]) : 20, n = 0;
    double *c = malloc(sizeof(double) * 100 * batches);
    long x = 1;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        for (int k = 0; k < batches; k++) {
            unsigned long long t0 = __rdtsc();
            for (int i = 0; i < 1000; i++) x = lpb_table[i](x);
            c[n++] = (__rdtsc() - t0) / 1000.0;
        }
        if (n == 100 * batches) {
            qsort(c, n, sizeof *c, cmp);
            printf("%.1f %.1f %ld\n", c[n / 2], c[0], x & 1);
            fflush(stdout);
            n = 0;
        }
        next.tv_nsec += 10000000;
        if (next.tv_nsec >= 1000000000) { next.tv_nsec -= 1000000000; next.tv_sec++; }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    }
}
EOF
gcc -O2 -o "$tmp/lpbench-many" "$tmp/many.c"
"${on0[@]}" "$tmp/lpbench-many" 20 >"$tmp/many.out" &
many=$!
pids+=("$many")
wait_for grep -q ready "$tmp/many.out"
sleep 1.5
l0=$(wc -l <"$tmp/many.out") t0=$(date +%s%N) m0=$(cut -d' ' -f1 "/proc/$many/task/$many/schedstat")
sleep "$secs"
m1=$(cut -d' ' -f1 "/proc/$many/task/$many/schedstat") t1=$(date +%s%N) l1=$(wc -l <"$tmp/many.out")
echo "$((m1 - m0)) 0 0 $((t1 - t0))" >"$tmp/win.untraced"
sed -n "$((l0 + 2)),${l1}p" "$tmp/many.out" | awk '{ print $1 }' >"$tmp/cyc.untraced"
"${on1[@]}" "$lp" trace --serve 127.0.0.1:0 -p "$many" --hist 'lpb_f*' 2>"$tmp/many.err" &
tool=$!
pids+=("$tool")
wait_for grep -q 'serving the calls of PID' "$tmp/many.err" || { cat "$tmp/many.err" >&2; exit 1; }
placed=$(sed -nE 's/.*placed ([0-9]+) probes \(([0-9]+) jump-optimized\).*/\1 \2/p' "$tmp/many.err")
murl=$(grep -o 'http://[^ ]*' "$tmp/many.err" | head -1)
sleep 1
om='Accept: application/openmetrics-text; version=1.0.0'
for i in $(seq 20); do
    "${on1[@]}" curl -s -o "$tmp/many.prom" -w '%{time_total} %{size_download}\n' "$murl" >>"$tmp/scrape.text"
    "${on1[@]}" curl -s -o "$tmp/many.om" -H "$om" -w '%{time_total} %{size_download}\n' "$murl" >>"$tmp/scrape.om"
done
read -r text_ms text_min text_max _ < <(awk '{ print $1 * 1000 }' "$tmp/scrape.text" | stats)
read -r om_ms om_min om_max _ < <(awk '{ print $1 * 1000 }' "$tmp/scrape.om" | stats)
text_bytes=$(tail -1 "$tmp/scrape.text" | cut -d' ' -f2) om_bytes=$(tail -1 "$tmp/scrape.om" | cut -d' ' -f2)
series=$(grep -c '^liveprobe_' "$tmp/many.prom")
functions=$(grep -c '^liveprobe_calls_total{' "$tmp/many.prom")
# window MODE: SECS s of the target's CPU time, its main thread (the calls) and its agent's
# threads apart, scraped every 100 ms (MODE scraped) or not.
window() {
    local m0 a0 m1 a1 l0 l1 s=0 t0 t1 end
    l0=$(wc -l <"$tmp/many.out")
    t0=$(date +%s%N) m0=$(cut -d' ' -f1 "/proc/$many/task/$many/schedstat") a0=$(agent_ns "$many")
    end=$((t0 + secs * 1000000000))
    if [ "$1" = scraped ]; then
        while [ "$(date +%s%N)" -lt "$end" ]; do
            "${on1[@]}" curl -s -o /dev/null "$murl"
            s=$((s + 1))
            sleep 0.1
        done
    else
        sleep "$secs"
    fi
    m1=$(cut -d' ' -f1 "/proc/$many/task/$many/schedstat") a1=$(agent_ns "$many") t1=$(date +%s%N)
    l1=$(wc -l <"$tmp/many.out")
    echo "$((m1 - m0)) $((a1 - a0)) $s $((t1 - t0))" >>"$tmp/win.$1"
    sed -n "$((l0 + 2)),${l1}p" "$tmp/many.out" | awk '{ print $1 }' >>"$tmp/cyc.$1"
}
log "   the target's CPU time, ${secs} s windows, not scraped and scraped every 100 ms (4 of each)"
for r in 1 2 3 4; do window idle; window scraped; done
kill -TERM "$tool"
wait "$tool" || true
scrapes_served=$(sed -nE 's/.*served ([0-9]+) scrapes?.*/\1/p' "$tmp/many.err")
ms_s() { awk -v c="$1" '{ print $c / $4 * 1e3 }' "$2" | stats; }  # ms a second of the window's own length
read -r un_main un_main_min un_main_max _ < <(ms_s 1 "$tmp/win.untraced")
read -r idle_main idle_main_min idle_main_max _ < <(ms_s 1 "$tmp/win.idle")
read -r scr_main scr_main_min scr_main_max _ < <(ms_s 1 "$tmp/win.scraped")
read -r idle_agent idle_agent_min idle_agent_max _ < <(ms_s 2 "$tmp/win.idle")
read -r scr_agent scr_agent_min scr_agent_max _ < <(ms_s 2 "$tmp/win.scraped")
scrapes=$(awk '{ s += $3 } END { print s }' "$tmp/win.scraped")
agent_us_scrape=$(awk '{ a += $2; s += $3 } END { printf "%.0f", a / s / 1000 }' "$tmp/win.scraped")
scrapes_per_s=$(awk '{ n += $3; t += $4 } END { printf "%.2f", n / t * 1e9 }' "$tmp/win.scraped")
read -r cyc_un cyc_un_min cyc_un_max _ < <(stats <"$tmp/cyc.untraced")
read -r cyc_idle cyc_idle_min cyc_idle_max _ < <(stats <"$tmp/cyc.idle")
read -r cyc_scr cyc_scr_min cyc_scr_max _ < <(stats <"$tmp/cyc.scraped")

# --- the report --------------------------------------------------------------------------------
f0() { local v; for v; do printf '%.0f ' "$v"; done | sed 's/ $//'; }
f1() { local v; for v; do printf '%.1f ' "$v"; done | sed 's/ $//'; }
f2() { local v; for v; do printf '%.2f ' "$v"; done | sed 's/ $//'; }
r1() { printf '%s-%s' "$(f1 "$1")" "$(f1 "$2")"; }
r0() { printf '%s-%s' "$(f0 "$1")" "$(f0 "$2")"; }
r2() { printf '%s-%s' "$(f2 "$1")" "$(f2 "$2")"; }
one_pct=$(calc %.1f "$un_us * 1000 * 0.01 / $ns_call")
{
echo "## trace --serve's always-on cost ($(date -u +%Y-%m-%d), $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo
echo "Machine: $cpu_model, $(nproc) CPUs, clocksource \`$clocksource\`, TSC $tsc_ghz GHz (measured), $(uname -r),"
echo "load average at the end $(cut -d' ' -f1-3 /proc/loadavg). nginx $ngx_version (1 worker, CPU 0; wrk -t1 -c8 and the tool on CPU 1; all at nice $nice)."
echo
echo "### The 20 functions, calls a request (\`trace -p WORKER --count\`, ${count_req} requests in ${count_secs} s)"
echo
echo "| function | calls | a request |"
echo "|---|---|---|"
while read -r f n; do echo "| \`$f\` | $n | $(calc %.2f "$n / $count_req") |"; done <"$tmp/counts"
echo "| all 20 | $calls | $calls_per_req |"
echo
echo "### Predicted overhead"
echo
echo "| figure | value | from |"
echo "|---|---|---|"
echo "| calls/s of the 20 | $calls_per_s | ${calls} calls in ${count_secs} s of wrk ($(f0 $count_rps) req/s, under --count) |"
echo "| calls a request | $calls_per_req | the same |"
echo "| a --hist call, added | $cc_added cycles = $ns_call ns | \`liveprobe-call-cycles 20\` under \`--hist\` of its 20 functions ($cc_hist) less untraced ($cc_un), medians of 3, TSC $tsc_ghz GHz |"
echo "| nginx worker's CPU a request, untraced | $(f2 $un_us) us | median of $runs runs (schedstat of all its threads / wrk's requests) |"
echo "| predicted overhead, share of the server's CPU | **$pred_share %** | calls a request x ns a call / CPU a request |"
echo "| calls a request that 1 % of the CPU allows | $one_pct | 1 % of the CPU a request / ns a call |"
echo "| predicted overhead, share of one core | $pred_core % at $(f0 $count_rps) req/s; $pred_core_un % at the untraced median $(f0 $un_rps) req/s | calls/s x ns a call |"
echo
echo "### nginx's own benchmark: $runs interleaved pairs of ${secs} s wrk runs"
echo
echo "Traced: \`trace --serve 127.0.0.1:0 --follow-name lpbench-nginx --hist\` of the 20, attached before"
echo "each traced run and stopped (its probes removed) after it, with one scrape at the end."
echo
echo "| | untraced median | (min-max; IQR) | traced median | (min-max; IQR) | traced/untraced |"
echo "|---|---|---|---|---|---|"
echo "| wrk requests/s | $(f0 $un_rps) | ($(r0 $un_rps_min $un_rps_max); $(r0 $un_rps_q1 $un_rps_q3)) | $(f0 $tr_rps) | ($(r0 $tr_rps_min $tr_rps_max); $(r0 $tr_rps_q1 $tr_rps_q3)) | $(calc %.3f "$tr_rps / $un_rps") |"
echo "| worker CPU us a request | $(f2 $un_us) | ($(r2 $un_us_min $un_us_max); $(r2 $un_us_q1 $un_us_q3)) | $(f2 $tr_us) | ($(r2 $tr_us_min $tr_us_max); $(r2 $tr_us_q1 $tr_us_q3)) | $(calc %.3f "$tr_us / $un_us") |"
echo "| worker CPU, % of a core | $(calc %.1f "$un_load") | | $(calc %.1f "$tr_load") | | |"
echo
echo "Measured overhead (CPU a request, medians): $meas_share % against $pred_share % predicted;"
echo "in nginx itself that is $insitu_ns ns a call (traced - untraced CPU a request / $calls_per_req calls), against $ns_call ns from the benchmark."
echo "Requests/s: the medians differ by $(calc %+.1f "($tr_rps - $un_rps) / $un_rps * 100") %; the untraced runs' IQR spans $(calc %.0f "($un_rps_q3 - $un_rps_q1) / $un_rps * 100") % of their median,"
echo "their min-max $(calc %.0f "($un_rps_max - $un_rps_min) / $un_rps * 100") % (the worker runs at $(calc %.0f "$un_load") % of its core: wrk, on the other, and the machine's other load set the pace)."
echo
echo "### A scrape of 1,000 functions"
echo
echo "Target: a generated C program, 1,000 noinline functions called 2 million times a second (CPU 0);"
echo "\`trace --serve 127.0.0.1:0 -p PID --hist 'lpb_f*'\`: $(set -- $placed; echo "$1 probes placed, $2 jump-optimized"), $functions functions served, $series sample lines."
echo
echo "| scrape (curl, 20 each) | median | min-max | body |"
echo "|---|---|---|---|"
echo "| text (0.0.4) | $(f1 $text_ms) ms | $(r1 $text_min $text_max) | $text_bytes bytes |"
echo "| OpenMetrics 1.0.0 | $(f1 $om_ms) ms | $(r1 $om_min $om_max) | $om_bytes bytes |"
echo
echo "The target's CPU time under the same calls, ${secs} s windows (traced: 4 of each, interleaved), ms a second:"
echo
echo "| | main thread (the calls): median (min-max) | the agent's threads | TSC cycles a call (median of its 1 s medians; min-max) |"
echo "|---|---|---|---|"
echo "| untraced (before attaching) | $(f1 $un_main) | - | $(f1 $cyc_un) ($(r1 $cyc_un_min $cyc_un_max)) |"
echo "| traced, not scraped | $(f1 $idle_main) ($(r1 $idle_main_min $idle_main_max)) | $(f2 $idle_agent) ($(r2 $idle_agent_min $idle_agent_max)) | $(f1 $cyc_idle) ($(r1 $cyc_idle_min $cyc_idle_max)) |"
echo "| traced, scraped every 100 ms ($scrapes scrapes in all) | $(f1 $scr_main) ($(r1 $scr_main_min $scr_main_max)) | $(f2 $scr_agent) ($(r2 $scr_agent_min $scr_agent_max)) | $(f1 $cyc_scr) ($(r1 $cyc_scr_min $cyc_scr_max)) |"
echo
echo "A scrape's work in the target is its agent's answer to trace-sync (the misses copied to where the tool"
echo "reads them): $agent_us_scrape us of CPU a scrape (the agent's threads' time in the scraped windows / $scrapes scrapes;"
echo "the tool served $scrapes_served scrapes in all). Scraped ($scrapes_per_s scrapes a second: each curl, then 100 ms),"
echo "the main thread's median moved by $(calc %+.1f "$scr_main - $idle_main") ms a second, its median batch by $(calc %+.1f "$cyc_scr - $cyc_idle") TSC cycles a call."
echo
echo "Commands: \`bash bench/metrics_cost.sh $b\` (RUNS=$runs SECS=$secs); build: $b."
} | tee "$tmp/report.md"
[ -z "$outfile" ] || cp "$tmp/report.md" "$outfile"
