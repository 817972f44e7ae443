#!/usr/bin/env bash
# Sessions side by side (issue 30, part 4): two trace sessions on one process at once, of the same
# function, each see their own events and remove only their own probes, ended in either order,
# by Ctrl-C, by the program's end and by SIGKILL of a tool; a trace beside a module probing the
# same function; a trace of root's beside one of the process's owner, and a third user refused.
# The target is a loop calling nap (tests/programs/nap_target.c), which checks every value nap
# returns and says how many calls it made.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" sessions
target=$bin/tests/lp_nap_target
samples=$bin/samples

# ready FILE: waits until the target writing FILE says "ready".
ready() {
    for _ in $(seq 500); do grep -q '^ready$' "$1" 2>/dev/null && return 0; sleep 0.01; done
    fail "the target writing $1 did not start"; return 1
}
# sessions PID: how many trace sessions its agent lists.
sessions() { "$lp" status -p "$1" 2>/dev/null | grep -c '^trace session [0-9]*: '; }
# count_of FILE: the calls of nap a --count output has; hist_of FILE: a --hist output's.
count_of() { sed -n 's/^nap  *\([0-9][0-9]*\)$/\1/p' "$1"; }
hist_of() { sed -n 's/^@ns\[nap\]: \([0-9]*\) calls$/\1/p' "$1"; }
# summary_of FILE: the calls its summary line counts.
summary_of() { sed -n 's/^liveprobe: 1 functions traced, \([0-9]*\) calls.*/\1/p' "$1"; }

# 1. Three sessions on nap at once, each in its own mode. A: `trace --count nap -- CMD` sees the
# program's whole life, so its count must be every nap the program says it made, exactly: the
# sessions beside it took none of its calls. B (--hist, -p) starts after A and ends first, by
# Ctrl-C, while A and C run; C (events, -p) starts while B runs and ends with the program, as A.
"$lp" trace --count nap -- "$target" 1000 4 >"$tmp/a.out" 2>&1 &
a=$!
for _ in $(seq 500); do child=$(pgrep -P "$a" -x lp_nap_target) && break; sleep 0.01; done
if [ -z "${child:-}" ] || ! ready "$tmp/a.out"; then
    fail "trace -- CMD did not start the target"
else
    "$lp" trace -p "$child" --hist nap >"$tmp/b.out" 2>&1 &
    b=$!
    sleep 0.8
    "$lp" trace -p "$child" nap >"$tmp/c.out" 2>&1 &
    c=$!
    sleep 0.8
    n=$(sessions "$child")
    [ "$n" -eq 3 ] && pass "three sessions run side by side on process $child" ||
        { fail "$n sessions listed, not 3:"; "$lp" status -p "$child" | sed 's/^/    /'; }
    probes=$("$lp" status -p "$child" | sed -n 's/^probes: //p')
    [ "$probes" = 3 ] && pass "three probes on nap (A's kprobe, B's and C's kretprobes)" || fail "status says probes: $probes"
    kill -INT "$b"; wait "$b"; rc=$?
    [ "$rc" -eq 0 ] && pass "B (--hist) ended by Ctrl-C, the others running" || fail "B ended with status $rc"
    n=$(sessions "$child")
    [ "$n" -eq 2 ] && pass "B's session removed, A's and C's left" || fail "$n sessions after B ended, not 2"
    probes=$("$lp" status -p "$child" | sed -n 's/^probes: //p')
    [ "$probes" = 2 ] && pass "B's probe removed, A's and C's left" || fail "status says probes: $probes"
    wait "$a"; rca=$?
    wait "$c"; rcc=$?
    naps=$(sed -n 's/^naps \([0-9]*\) bad 0 sigint 0 ran its time$/\1/p' "$tmp/a.out")
    ca=$(count_of "$tmp/a.out"); hb=$(hist_of "$tmp/b.out"); ec=$(summary_of "$tmp/c.out")
    lines=$(grep -c '^\[[ 0-9.]*\] *[0-9]* nap returned 1000 and took [0-9]* ns to execute$' "$tmp/c.out")
    echo "    the program: ${naps:-?} naps; A (--count): ${ca:-?}; B (--hist, 1.6 s): ${hb:-?}; C (events): ${ec:-?} calls, $lines lines"
    if [ "$rca" -eq 0 ] && [ -n "$naps" ] && [ "${ca:-x}" = "$naps" ]; then
        pass "A counted every one of the program's $naps naps"
    else fail "A: exit $rca, counted ${ca:-nothing}, the program made ${naps:-?}:"; grep -v '^\[' "$tmp/a.out" | sed 's/^/    /'; fi
    if [ -n "$hb" ] && [ "$hb" -gt 0 ] && [ "$hb" -lt "${naps:-0}" ]; then pass "B counted $hb of them in its histogram"
    else fail "B's histogram: ${hb:-none}:"; sed 's/^/    /' "$tmp/b.out"; fi
    if [ "$rcc" -eq 0 ] && [ -n "$ec" ] && [ "$ec" -gt 0 ] && [ "$ec" -eq "$lines" ] && [ "$ec" -lt "${naps:-0}" ]; then
        pass "C read $ec events, each a line of its own"
    else fail "C: exit $rcc, ${ec:-no} calls, $lines lines:"; grep -v '^\[' "$tmp/c.out" | sed 's/^/    /'; fi
