#!/usr/bin/env bash
# The metrics service (issue 35, item 4) as installed: dist/systemd/liveprobe-metrics@.service
# (as configured by the build) passes `systemd-analyze verify`, and its ExecStart, run as
# systemd runs it with the example configuration (dist/metrics/metrics-nginx.toml, its name and
# port changed), serves a private nginx (Debian's, a copy named lpngx-svc so that no other
# nginx is followed): its master and workers attached by name; each request's calls counted
# and timed; nginx restarted, its new processes attached and the old ones' series gone; the
# service stopped, nginx serving on. promtool reads the real scrape.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" metrics_service
src=${LIVEPROBE_SOURCE_DIR:?}
unit=$bin/dist/liveprobe-metrics@.service
wait_for() { for _ in $(seq 300); do "$@" && return 0; sleep 0.1; done; return 1; }
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# calls FUNC: the calls of FUNC over every process served (the sum of its series).
calls() { curl -s "http://127.0.0.1:$mport/metrics" | grep "^liveprobe_calls_total{.*function=\"$1\"}" | awk '{s += $2} END {print s + 0}'; }
series() { curl -s "http://127.0.0.1:$mport/metrics" | grep -c "^liveprobe_calls_total{.*function=\"$1\"}"; }
# has_series FUNC N, has_calls FUNC N: whether FUNC has N series, N calls now (for wait_for).
has_series() { [ "$(series "$1")" = "$2" ]; }
has_calls() { [ "$(calls "$1")" = "$2" ]; }
if ! command -v nginx >/dev/null; then
    fail "nginx is not installed: scripts/deps.sh installs Debian's nginx-light (as root)"
    echo "$failures failure(s)"
    exit 1
fi

# The unit, verified: its ExecStart pointed at this build's tool.
mkdir -p "$tmp/units"
sed "s|^ExecStart=[^ ]*/liveprobe |ExecStart=$lp |" "$unit" >"$tmp/units/liveprobe-metrics@lptest.service"
if ! command -v systemd-analyze >/dev/null; then
    echo "(systemd-analyze is not installed: the unit is not verified)"
elif systemd-analyze verify --man=no "$tmp/units/liveprobe-metrics@lptest.service" >"$tmp/verify.out" 2>&1; then
    pass "systemd-analyze verify accepts the unit"
else
    fail "systemd-analyze verify: $(cat "$tmp/verify.out")"
fi

# The example configuration, for this nginx and a free port.
mport=$(free_port)
sed -e 's/^follow-name = .*/follow-name = "lpngx-svc"/' -e "s/^serve = .*/serve = \"127.0.0.1:$mport\"/" \
    "$src/dist/metrics/metrics-nginx.toml" >"$tmp/lptest.toml"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit" | sed -e "s|^[^ ]*/liveprobe |$lp |" -e 's/%i/lptest/g' \
    -e "s|/etc/liveprobe/metrics/lptest.toml|$tmp/lptest.toml|")
[[ $exec_start == "$lp trace --config $tmp/lptest.toml" ]] || fail "ExecStart: $exec_start"

# nginx, a copy of Debian's, on a free port.
ng=$tmp/nginx
mkdir -p "$ng/www" "$ng/tmp"
cp "$(command -v nginx)" "$tmp/lpngx-svc"
echo hello >"$ng/www/index.html"
nport=$(free_port)
sed -e "s|@DIR@|$ng|g" -e "s|@PORT@|$nport|g" -e "s|@WORKERS@|2|g" "$src/tests/chaos/nginx.conf.in" >"$ng/nginx.conf"
start_nginx() {
    "${launch[@]}" "$tmp/lpngx-svc" -p "$ng/" -c "$ng/nginx.conf" -e "$ng/error.log" >"$ng/stdout" 2>&1 &
    master=$!
    pids+=("$master")
    wait_for curl -sf "http://127.0.0.1:$nport/" -o /dev/null
}
start_nginx || fail "nginx did not start: $(cat "$ng/stdout" "$ng/error.log")"
m1=$master

