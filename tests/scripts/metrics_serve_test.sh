#!/usr/bin/env bash
# trace --serve (issue 35, item 1) as users run it, without Prometheus (metrics_prometheus_test.sh
# has it): the Unix socket only its owner can use, gone at the end; --follow-name attaching to
# every process of a name, a restarted one again, and letting go of the ones that exit; --by's
# key as a label; the misses served live, while the session runs; other paths and methods
# refused; the tool killed (SIGKILL) mid-session, the target running on without its probes; bad
# input refused with a clear error and nothing changed.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" metrics_serve
target=$bin/tests/lp_metrics_target
nap=$bin/tests/lp_nap_target
wait_for() { for _ in $(seq 300); do "$@" && return 0; sleep 0.1; done; return 1; }
metric() { grep -F "$1" | sed 's/.* //'; }  # the value of the lines naming $1

# A Unix socket: its owner's alone, served, removed at the end.
"${launch[@]}" "$target" 1000 2 >"$tmp/t.out" &
T=$!
pids+=("$T")
wait_for grep -q ready "$tmp/t.out"
sock=$tmp/metrics.sock
"$lp" trace -p $T --serve "unix:$sock" --by tid op_fast op_slow 2>"$tmp/unix.err" &
tool=$!
pids+=("$tool")
wait_for grep -q 'serving the calls' "$tmp/unix.err" || fail "--serve unix: did not start: $(cat "$tmp/unix.err")"
[ "$(stat -c %a "$sock")" = 600 ] && pass "the socket is its owner's alone (0600)" ||
    fail "the socket's mode: $(stat -c %a "$sock")"
kill -USR1 $T
wait_for grep -q 'burst 1' "$tmp/t.out"
sleep 0.1
curl -s --unix-socket "$sock" http://localhost/metrics >"$tmp/unix.prom"
v=$(metric "liveprobe_calls_total{pid=\"$T\",comm=\"lp_metrics_targ\",object=\"lp_metrics_target\",function=\"op_fast\",tid=\"$T\"}" <"$tmp/unix.prom")
[ "$v" = 1000 ] && pass "--by tid: the calls of the thread, labelled tid" || fail "--by tid: '$v' in $(grep calls_total "$tmp/unix.prom")"
# A key per call: at most --max-keys of them, the others under (other), said once.
"$lp" trace -p $T --serve 127.0.0.1:0 --count --by arg0 --max-keys 100 op_fast 2>"$tmp/keys.err" &
ktool=$!
pids+=("$ktool")
wait_for grep -q 'serving the calls' "$tmp/keys.err"
kill -USR1 $T
wait_for grep -q 'burst 2' "$tmp/t.out"
sleep 0.1
curl -s "$(grep -o 'http://[^ ]*' "$tmp/keys.err")" >"$tmp/keys.prom"
kill -TERM $ktool
wait $ktool
n=$(grep -c '^liveprobe_calls_total{.*function="op_fast"' "$tmp/keys.prom")
other=$(metric 'function="op_fast",key="(other)"}' <"$tmp/keys.prom")
sum=$(grep '^liveprobe_calls_total{.*function="op_fast"' "$tmp/keys.prom" | awk '{s += $2} END {print s}')
[ "$n" = 101 ] && [ "$other" = 900 ] && [ "$sum" = 1000 ] && grep -q 'more than 100 keys' "$tmp/keys.err" &&
    pass "--max-keys 100: 100 keys and (other), 900 calls, said once" ||
    fail "--max-keys 100: $n series, (other) '$other', $sum calls: $(cat "$tmp/keys.err")"