fi

# 2. SIGKILL of one tool: its session's probes go, the other session goes on to its end.
"${launch[@]}" "$target" 1000 >"$tmp/k.out" 2>&1 &
pid=$!
pids+=("$pid")
if ready "$tmp/k.out"; then
    "$lp" trace -p "$pid" --duration 3 --count nap >"$tmp/k1.out" 2>&1 &
    k1=$!
    "$lp" trace -p "$pid" --hist nap >"$tmp/k2.out" 2>&1 &
    k2=$!
    sleep 1.5
    n=$(sessions "$pid")
    [ "$n" -eq 2 ] && pass "two sessions before the SIGKILL" || fail "$n sessions before the SIGKILL, not 2"
    out=$("$lp" detach -p "$pid" 2>&1); rc=$?
    [ "$rc" -ne 0 ] && grep -q "2 trace sessions are live, of tool pid" <<<"$out" &&
        grep -q "tool pid $k1 (1 probes)" <<<"$out" && grep -q "tool pid $k2 (1 probes)" <<<"$out" &&
        pass "detach refused, naming both sessions: $out" || fail "detach with two sessions live: exit $rc: $out"
    kill -KILL "$k2"; wait "$k2" 2>/dev/null
    for _ in $(seq 100); do [ "$(sessions "$pid")" -eq 1 ] && break; sleep 0.02; done
    n=$(sessions "$pid")
    [ "$n" -eq 1 ] && pass "the killed tool's session removed, the other left" || fail "$n sessions after the SIGKILL"
    grep -q "the trace session's tool (pid $k2) is gone without stopping it: removed its 1 probes" <<<"$("$lp" dmesg -p "$pid" 2>/dev/null)" &&
        pass "the agent's log names the killed tool" || fail "the agent's log does not name tool $k2"
    wait "$k1"; rc=$?
    c1=$(count_of "$tmp/k1.out")
    [ "$rc" -eq 0 ] && [ -n "$c1" ] && [ "$c1" -gt 1000 ] && pass "the other session ran its 3 s: $c1 calls counted" ||
        { fail "the other session: exit $rc:"; sed 's/^/    /' "$tmp/k1.out"; }
    out=$("$lp" status -p "$pid")
    grep -q '^probes: 0$' <<<"$out" && grep -q '^trace session: none$' <<<"$out" && pass "no probe and no session left" ||
        { fail "left after both:"; sed 's/^/    /' <<<"$out"; }
fi

# 2b. A session's probe inside the bytes another session's jmp replaced (nap+1, after nap's
# one-byte push): its int3 went into the middle of the jmp, and the program died at its next
# call. Now the first probe goes back to the breakpoint path while the second is there.
"$lp" trace -p "$pid" --count nap >"$tmp/o1.out" 2>&1 &
o1=$!
for _ in $(seq 500); do grep -q '^liveprobe: placed' "$tmp/o1.out" && break; sleep 0.01; done
"$lp" trace -p "$pid" --duration 1 --count 'nap+1' >"$tmp/o2.out" 2>&1; rc=$?
sleep 0.3
if kill -0 "$pid" 2>/dev/null && [ "$rc" -eq 0 ] && [ "$(sed -n 's/^nap+0x1  *\([0-9]*\)$/\1/p' "$tmp/o2.out")" -gt 0 ]; then
    pass "a probe inside another session's jmp (nap+1): the program lives, both count"
else fail "nap+1 beside nap: exit $rc, the target $(kill -0 "$pid" 2>/dev/null && echo lives || echo died):"; sed 's/^/    /' "$tmp/o2.out"; fi
kill -INT "$o1"; wait "$o1"
[ "$(count_of "$tmp/o1.out")" -gt 0 ] 2>/dev/null && pass "nap's own session counted on" || fail "nap's session: $(tail -1 "$tmp/o1.out")"

