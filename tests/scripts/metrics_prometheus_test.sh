#!/usr/bin/env bash
# trace --serve (issue 35, items 1 and 2) scraped by a real Prometheus: Debian's, which
# scripts/deps.sh installs without starting it; a private one here, on a free loopback port with
# its own storage, scraping every second. Two processes of tests/programs/metrics_target.c, each
# served by its own `trace --serve`, as a fleet's hosts are: each runs bursts of calls whose
# numbers are known (op_fast, op_slow) and whose durations are known (op_slow: 1.5 ms, in the
# log2 bucket (2^20, 2^21] ns). Through Prometheus's HTTP query API:
#   - increase() over the whole run, evaluated at the last scrape, is the calls exactly (the
#     series start at 0, so nothing is extrapolated before; nothing after, at the last sample);
#     evaluated later, Prometheus extrapolates to the window's end by the time since the last
#     scrape, at most 1.1 average intervals: with N samples in the window, within
#     [K, K (1 + 1.1 / (N - 1))];
#   - histogram_quantile(0.5) of op_slow falls in its true bucket, (1.048576, 2.097152] ms, and
#     op_fast's under 1 us;
#   - the fleet: both targets up, each pid's calls and their sum;
#   - the tool restarted with new specs (SIGTERM, then again on the same port): the target runs
#     on, undisturbed (its output the same), its counters start again from 0, which increase()
#     takes as a counter reset: the two bursts' calls, exactly.
# promtool check metrics accepts the text format; the OpenMetrics one is read by a strict parser
# (python3-prometheus-client's). Skipped, with the reason, only where Prometheus is not
# installed.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" metrics_prometheus
py=/usr/bin/python3  # Debian's, with its prometheus_client
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
    echo "SKIP: Prometheus is not installed (scripts/deps.sh installs Debian's prometheus, as root)"
    exit 77
fi
target=$bin/tests/lp_metrics_target
FA=50000 SA=200 FB=30000 SB=100

