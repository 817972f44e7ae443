#!/usr/bin/env bash
# `liveprobe trace` as a user runs it, against tests/programs/trace_target.c (calls of known
# counts, return values and durations) and samples/target: every mode, a program it starts and
# a running process, globs, threads, recursion, longjmp, and the errors.
set -uo pipefail
bin=${LIVEPROBE_BINARY_DIR:?LIVEPROBE_BINARY_DIR is not set}
lp=$bin/tools/liveprobe/liveprobe
target=$bin/tests/lp_trace_target
tmp=$(mktemp -d "${TMPDIR:-/tmp}/liveprobe-trace.XXXXXX")
export LIVEPROBE_RUNTIME_DIR=$tmp/run
launch=()
if [ -n "${LIVEPROBE_SANITIZER_PRELOAD:-}" ]; then
    launch=(env "LD_PRELOAD=${LIVEPROBE_SANITIZER_PRELOAD% }" ASAN_OPTIONS=detect_leaks=0
            TSAN_OPTIONS="report_bugs=0 die_after_fork=0")
fi
pids=()
cleanup() { for p in "${pids[@]}"; do { kill -9 "$p" && wait "$p"; } 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# check DESCRIPTION FILE REGEX...: every regex matches a line of FILE.
check() {
    local what=$1 file=$2 re; shift 2
    for re in "$@"; do
        if ! grep -Eq -- "$re" "$file"; then fail "$what: no line matches '$re'; output:"; sed 's/^/    /' "$file" | head -30; return; fi
    done
    pass "$what"
}

# 1. --count over a glob, the program started by the tool (probes placed before main): the
# exact number of calls of each function, threads and recursion included.
"${launch[@]}" "$lp" trace --count 'lp_tr_*' -- "$target" >"$tmp/count.out" 2>&1; rc=$?
[ "$rc" -eq 0 ] || fail "trace --count -- target: exit $rc"
check "--count: exact counts, most called first" "$tmp/count.out" \
    '^trace_target done: 7110, child ok$' '^lp_tr_leaf +1000$' '^lp_tr_step +1000$' '^lp_tr_fib +177$' '^lp_tr_jump +30$' \
    '^lp_tr_square +6$' '^lp_tr_slow +1$' '^\(6 of 6 functions called\)$' \
    '^liveprobe: 6 functions traced, 2214 calls, 0 dropped \(ring full\), 0 without a ring, missed 0$'
if [ "$(grep -E '^lp_tr_' "$tmp/count.out" | awk '{print $2}' | tr '\n' ' ')" != "1000 1000 177 30 6 1 " ]; then
    fail "--count: not most called first: $(grep -E '^lp_tr_' "$tmp/count.out" | tr '\n' ' ')"
fi

# 2. The default: one line per call in the seeds' form, return values and thread.
"${launch[@]}" "$lp" trace lp_tr_square lp_tr_fib -- "$target" >"$tmp/events.out" 2>&1
pid=$(sed -n 's/^liveprobe: started PID \([0-9]*\)$/\1/p' "$tmp/events.out")
check "events: every square's return value, in order" "$tmp/events.out" \
    "^\[ *[0-9]+\.[0-9]{6}\] $pid lp_tr_square returned 1 and took [0-9]+ ns to execute$" \
    "lp_tr_square returned 4 and" "lp_tr_square returned 9 and" "lp_tr_square returned 16 and" \
    "lp_tr_square returned 25 and" "lp_tr_fib returned 55 and" \
    "^\[ *[0-9]+\.[0-9]{6}\] [0-9]+ lp_tr_square returned 36 and" \
    '^liveprobe: 2 functions traced, 183 calls \(183 events read\), 0 dropped'
if [ "$(grep -o 'lp_tr_square returned [0-9]*' "$tmp/events.out" | awk '{print $3}' | tr '\n' ' ')" != "1 4 9 16 25 36 " ]; then
    fail "events: squares out of order: $(grep -o 'lp_tr_square returned [0-9]*' "$tmp/events.out" | tr '\n' ' ')"
fi
n=$(grep -c 'lp_tr_fib returned' "$tmp/events.out")
[ "$n" -eq 177 ] && pass "events: 177 fib returns, recursion nested" || fail "events: $n fib returns, want 177"

child=$(grep 'lp_tr_square returned 36' "$tmp/events.out" | awk '{print $2}')
[ -n "$child" ] && [ "$child" != "$pid" ] && pass "a forked child is followed: its call has its own pid ($child)" ||
    fail "the forked child's call: tid '$child', parent $pid"
"${launch[@]}" "$lp" trace --no-follow lp_tr_square -- "$target" >"$tmp/nofollow.out" 2>&1
if grep -q 'lp_tr_square returned 25' "$tmp/nofollow.out" && ! grep -q 'lp_tr_square returned 36' "$tmp/nofollow.out" &&
   grep -q 'child ok' "$tmp/nofollow.out"; then pass "--no-follow: the child's call is not traced"
else fail "--no-follow:"; sed 's/^/    /' "$tmp/nofollow.out"; fi

# 3. --json, --tid and --min-duration.
"${launch[@]}" "$lp" trace --json lp_tr_square -- "$target" >"$tmp/json.out" 2>&1
check "--json: one object per call" "$tmp/json.out" \
    '^\{"time_ns":[0-9]+,"tid":[0-9]+,"function":"lp_tr_square","retval":25,"duration_ns":[0-9]+,"args":\[5,'
"${launch[@]}" "$lp" trace --min-duration 1000000 lp_tr_slow lp_tr_leaf -- "$target" >"$tmp/min.out" 2>&1
if grep -q "lp_tr_slow returned" "$tmp/min.out" && ! grep -q "lp_tr_leaf returned" "$tmp/min.out"; then
    pass "--min-duration 1 ms: the 2 ms call only"
else fail "--min-duration:"; sed 's/^/    /' "$tmp/min.out" | head; fi

"${launch[@]}" "$lp" trace --chrome "$tmp/trace.json" lp_tr_square -- "$target" >"$tmp/chrome.out" 2>&1
if grep -q "wrote $tmp/trace.json" "$tmp/chrome.out" && head -c 15 "$tmp/trace.json" | grep -q '^{"traceEvents":' &&
   [ "$(grep -c '"name":"lp_tr_square","ph":"X"' "$tmp/trace.json")" -eq 6 ] && tail -1 "$tmp/trace.json" | grep -q '^\],"displayTimeUnit":"ns"}$'; then
    pass "--chrome: 6 complete events (the child's too) in a trace file"
else fail "--chrome:"; cat "$tmp/chrome.out"; head -5 "$tmp/trace.json"; fi

# 4. --hist: the 2 ms sleep in [1M, 2M) or [2M, 4M) ns, the 1000 leaves under 64 K.
"${launch[@]}" "$lp" trace --hist lp_tr_slow lp_tr_leaf -- "$target" >"$tmp/hist.out" 2>&1
check "--hist: log2 buckets" "$tmp/hist.out" '^@ns\[lp_tr_slow\]: 1 calls$' '^\[(1M, 2M|2M, 4M)\) +1 \|@+ *\|$' \
    '^@ns\[lp_tr_leaf\]: 1000 calls$'

# 5. longjmp out of traced frames: the program is unharmed (events mode sees no return).
"${launch[@]}" "$lp" trace lp_tr_jump -- "$target" >"$tmp/jump.out" 2>&1; rc=$?
[ "$rc" -eq 0 ] && grep -q '^trace_target done: 7110, child ok$' "$tmp/jump.out" && ! grep -q 'lp_tr_jump returned' "$tmp/jump.out" &&
    pass "longjmp through traced frames: exit 0, no return reported" || { fail "longjmp:"; cat "$tmp/jump.out"; }

# 6. A running process (-p): samples/target, for a second, in each mode; then again (the
# session was stopped), and once more after a tool killed with SIGKILL (its session is taken back).
"${launch[@]}" "$bin/samples/target" 0 20 >/dev/null 2>&1 &
tpid=$!; pids+=("$tpid"); sleep 0.3
"$lp" trace -p "$tpid" --duration 1 do_sys_open >"$tmp/p.out" 2>&1
check "-p: do_sys_open's fd and -ENOENT" "$tmp/p.out" "^\[ *[0-9.]+\] $tpid do_sys_open returned [0-9]+ and took" \
    "do_sys_open returned -2 and took"
"$lp" trace -p "$tpid" --duration 1 --count '*' >"$tmp/pc.out" 2>&1
check "-p --count '*'" "$tmp/pc.out" '^do_sys_open +[1-9][0-9]*$' '^sys_open +[1-9][0-9]*$'
"$lp" trace -p "$tpid" do_sys_open >/dev/null 2>&1 & tr=$!; sleep 1; kill -9 "$tr"; wait "$tr" 2>/dev/null
"$lp" trace -p "$tpid" --duration 0.5 --hist do_sys_open >"$tmp/ph.out" 2>&1
check "-p --hist after a tool was killed" "$tmp/ph.out" '^@ns\[do_sys_open\]: [0-9]+ calls$'
kill -0 "$tpid" 2>/dev/null && pass "the traced process lives on" || fail "the traced process died"

# 7. Errors.
out=$("${launch[@]}" "$lp" trace --count nothing_is_called_this 'lp_none_*' -- "$target" 2>&1); rc=$?
[ "$rc" -eq 1 ] && echo "$out" | grep -q "nothing_is_called_this" && pass "no function at all: $(echo "$out" | tail -1)" ||
    fail "no function: exit $rc: $out"
out=$("${launch[@]}" "$lp" trace --count lp_tr_leaf nothing_is_called_this -- "$target" 2>&1); rc=$?
[ "$rc" -eq 0 ] && echo "$out" | grep -Eq "^lp_tr_leaf +1000$" && echo "$out" | grep -q "nothing_is_called_this" &&
    pass "one unknown among others: traced the rest, said which" || fail "one unknown: exit $rc: $out"
out=$("$lp" trace lp_tr_leaf 2>&1); rc=$?
[ "$rc" -eq 2 ] && pass "no -p and no program: exit 2" || fail "no target: exit $rc: $out"
out=$("$lp" trace --count --hist lp_tr_leaf -- "$target" 2>&1); rc=$?
[ "$rc" -eq 2 ] && pass "--count with --hist: exit 2" || fail "--count --hist: exit $rc: $out"
out=$("$lp" trace -p 999999999 lp_tr_leaf 2>&1); rc=$?
[ "$rc" -eq 1 ] && echo "$out" | grep -q "no process" && pass "a nonexistent process: $out" || fail "no process: exit $rc: $out"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
