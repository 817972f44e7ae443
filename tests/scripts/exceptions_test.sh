#!/usr/bin/env bash
# Every function of a C++ program that throws, probed (issue 31, parts 1 and 2): `'*'` takes
# function entries only, never the NAME.cold parts GCC splits landing pads into (a return probe
# there replaced a word of the frame: the program aborted in free()), and exceptions cross
# return-probed frames in every mode: the program's output is the same as untraced, and the
# counts of --count are its own, exactly. A return probe asked for on a cold part is refused
# with the reason; an instruction probe there (p:) works.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" exceptions
target=$bin/tests/lp_throw_target

colds=$(nm -C "$target" | grep -c ' \[clone \.cold\]$')
[ "$colds" -ge 3 ] && pass "the target has $colds cold parts (landing pads split out by -O2)" ||
    fail "the target has $colds cold parts: this test needs GCC's -O2 splitting"
want=$("$target")
echo "    untraced: $want"
# own NAME: the program's own count of NAME's calls.
own() { sed -n "s/\(^\|.* \)$1 \([0-9]*\).*/\2/p" <<<"$want"; }

# mode NAME ARGS...: traces the target with ARGS '*'; its output must be the untraced one.
mode() {
    local name=$1 rc; shift
    "$lp" trace "$@" '*' -- "$target" >"$tmp/$name.out" 2>"$tmp/$name.err"; rc=$?
    if [ "$rc" -eq 0 ] && grep -qxF "$want" "$tmp/$name.out"; then pass "$name: the program's output is the same"
    else fail "$name: exit $rc:"; cat "$tmp/$name.out" "$tmp/$name.err" | grep -v '^\[' | tail -5 | sed 's/^/    /'; fi
    grep -q 'cold' "$tmp/$name.out" "$tmp/$name.err" && fail "$name: a cold part was traced" ||
        pass "$name: no cold part traced"
}
mode count --count
for f in top dive flat mid leaf; do
    n=$(sed -n "s/^$f(.*)  *\([0-9]*\)$/\1/p" "$tmp/count.out")
    [ "$n" = "$(own "$f")" ] && pass "count: $f called $n times, as the program counted" ||
        fail "count: $f ${n:-not} counted, the program counted $(own "$f")"
done
mode hist --hist
# Under --hist, the calls that returned are timed; those an exception left are counted beside
# them (before, they were in no total: --hist's summary said fewer calls than --count's).
n=$(sed -n 's/^@ns\[top(int, int)\]: \([0-9]*\) calls$/\1/p' "$tmp/hist.out")
[ "$n" = "$(own top)" ] && pass "hist: every call of top returned and was timed ($n)" || fail "hist: top ${n:-none}"
for f in dive leaf; do
    read -r back left < <(sed -n "s/^@ns\[$f(.*)\]: \([0-9]*\) calls, and \([0-9]*\) that left without returning .*/\1 \2/p" "$tmp/hist.out")
    [ -n "$left" ] && [ "$left" -gt 0 ] && [ $((back + left)) = "$(own "$f")" ] &&
        pass "hist: $f: $back calls returned and $left left by an exception, the program's $(own "$f")" ||
        { fail "hist: $f: ${back:-?} returned, ${left:-?} left, the program counted $(own "$f"):"; grep "^@ns\[$f" "$tmp/hist.out" | sed 's/^/    /'; }
done
calls_of() { sed -n 's/^liveprobe: [0-9]* functions traced, \([0-9]*\) calls.*/\1/p' "$1"; }
[ "$(calls_of "$tmp/hist.err")" = "$(calls_of "$tmp/count.err")" ] &&
    pass "hist: the summary counts $(calls_of "$tmp/hist.err") calls, as --count's" ||
    fail "hist: the summary counts $(calls_of "$tmp/hist.err") calls, --count's $(calls_of "$tmp/count.err")"
mode events -o "$tmp/t.lptrace"
[ "$(calls_of "$tmp/events.err")" = "$(calls_of "$tmp/count.err")" ] &&
    pass "events: the summary counts $(calls_of "$tmp/events.err") calls, as --count's" ||
    fail "events: the summary counts $(calls_of "$tmp/events.err") calls, --count's $(calls_of "$tmp/count.err")"

# A return probe on a cold part: refused, saying why; an instruction probe there works.
out=$("$lp" trace --no-follow 'r:_Z4leafi.cold' -- "$target" 2>&1); rc=$?
[ "$rc" -ne 0 ] && grep -q "cold part of a function" <<<"$out" && pass "r: on a cold part refused: $(grep -o '_Z4leafi.cold: .*' <<<"$out")" ||
    { fail "r: on a cold part: exit $rc:"; sed 's/^/    /' <<<"$out"; }
"$lp" trace --count 'p:_Z4leafi.cold' -- "$target" >"$tmp/p.out" 2>&1
n=$(sed -n 's/^leaf(int) \[clone \.cold\]  *\([0-9]*\)$/\1/p' "$tmp/p.out")
[ "$n" = "$(own caught)" ] && pass "p: at leaf's cold part counts each throw ($n)" ||
    { fail "p: at the cold part: ${n:-nothing}, $(own caught) throws:"; sed 's/^/    /' "$tmp/p.out"; }

# Attached while it throws (a third of its calls do): return probes armed before the unwinder
# was hooked let a throw meet the trampoline unknown, and the program terminated at once
# ("terminate called after throwing"). Each session ended by Ctrl-C with throws in flight.
"${launch[@]}" "$target" 100000000 10 >"$tmp/long.out" 2>&1 &
pid=$!
pids+=("$pid")
sleep 0.3
for spec in 'mid(int)' '*'; do
    for m in --hist '' --count; do
        "$lp" trace -p "$pid" $m "$spec" >"$tmp/p.trace" 2>&1 &
        tr=$!
        sleep 1
        kill -INT "$tr"; wait "$tr"; rc=$?
        if kill -0 "$pid" 2>/dev/null && [ "$rc" -eq 0 ]; then pass "attached while it throws: lives after 'trace ${m:+$m }$spec', Ctrl-C"
        else fail "attached while it throws: 'trace ${m:+$m }$spec': exit $rc:"; tail -3 "$tmp/long.out" "$tmp/p.trace" | sed 's/^/    /'; break 2; fi
    done
done
kill "$pid" 2>/dev/null

[ "$failures" -eq 0 ] && echo "exceptions: all passed" || echo "exceptions: $failures failure(s)"
[ "$failures" -eq 0 ]