# expected_sum FAST SLOW: what a burst's calls return, summed (metrics_target.c).
expected_sum() { echo $(( 3 * $1 * ($1 - 1) / 2 + $1 + $2 * ($2 - 1) / 2 + $2 )); }
# free_port: a loopback port nothing listens on (the kernel's pick, released).
free_port() { $py -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# wait_for CMD...: until CMD succeeds, at most 60 s.
wait_for() { for _ in $(seq 600); do "$@" && return 0; sleep 0.1; done; return 1; }
# serve NAME PID ADDR SPEC...: a trace --serve of PID in the background (its pid in $served,
# stderr in $tmp/NAME.err); its URL once it listens, in $url.
serve() {
    local name=$1 pid=$2 addr=$3
    shift 3
    "$lp" trace -p "$pid" --serve "$addr" "$@" 2>"$tmp/$name.err" &
    served=$!
    pids+=("$served")
    wait_for grep -q 'serving the calls of PID' "$tmp/$name.err" || { cat "$tmp/$name.err"; return 1; }
    url=$(grep -o 'http://[^ ]*' "$tmp/$name.err")
}
# q QUERY [TIME]: the value of Prometheus's answer's first sample ("none": no sample).
q() {
    curl -s "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" ${2:+--data-urlencode "time=$2"} |
        $py -c 'import json, sys
r = json.load(sys.stdin)
v = r.get("data", {}).get("result", [])
print(v[0]["value"][1] if r.get("status") == "success" and v and isinstance(v, list) else "none")'
}
# equals QUERY VALUE: whether the query gives VALUE now.
equals() { [ "$(q "$1")" = "$2" ]; }
# within X LO HI: LO <= X <= HI (floats).
within() { $py -c "import sys; x = float('$1'); sys.exit(0 if $2 <= x <= $3 else 1)" 2>/dev/null; }

"${launch[@]}" "$target" $FA $SA >"$tmp/a.out" &
A=$!
pids+=("$A")
"${launch[@]}" "$target" $FB $SB >"$tmp/b.out" &
B=$!
pids+=("$B")
wait_for grep -q ready "$tmp/a.out" && wait_for grep -q ready "$tmp/b.out" || fail "the targets did not start"
serve a "$A" 127.0.0.1:0 op_fast op_slow || fail "trace --serve of A did not start"
tool_a=$served url_a=$url
serve b "$B" 127.0.0.1:0 op_fast op_slow || fail "trace --serve of B did not start"
tool_b=$served url_b=$url
port_a=${url_a#http://127.0.0.1:} port_a=${port_a%/metrics}
port_b=${url_b#http://127.0.0.1:} port_b=${port_b%/metrics}

# The formats, straight from the endpoint.
curl -s -D "$tmp/text.head" "$url_a" >"$tmp/text.prom"
if promtool check metrics <"$tmp/text.prom" >"$tmp/promtool.out" 2>&1 && [ ! -s "$tmp/promtool.out" ] &&
   grep -qi '^content-type: text/plain; version=0.0.4' "$tmp/text.head"; then
    pass "promtool check metrics accepts the text format"
else
    fail "promtool check metrics: $(cat "$tmp/promtool.out"; grep -i content-type "$tmp/text.head")"
fi
curl -s -D "$tmp/om.head" -H 'Accept: application/openmetrics-text; version=1.0.0' "$url_a" >"$tmp/om.txt"
if $py -c 'import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse
families = {f.name: f.type for f in parse(open(sys.argv[1]).read())}
want = {"liveprobe_calls": "counter", "liveprobe_call_duration_seconds": "histogram", "liveprobe_missed": "counter", "liveprobe_processes": "gauge",
        "liveprobe_events_dropped": "counter", "liveprobe_probes": "gauge"}
sys.exit(0 if families == want else "families: %s" % families)' "$tmp/om.txt" 2>"$tmp/om.err" &&
   grep -qi '^content-type: application/openmetrics-text; version=1.0.0' "$tmp/om.head"; then
    pass "OpenMetrics: a strict parser reads the six families"
else
    fail "OpenMetrics: $(tail -3 "$tmp/om.err"; grep -i content-type "$tmp/om.head")"
fi

# A private Prometheus scraping both, every second.
pport=$(free_port)
cat >"$tmp/prometheus.yml" <<CONF
global: {scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s}
scrape_configs:
  - job_name: liveprobe
    static_configs: [{targets: ['127.0.0.1:$port_a', '127.0.0.1:$port_b']}]
CONF
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/prometheus" \
    --web.listen-address="127.0.0.1:$pport" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
if ! wait_for curl -sf "http://127.0.0.1:$pport/-/ready" -o /dev/null; then
    fail "Prometheus was not ready in 60 s: $(tail -5 "$tmp/prometheus.log")"
    echo "$failures failure(s)"
    exit 1
fi
# Scraped twice before the calls: every series starts at 0.
for p in $A $B; do
    wait_for equals "count_over_time(liveprobe_calls_total{pid=\"$p\",function=\"op_slow\"}[1m]) >= bool 2" 1 ||
        fail "PID $p: Prometheus has no samples of its calls"
done
[ "$(q 'count(up{job="liveprobe"} == 1)')" = 2 ] && pass "the fleet: both endpoints up" ||
    fail "up: $(q 'count(up{job="liveprobe"} == 1)') of 2 endpoints"

# One burst each; their last values scraped.
kill -USR1 $A $B
wait_for grep -q 'burst 1' "$tmp/a.out" && wait_for grep -q 'burst 1' "$tmp/b.out" || fail "no burst"
wait_for equals "liveprobe_calls_total{pid=\"$A\",function=\"op_slow\"}" $SA &&
    wait_for equals "liveprobe_calls_total{pid=\"$B\",function=\"op_slow\"}" $SB || fail "the calls were not scraped"
sleep 2.5  # a few more samples of the final values

# check_increase PID FUNC K: increase() at the last scrape exactly K; now, within
# [K, K (1 + 1.1 / (N - 1))] for the N samples in the window.
check_increase() {
    local sel="liveprobe_calls_total{pid=\"$1\",function=\"$2\"}" t v now n hi
    t=$(q "timestamp($sel)")
    v=$(q "increase($sel[5m])" "$t")
    within "$v" "$3" "$3" && pass "PID $1 $2: increase() at the last scrape: $v = $3" ||
        fail "PID $1 $2: increase() at the last scrape $t: $v, not $3"
    sleep 0.5
    n=$(q "count_over_time($sel[5m])")
    now=$(q "increase($sel[5m])")
    hi=$($py -c "print($3 * (1 + 1.1 / ($n - 1)))")
    within "$now" "$3" "$hi" && pass "PID $1 $2: increase() now: $now, within [$3, $hi] ($n samples)" ||
        fail "PID $1 $2: increase() now: $now, not within [$3, $hi] ($n samples)"
}
check_increase $A op_fast $FA
check_increase $A op_slow $SA
check_increase $B op_fast $FB
check_increase $B op_slow $SB
for p in $A $B; do
    sel="liveprobe_call_duration_seconds_bucket{pid=\"$p\",function=\"op_slow\"}"
    t=$(q "timestamp(liveprobe_calls_total{pid=\"$p\",function=\"op_slow\"})")
    v=$(q "histogram_quantile(0.5, increase($sel[5m]))" "$t")
    within "$v" 0.001048577 0.002097152 && pass "PID $p op_slow: the median, $v s, in its true bucket (1.05, 2.10] ms" ||
        fail "PID $p op_slow: the median $v s is not in (1.048576, 2.097152] ms"
    sel="liveprobe_call_duration_seconds_bucket{pid=\"$p\",function=\"op_fast\"}"
    v=$(q "histogram_quantile(0.5, increase($sel[5m]))" "$t")
    within "$v" 0 0.000001 && pass "PID $p op_fast: the median, $v s, under 1 us" ||
        fail "PID $p op_fast: the median $v s is not under 1 us"
done
v=$(q 'sum(liveprobe_calls_total{job="liveprobe",function="op_fast"})')
[ "$v" = $((FA + FB)) ] && pass "the fleet: op_fast's calls summed over both processes, $v" ||
    fail "the fleet: op_fast's calls summed: $v, not $((FA + FB))"

# The tool restarted with new specs: the target undisturbed, its counters from 0 again.
kill -TERM "$tool_a"
wait "$tool_a"
rc=$?
[ $rc = 0 ] && grep -q 'served [0-9]* scrapes of 1 process' "$tmp/a.err" && pass "SIGTERM ends trace --serve (0)" ||
    fail "trace --serve after SIGTERM: exit $rc, $(tail -2 "$tmp/a.err")"
kill -0 $A 2>/dev/null && pass "the target runs on" || fail "the target died with the tool"
serve a2 "$A" "127.0.0.1:$port_a" op_fast op_slow op_idle || fail "trace --serve did not start again on port $port_a"
tool_a=$served
wait_for equals "liveprobe_calls_total{pid=\"$A\",function=\"op_idle\"}" 0 &&
    wait_for equals "count_over_time(liveprobe_calls_total{pid=\"$A\",function=\"op_idle\"}[1m]) >= bool 2" 1 ||
    fail "the restarted tool's new spec was not scraped"
kill -USR1 $A
wait_for grep -q 'burst 2' "$tmp/a.out" || fail "no second burst"
wait_for equals "liveprobe_calls_total{pid=\"$A\",function=\"op_slow\"}" $SA || fail "the second burst was not scraped"
sleep 1.5
sel="liveprobe_calls_total{pid=\"$A\",function=\"op_slow\"}"
t=$(q "timestamp($sel)")
v=$(q "increase($sel[5m])" "$t")
within "$v" $((2 * SA)) $((2 * SA)) && pass "a counter reset at the restart: increase() counts both bursts, $v" ||
    fail "across the restart, increase() is $v, not $((2 * SA))"
want="burst 1: $FA fast, $SA slow, sum $(expected_sum $FA $SA)
burst 2: $FA fast, $SA slow, sum $(expected_sum $FA $SA)"
[ "$(grep burst "$tmp/a.out")" = "$want" ] && pass "the target's output is as without liveprobe" ||
    fail "the target's output: $(cat "$tmp/a.out")"

kill -TERM "$tool_a" "$tool_b"
wait "$tool_a" "$tool_b"
kill -0 $A 2>/dev/null && kill -0 $B 2>/dev/null && pass "both targets run on after their tools" ||
    fail "a target died with its tool"
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