code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$sock" http://localhost/other)
code2=$(curl -s -o /dev/null -w '%{http_code}' -X POST --unix-socket "$sock" http://localhost/metrics)
[ "$code $code2" = "404 405" ] && pass "another path: 404; POST: 405" || fail "another path: $code, POST: $code2"
kill -TERM $tool
wait $tool
[ ! -e "$sock" ] && pass "the socket is removed at the end" || fail "the socket is left: $(ls -l "$sock")"
kill $T

# --follow-name: each process of the name, as it starts; a restarted one again.
cp "$target" "$tmp/lpfollowed"
"${launch[@]}" "$tmp/lpfollowed" 100 1 >"$tmp/f1.out" &
F1=$!
pids+=("$F1")
"$lp" trace --follow-name lpfollowed --serve 127.0.0.1:0 --count op_fast 2>"$tmp/follow.err" &
tool=$!
pids+=("$tool")
wait_for grep -q "serving the calls of PID $F1" "$tmp/follow.err" || fail "--follow-name: PID $F1 not attached: $(cat "$tmp/follow.err")"
url=$(grep -o 'http://[^ ]*' "$tmp/follow.err")
kill $F1
wait $F1 2>/dev/null
"${launch[@]}" "$tmp/lpfollowed" 100 1 >"$tmp/f2.out" &
F2=$!
pids+=("$F2")
wait_for grep -q "serving the calls of PID $F2" "$tmp/follow.err" || fail "--follow-name: the restarted PID $F2 not attached"
wait_for grep -q ready "$tmp/f2.out"
kill -USR1 $F2
wait_for grep -q 'burst 1' "$tmp/f2.out"
curl -s "$url" >"$tmp/follow.prom"
[ "$(metric "pid=\"$F2\"" <"$tmp/follow.prom" | head -1)" = 100 ] && ! grep -q "pid=\"$F1\"" "$tmp/follow.prom" &&
    pass "--follow-name: the restarted process served, the one that exited no more" ||
    fail "--follow-name: $(grep calls_total "$tmp/follow.prom")"
grep -q "PID $F1 (lpfollowed) exited: its metrics are served no more" "$tmp/follow.err" &&
    pass "--follow-name: says that a process exited" || fail "--follow-name: $(cat "$tmp/follow.err")"
# A process detached by hand (liveprobe detach) is let go, not attached again; others still are.
"$lp" detach --force -p $F2 >/dev/null 2>&1
wait_for grep -q "PID $F2 (lpfollowed) ended its session" "$tmp/follow.err" || fail "the detach of PID $F2 was not seen"
"${launch[@]}" "$tmp/lpfollowed" 100 1 >"$tmp/f3.out" &
F3=$!
pids+=("$F3")
wait_for grep -q "serving the calls of PID $F3" "$tmp/follow.err" || fail "--follow-name: PID $F3 not attached"
[ "$(grep -c "serving the calls of PID $F2 " "$tmp/follow.err")" = 1 ] &&
    pass "--follow-name: a process detached by hand is let go, a new one attached" ||
    fail "--follow-name after a detach: $(cat "$tmp/follow.err")"
# The tool killed: the target runs on, its probes removed by its agent.
{ kill -KILL $tool && wait $tool; } 2>/dev/null
wait_for sh -c "! '$lp' status -p $F3 2>/dev/null | grep -q 'probes: [1-9]'" &&
    kill -USR1 $F3 && wait_for grep -q 'burst 1' "$tmp/f3.out" &&
    pass "the tool killed: the target runs on, its probes removed" ||
    fail "after SIGKILL of the tool: $("$lp" status -p $F3 2>&1 | grep probes)"
kill $F2 $F3

# A server that executes itself again (the same pid): its new program attached again.
cp "$target" "$tmp/lpreexec"
"${launch[@]}" "$tmp/lpreexec" 10 1 3 >"$tmp/reexec.out" &
R=$!
pids+=("$R")
"$lp" trace --follow-name lpreexec --serve 127.0.0.1:0 --count op_fast 2>"$tmp/reexec.err" &
tool=$!
pids+=("$tool")
wait_for grep -q "serving the calls of PID $R" "$tmp/reexec.err"
wait_for grep -q ready "$tmp/reexec.out"
url=$(grep -o 'http://[^ ]*' "$tmp/reexec.err")
wait_for eval '[ "$(grep -c "serving the calls of PID $R " "$tmp/reexec.err")" = 2 ]'
kill -USR1 $R
wait_for grep -q 'burst 1' "$tmp/reexec.out"
v=$(curl -s "$url" | metric "liveprobe_calls_total{pid=\"$R\",")
[ "$v" = 10 ] && grep -q "PID $R (lpreexec) executed a program" "$tmp/reexec.err" &&
    pass "--follow-name: a process that executes itself again is attached again, its calls served ($v)" ||
    fail "--follow-name after an exec: calls '$v': $(cat "$tmp/reexec.err")"
kill -TERM $tool
wait $tool
kill $R

# A prefork server followed by name: each worker counted once, under its own pid; the parent,
# which never calls op, counts nothing (a worker inherits none of its parent's session).
cp "$bin/tests/lp_forker_target" "$tmp/lpforker"
"${launch[@]}" "$tmp/lpforker" >"$tmp/forker.out" &
P=$!
pids+=("$P")
wait_for grep -q ready "$tmp/forker.out"
"$lp" trace --follow-name lpforker --serve 127.0.0.1:0 op 2>"$tmp/forker.err" &
tool=$!
pids+=("$tool")
wait_for grep -q "serving the calls of PID $P" "$tmp/forker.err"
url=$(grep -o 'http://[^ ]*' "$tmp/forker.err")
sleep 7  # workers attached at 1 to 2 s, done at 3 s
curl -s "$url" >"$tmp/forker.prom"
parent=$(metric "liveprobe_calls_total{pid=\"$P\"," <"$tmp/forker.prom")
workers=$(grep '^liveprobe_calls_total{' "$tmp/forker.prom" | grep -v "pid=\"$P\"" | sed 's/.* //' | sort -u | tr '\n' ' ')
done_workers=$(grep -c done "$tmp/forker.out")
if [ "$parent" = 0 ] && [[ $workers =~ ^(0 )?100\ $ ]] && [ "$done_workers" -ge 5 ]; then
    pass "--follow-name on a prefork server: the parent 0, each worker done 100 ($done_workers done)"
else
    fail "--follow-name on a prefork server: the parent $parent, the workers: $workers ($done_workers done)"
fi
kill -TERM $tool
wait $tool
kill $P

# Misses, live: nap_rec 5 deep in a thread, followed 2 calls at a time.
"${launch[@]}" "$nap" 1000 0 1 5 >/dev/null &
N=$!
pids+=("$N")
sleep 0.3
"$lp" trace -p $N --serve 127.0.0.1:0 --maxactive 2 nap_rec 2>"$tmp/nap.err" &
tool=$!
pids+=("$tool")
wait_for grep -q 'serving the calls' "$tmp/nap.err"
url=$(grep -o 'http://[^ ]*' "$tmp/nap.err")
sleep 0.5
m1=$(curl -s "$url" | metric 'liveprobe_missed_total{')
sleep 0.5
m2=$(curl -s "$url" | metric 'liveprobe_missed_total{')
[ "${m1:-0}" -gt 0 ] && [ "$m2" -gt "$m1" ] && pass "the misses served live: $m1, then $m2" ||
    fail "the misses: '$m1', then '$m2'"
kill -TERM $tool
wait $tool

# Bad input: a clear error, exit 2 (usage) or 1, nothing attached.
"${launch[@]}" "$target" 1 1 >"$tmp/b.out" &
B=$!
pids+=("$B")
wait_for grep -q ready "$tmp/b.out"
check_refused() {  # WANT_RC MESSAGE ARGS...
    local want=$1 msg=$2 out rc
    shift 2
    out=$("$lp" "$@" 2>&1)
    rc=$?
    if [ $rc = "$want" ] && grep -qF -- "$msg" <<<"$out"; then pass "refused ($rc): $*"; else fail "$*: exit $rc: $out"; fi
}
check_refused 1 "ADDR:PORT, :PORT (loopback) or unix:PATH" trace -p $B --serve 127.0.0.1:99999 op_fast
check_refused 1 "ADDR:PORT, :PORT (loopback) or unix:PATH" trace -p $B --serve 127.0.0.1:99999999999999999999999 op_fast
check_refused 1 "Name or service not known" trace -p $B --serve no.such.host.invalid:9 op_fast
/usr/bin/python3 -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(20)' >"$tmp/busy" &
pids+=($!)
wait_for test -s "$tmp/busy"
check_refused 1 "Address already in use" trace -p $B --serve "127.0.0.1:$(cat "$tmp/busy")" op_fast
check_refused 2 "give -p PID or --follow-name COMM" trace --serve :0 op_fast -- "$target" 1 1
check_refused 2 "--follow-name attaches to processes for --serve" trace --follow-name x op_fast
check_refused 2 "--serve: not with --stacks" trace -p $B --serve :0 --stacks --count op_fast
echo keep >"$tmp/file"
check_refused 1 "$tmp/file is there, and is no socket" trace -p $B --serve "unix:$tmp/file" op_fast
[ "$(cat "$tmp/file")" = keep ] && pass "a file at the socket's path is kept" || fail "the file at the socket's path was changed"
# A service's file with a user's mistakes: each refused, naming it.
printf '[trace]\npid = %s\nserve = ":0"\ncuont = true\nspecs = "op_fast"\n' $B >"$tmp/typo.toml"
printf 'serve = ":0"\n[trace]\npid = %s\nspecs = "op_fast"\n' $B >"$tmp/nosection.toml"
printf '[trace]\npid = %s\nserve = ":0"\nspecs = [\n  "op_fast",\n]\n' $B >"$tmp/lines.toml"
check_refused 2 "'trace.cuont' is no option of the command" trace --config "$tmp/typo.toml"
check_refused 2 "'serve' is no option of the command" trace --config "$tmp/nosection.toml"
check_refused 2 "an array across lines?" trace --config "$tmp/lines.toml"
check_refused 2 "-p and --follow-name: one or the other" trace -p $B --follow-name x --serve :0 op_fast
check_refused 2 "a process's name (/proc/PID/comm) has no '/'" trace --follow-name /usr/sbin/nginx --serve :0 op_fast
check_refused 2 "--serve: not with --json" trace -p $B --serve :0 --json op_fast
! "$lp" status -p $B 2>/dev/null | grep -q 'probes: [1-9]' && pass "nothing was placed by the refused commands" ||
    fail "probes left: $("$lp" status -p $B 2>&1)"
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