# The service's command, as systemd runs it.
$exec_start 2>"$tmp/service.err" &
service=$!
pids+=("$service")
wait_for has_series ngx_http_process_request 3 ||
    fail "the service did not attach to nginx's master and 2 workers: $(cat "$tmp/service.err")"
for _ in $(seq 40); do curl -sf "http://127.0.0.1:$nport/" -o /dev/null || fail "a request failed"; done
wait_for has_calls ngx_http_process_request 40 &&
    pass "40 requests: ngx_http_process_request called 40 times over the workers" ||
    fail "40 requests: ngx_http_process_request $(calls ngx_http_process_request)"
n=$(curl -s "http://127.0.0.1:$mport/metrics" |
    grep '^liveprobe_call_duration_seconds_bucket{.*function="ngx_http_finalize_request",le="+Inf"}' | awk '{s += $2} END {print s}')
[ "${n:-0}" -ge 40 ] && pass "ngx_http_finalize_request's durations: $n calls timed" || fail "finalize's histogram: '$n'"
grep -qx 'liveprobe_processes 3' <(curl -s "http://127.0.0.1:$mport/metrics") && pass "liveprobe_processes 3" ||
    fail "liveprobe_processes: $(curl -s "http://127.0.0.1:$mport/metrics" | grep '^liveprobe_processes')"
[ "$(calls writev)" -ge 40 ] && pass "libc.so.6:writev, a library's function: $(calls writev) calls" ||
    fail "writev: $(calls writev)"
curl -s "http://127.0.0.1:$mport/metrics" >"$tmp/scrape.prom"
promtool check metrics <"$tmp/scrape.prom" >"$tmp/promtool.out" 2>&1 && [ ! -s "$tmp/promtool.out" ] &&
    pass "promtool check metrics accepts nginx's scrape" || fail "promtool: $(cat "$tmp/promtool.out")"

# nginx restarted: the new processes served, the old ones' series gone.
kill -QUIT $m1
wait $m1
start_nginx || fail "nginx did not start again"
# served: whether the series of ngx_http_process_request are those of nginx's processes now (the
# master and its workers), and only those (the old ones' go when the tool sees them gone).
served() {
    local want got
    want=$( { echo "$master"; ps --ppid "$master" -o pid= | tr -d ' '; } | sort -n | tr '\n' ' ')
    got=$(curl -s "http://127.0.0.1:$mport/metrics" | grep '^liveprobe_calls_total{.*function="ngx_http_process_request"' |
          sed 's/.*pid="\([0-9]*\)".*/\1/' | sort -n | tr '\n' ' ')
    [ "$got" = "$want" ] && [ "$(wc -w <<<"$want")" = 3 ]
}
wait_for served ||
    fail "after nginx's restart: $(curl -s "http://127.0.0.1:$mport/metrics" | grep 'calls_total{.*process_request')"
for _ in $(seq 15); do curl -sf "http://127.0.0.1:$nport/" -o /dev/null || fail "a request failed after the restart"; done
wait_for has_calls ngx_http_process_request 15 &&
    pass "nginx restarted: its new processes served, 15 requests counted from 0" ||
    fail "after the restart: $(calls ngx_http_process_request) calls"

# The service stopped (systemctl stop: SIGTERM): nginx serves on, without probes.
kill -TERM $service
wait $service
rc=$?
[ $rc = 0 ] && pass "the service stops on SIGTERM (exit 0)" || fail "the service's exit: $rc: $(tail -3 "$tmp/service.err")"
curl -sf "http://127.0.0.1:$nport/" -o /dev/null && pass "nginx serves on" || fail "nginx does not answer"
for p in $master $(ps --ppid $master -o pid=); do
    "$lp" status -p "$p" 2>/dev/null | grep -q 'probes: [1-9]' && fail "PID $p keeps probes"
done
! grep -iE '\[(alert|emerg|crit)\]' "$ng/error.log" && pass "nginx's log has no alert" || fail "$(grep -iE 'alert|emerg|crit' "$ng/error.log")"
kill -QUIT $master
wait $master
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