# 3. A trace beside a module probing the same function: each gets every call; removing the
# module leaves the trace's probe, ending the trace leaves the module's.
if [ -e "$samples/kretprobe_example.so" ]; then
    "$lp" insmod -p "$pid" "$samples/kretprobe_example.so" func=nap >/dev/null 2>&1 ||
        fail "insmod kretprobe_example func=nap"
    "$lp" trace -p "$pid" --duration 2 --hist nap >"$tmp/m1.out" 2>&1 &
    m1=$!
    sleep 1
    out=$("$lp" rmmod -p "$pid" kretprobe_example 2>&1) && pass "rmmod beside a trace of the same function" ||
        fail "rmmod beside the trace: $out"
    wait "$m1"; rc=$?
    h=$(hist_of "$tmp/m1.out")
    [ "$rc" -eq 0 ] && [ -n "$h" ] && [ "$h" -gt 1000 ] && pass "the trace went on after the rmmod: $h calls" ||
        { fail "the trace beside the module: exit $rc:"; sed 's/^/    /' "$tmp/m1.out"; }
    grep -q 'nap returned' <<<"$("$lp" dmesg -p "$pid" 2>/dev/null)" && pass "the module logged nap's returns" ||
        { fail "the module logged no return of nap:"; "$lp" dmesg -p "$pid" 2>&1 | tail -5 | sed 's/^/    /'; }
    "$lp" insmod -p "$pid" "$samples/kretprobe_example.so" func=nap >/dev/null 2>&1
    "$lp" trace -p "$pid" --duration 0.5 --count nap >"$tmp/m2.out" 2>&1
    before=$("$lp" dmesg -p "$pid" 2>/dev/null | grep -c 'nap returned')
    sleep 0.5
    after=$("$lp" dmesg -p "$pid" 2>/dev/null | grep -c 'nap returned')
    [ "$after" -gt "$before" ] && pass "the module's probe works on after the trace ended ($before, then $after lines)" ||
        fail "the module logged nothing after the trace ended ($before, then $after lines)"
    "$lp" rmmod -p "$pid" kretprobe_example >/dev/null 2>&1
fi
# 4. Eight sessions at once, the most: a ninth is refused, saying why, and changes nothing.
eight=()
for i in 1 2 3 4 5 6 7 8; do
    "$lp" trace -p "$pid" --count nap >"$tmp/e$i.out" 2>&1 &
    eight+=($!)
done
for _ in $(seq 500); do [ "$(sessions "$pid")" -eq 8 ] && break; sleep 0.02; done
n=$(sessions "$pid")
[ "$n" -eq 8 ] && pass "eight sessions at once" || fail "$n sessions, not 8"
out=$("$lp" trace -p "$pid" --duration 0.2 --count nap 2>&1); rc=$?
[ "$rc" -ne 0 ] && grep -q "8 trace sessions already run in this process, the most at once: end one" <<<"$out" &&
    pass "a ninth refused: $(tail -1 <<<"$out")" || { fail "a ninth: exit $rc:"; sed 's/^/    /' <<<"$out"; }
n=$(sessions "$pid")
[ "$n" -eq 8 ] && pass "the refusal changed nothing (8 sessions)" || fail "$n sessions after the refusal"
kill -INT "${eight[@]}"
ok=0
for i in 1 2 3 4 5 6 7 8; do
    wait "${eight[$((i - 1))]}" && [ "$(count_of "$tmp/e$i.out")" -gt 0 ] && ok=$((ok + 1))
done
[ "$ok" -eq 8 ] && pass "each of the eight counted its calls" || fail "$ok of the eight counted their calls"
out=$("$lp" status -p "$pid")
grep -q '^probes: 0$' <<<"$out" && grep -q '^trace session: none$' <<<"$out" && pass "no probe and no session left" ||
    { fail "left after the eight:"; sed 's/^/    /' <<<"$out"; }

kill -TERM "$pid"; wait "$pid"; rc=$?
[ "$rc" -eq 0 ] && grep -Eq '^naps [1-9][0-9]* bad 0$' "$tmp/k.out" && pass "the target: $(tail -1 "$tmp/k.out")" ||
    { fail "the target exited $rc:"; sed 's/^/    /' "$tmp/k.out"; }

