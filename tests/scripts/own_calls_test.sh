#!/usr/bin/env bash
# Nothing of liveprobe is the program's (issue 31, part 5): the agent's own calls into probed
# code are never traced as the program's. lp_nap_target calls no malloc in its loop; traced
# while its agent serves `status` requests (symbol lookups, formatting: malloc at every turn),
# libc's malloc must show no call. Before, a trace of 'libc.so.6:malloc' there showed some
# 66,000 calls in 2 s, all on the agent's thread.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" own_calls
target=$bin/tests/lp_nap_target

"${launch[@]}" "$target" 1000 >"$tmp/t.out" 2>&1 &
pid=$!
pids+=("$pid")
for _ in $(seq 500); do grep -q '^ready$' "$tmp/t.out" && break; sleep 0.01; done
for mode in --count ''; do
    "$lp" trace -p "$pid" --duration 2 $mode 'libc.so.6:malloc' >"$tmp/m.out" 2>&1 &
    tr=$!
    sleep 0.8
    for _ in 1 2 3 4 5; do "$lp" status -p "$pid" >/dev/null; "$lp" dmesg -p "$pid" >/dev/null; done
    wait "$tr"; rc=$?
    calls=$(sed -n 's/^liveprobe: 1 functions traced, \([0-9]*\) calls.*/\1/p' "$tmp/m.out")
    [ "$rc" -eq 0 ] && [ "$calls" = 0 ] && pass "trace ${mode:+$mode }libc.so.6:malloc: no call of the agent's counted while it served requests" ||
        { fail "trace ${mode:+$mode }libc.so.6:malloc: exit $rc, ${calls:-?} calls counted:"; grep -v '^\[' "$tmp/m.out" | tail -3 | sed 's/^/    /'; }
done
kill -TERM "$pid"; wait "$pid"
grep -Eq '^naps [1-9][0-9]* bad 0$' "$tmp/t.out" && pass "the target: $(tail -1 "$tmp/t.out")" || fail "the target: $(tail -1 "$tmp/t.out")"

# A program that interposes pthread_mutex_lock and memcpy: liveprobe's own locking on the
# program's threads (its fork and exit handlers) goes through them, and must not be traced:
# '*' counts the program's own calls only, as it counts them.
it=$bin/tests/lp_interpose_target
for mode in --count --hist; do
    "${launch[@]}" "$lp" trace $mode '*' -- "$it" >"$tmp/i.out" 2>&1; rc=$?
    locks=$(sed -n 's/^locks \([0-9]*\) memcpys.*/\1/p' "$tmp/i.out")
    copies=$(sed -n 's/.* memcpys \([0-9]*\)$/\1/p' "$tmp/i.out")
    if [ $mode = --count ]; then
        l=$(sed -n 's/^pthread_mutex_lock  *\([0-9]*\)$/\1/p' "$tmp/i.out"); c=$(sed -n 's/^memcpy  *\([0-9]*\)$/\1/p' "$tmp/i.out")
    else
        l=$(sed -n 's/^@ns\[pthread_mutex_lock\]: \([0-9]*\) calls$/\1/p' "$tmp/i.out"); c=$(sed -n 's/^@ns\[memcpy\]: \([0-9]*\) calls$/\1/p' "$tmp/i.out")
    fi
    [ "$rc" -eq 0 ] && [ -n "$locks" ] && [ "$l" = "$locks" ] && [ "$c" = "$copies" ] &&
        pass "trace $mode '*' of a program that interposes pthread_mutex_lock and memcpy: its own $l and $c calls" ||
        { fail "trace $mode '*', interposed: exit $rc, pthread_mutex_lock ${l:-?} of ${locks:-?}, memcpy ${c:-?} of ${copies:-?}"; grep -v '^\[' "$tmp/i.out" | tail -4 | sed 's/^/    /'; }
done

[ "$failures" -eq 0 ] && echo "own_calls: all passed" || echo "own_calls: $failures failure(s)"
[ "$failures" -eq 0 ]