# 4b. A child forked by an attached process while a session runs has the session's probes
# too: it gets an agent of its own (`status` answers for it), which removes them when the
# session ends (before, the child traced on, with no agent to ask).
"${launch[@]}" "$bin/tests/lp_fork_target" 1 4 >"$tmp/f.out" 2>&1 &
fpid=$!
pids+=("$fpid")
if ready "$tmp/f.out"; then
    "$lp" trace -p "$fpid" --count in_child >"$tmp/f.trace" 2>&1 &
    ft=$!
    for _ in $(seq 300); do child=$(pgrep -P "$fpid" -x lp_fork_target) && break; sleep 0.01; done
    sleep 0.5
    out=$("$lp" status -p "${child:-0}" 2>&1)
    grep -q "^trace session 0: 1 probes, held by tool pid $ft" <<<"$out" && pass "the forked child has an agent that lists the session" ||
        { fail "the forked child ${child:-?}:"; sed 's/^/    /' <<<"$out"; }
    kill -INT "$ft"; wait "$ft"
    for _ in $(seq 100); do "$lp" status -p "${child:-0}" 2>/dev/null | grep -q '^probes: 0$' && break; sleep 0.02; done
    out=$("$lp" status -p "${child:-0}" 2>&1)
    grep -q '^probes: 0$' <<<"$out" && grep -q '^trace session: none$' <<<"$out" &&
        pass "the session's end removed its probes from the child too" || { fail "the child after the end:"; sed 's/^/    /' <<<"$out"; }
    grep -q "the trace session of tool pid $ft ended: removed its 1 probes from this forked child" <<<"$("$lp" dmesg -p "${child:-0}" 2>/dev/null)" &&
        pass "the child's log says the session ended" || fail "the child's log: $("$lp" dmesg -p "${child:-0}" 2>&1 | tail -1)"
    wait "$fpid"
    grep -q '^parent in_parent [0-9]* child status 0$' "$tmp/f.out" && pass "parent and child ran their time" ||
        { fail "the forking target:"; sed 's/^/    /' "$tmp/f.out"; }
fi

# 5. Two users: the process's owner (nobody) and root trace it at once; another user (daemon)
# is refused, and nothing changes.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null && id daemon >/dev/null 2>&1; then
    as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups "$@"; }
    chmod 711 "$tmp"
    install -d -o 65534 -g 65534 -m 700 "$tmp/nobody"  # an agent's directory is its user's own
    export LIVEPROBE_RUNTIME_DIR=$tmp/nobody
    as 65534 "${launch[@]}" "$target" 1000 >"$tmp/u.out" 2>&1 &
    upid=$!
    pids+=("$upid")
    if ready "$tmp/u.out"; then
        upid=$(pgrep -n -x lp_nap_target -u 65534)
        as 65534 "$lp" trace -p "$upid" --duration 2 --count nap >"$tmp/u1.out" 2>&1 &
        u1=$!
        sleep 0.7
        "$lp" trace -p "$upid" --duration 0.6 --hist nap >"$tmp/u2.out" 2>&1; rc=$?
        h=$(hist_of "$tmp/u2.out")
        [ "$rc" -eq 0 ] && [ -n "$h" ] && [ "$h" -gt 0 ] && pass "root traced nobody's process beside nobody's trace: $h calls" ||
            { fail "root's trace beside nobody's: exit $rc:"; sed 's/^/    /' "$tmp/u2.out"; }
        out=$(as 1 "$lp" trace -p "$upid" --duration 0.3 --count nap 2>&1); rc=$?
        [ "$rc" -ne 0 ] && pass "user daemon refused: $(tail -1 <<<"$out")" || fail "user daemon traced nobody's process"
        wait "$u1"; rc=$?
        c=$(count_of "$tmp/u1.out")
        [ "$rc" -eq 0 ] && [ -n "$c" ] && [ "$c" -gt "${h:-0}" ] && pass "nobody's own trace ran its 2 s: $c calls" ||
            { fail "nobody's trace: exit $rc:"; sed 's/^/    /' "$tmp/u1.out"; }
        out=$("$lp" status -p "$upid")
        grep -q '^probes: 0$' <<<"$out" && grep -q '^trace session: none$' <<<"$out" && pass "no probe and no session left" ||
            { fail "left after both users' traces:"; sed 's/^/    /' <<<"$out"; }
        kill -TERM "$upid"; wait 2>/dev/null
        grep -Eq '^naps [1-9][0-9]* bad 0$' "$tmp/u.out" && pass "nobody's target: $(tail -1 "$tmp/u.out")" ||
            { fail "nobody's target:"; sed 's/^/    /' "$tmp/u.out"; }
    fi
else
    echo "SKIP: two users (needs root, setpriv and a user daemon)"
fi

[ "$failures" -eq 0 ] && echo "sessions: all passed" || echo "sessions: $failures failure(s)"
[ "$failures" -eq 0 ]
