#!/usr/bin/env bash
# siglongjmp out of signal handlers (issue 31, part 3): a timer's handler that lands in a loop of
# probed calls, often inside liveprobe's own hit path, and siglongjmps out, on the thread's
# stack, on a sigaltstack, and from a second handler nested on the first (out of both, and of a
# probed call made by the first). Every later call of the thread is traced: `after` counted exactly
# as often as the program says it called it, in --count and --hist, with every function
# probed. Before, each siglongjmp out of a hit left a level of the thread's dispatch taken, and
# after four of them its hits were lost without a word (`after` 84, 1220, 187 of 1300).
# storm: 20,000 jumps back into the loop, one every 20 us, many of them landing in the thread's
# next hit while it sets its record back; then 1,000 calls of `after`, every one traced.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" siglongjmp
target=$bin/tests/lp_siglongjmp_target

for stack in '' alt nested storm; do
    for mode in --count --hist; do
        name="${mode#--}${stack:+ ($stack)}"
        "$lp" trace "$mode" '*' -- "$target" $stack >"$tmp/out" 2>&1; rc=$?
        want=$(sed -n 's/^after \([0-9]*\) jumps [0-9]* .*/\1/p' "$tmp/out")
        if [ "$mode" = --count ]; then got=$(sed -n 's/^after  *\([0-9]*\)$/\1/p' "$tmp/out")
        else got=$(sed -n 's/^@ns\[after\]: \([0-9]*\) calls$/\1/p' "$tmp/out"); fi
        if [ "$rc" -eq 0 ] && [ -n "$want" ] && [ "$got" = "$want" ]; then pass "$name: after traced $got times, as the program called it"
        else fail "$name: exit $rc, after traced ${got:-never}, called ${want:-?} times:"; grep -v '^\[' "$tmp/out" | tail -4 | sed 's/^/    /'; fi
        # The handlers' own calls: each counted, or missed when the signal landed in liveprobe's
        # hit path (a probe hit inside another's handling is missed, as the kernel's kprobes
        # miss it): counted and missed add up to the program's count, for each of the three.
        if { [ "$stack" = nested ] || [ "$stack" = storm ]; } && [ "$mode" = --count ]; then
            w=$(sed -n 's/.* in_handler \([0-9]*\) on_alarm [0-9]*$/\1/p' "$tmp/out")
            a=$(sed -n 's/.* on_alarm \([0-9]*\)$/\1/p' "$tmp/out")
            n=$(sed -n 's/^\(on_alarm\|in_handler\|on_usr1\)  *\([0-9]*\)$/\2/p' "$tmp/out" | paste -sd+ | bc)
            m=$(sed -n 's/.* missed \([0-9]*\)$/\1/p' "$tmp/out")
            [ -n "$w" ] && [ -n "$a" ] && [ -n "$n" ] && [ -n "$m" ] && [ $((n + m)) -eq $((a + 2 * w)) ] &&
                pass "count ($stack): the handlers' $((a + 2 * w)) calls, $n counted and $m missed" ||
                fail "count ($stack): the handlers counted ${n:-?}, missed ${m:-?}, called ${a:-?} + 2 x ${w:-?}"
        fi
    done
done

# Per-event (not '*': `work`'s millions of calls a second fill the ring, and drops hide what is
# checked): each call of `after` that returned is a line of its own.
"$lp" trace after in_handler on_usr1 -- "$target" nested >"$tmp/ev.out" 2>&1; rc=$?
want=$(sed -n 's/^after \([0-9]*\) jumps [0-9]* .*/\1/p' "$tmp/ev.out")
got=$(grep -c ' after returned ' "$tmp/ev.out")
[ "$rc" -eq 0 ] && [ -n "$want" ] && [ "$got" = "$want" ] && grep -q ' 0 dropped' "$tmp/ev.out" &&
    pass "per-event (nested): $got calls of after, each a line" || { fail "per-event: exit $rc, $got lines, ${want:-?} calls"; grep -v '^\[' "$tmp/ev.out" | tail -3; }

# swapcontext: `step` returns on the main stack while the coroutine's `body` is in flight on
# another, every round; `leaf` returns on the coroutine's. Every call counted and timed.
sc=$bin/tests/lp_swapcontext_target
for mode in --count --hist ''; do
    "$lp" trace $mode step leaf body -- "$sc" 20000 >"$tmp/sc.out" 2>&1; rc=$?
    case $mode in
        --count) got=$(sed -n 's/^\(step\|leaf\|body\)  *\([0-9]*\)$/\1 \2/p' "$tmp/sc.out" | sort | paste -sd' ')
                 want="body 1 leaf 20000 step 20000" ;;
        --hist) got=$(sed -n 's/^@ns\[\(step\|leaf\|body\)\]: \([0-9]*\) calls$/\1 \2/p' "$tmp/sc.out" | sort | paste -sd' ')
                want="leaf 20000 step 20000" ;;  # body never returns
        *) got="leaf $(grep -c ' leaf returned ' "$tmp/sc.out") step $(grep -c ' step returned ' "$tmp/sc.out")"
           want="leaf 20000 step 20000" ;;
    esac
    [ "$rc" -eq 0 ] && [ "$got" = "$want" ] && grep -q '^step 20000 leaf 20000 body 1$' "$tmp/sc.out" && grep -q 'missed 0$' "$tmp/sc.out" &&
        pass "swapcontext ${mode:-per-event}: $got" || { fail "swapcontext ${mode:-per-event}: exit $rc, $got"; grep -v '^\[' "$tmp/sc.out" | tail -4 | sed 's/^/    /'; }
done

# Functions that return twice: setjmp (after each longjmp) and vfork (in the child, then in the
# parent). A return probe on them killed the program (SIGILL: the second return found no
# record). Globs that take them in, in each mode: the program ends as untraced, and the tool
# says why each of the four is not traced (--count places no return probe: they are counted).
want_rt='^setjmp returned 3 times, vfork child 0, jumps 3$'
for mode in "" --count --hist; do
    "$lp" trace $mode 'libc.so.6:*setjmp*' 'libc.so.6:*vfork*' jump -- "$bin/tests/lp_returns_twice_target" >"$tmp/rt.out" 2>&1
    rc=$?
    if [ "$rc" = 0 ] && grep -q "$want_rt" "$tmp/rt.out" &&
       { [ "$mode" = --count ] || [ "$(grep -c 'it returns twice' "$tmp/rt.out")" = 4 ]; }; then
        pass "setjmp and vfork under ${mode:-per-event}: the program ends as untraced; $(grep -o 'libc.so.6:[a-z_]*: a kretprobe cannot be at [a-z_]*: it returns twice' "$tmp/rt.out" | head -1)"
    else fail "setjmp and vfork under ${mode:-per-event}: exit $rc"; grep -v '^\[' "$tmp/rt.out" | tail -5 | sed 's/^/    /'; fi
done

[ "$failures" -eq 0 ] && echo "siglongjmp: all passed" || echo "siglongjmp: $failures failure(s)"
[ "$failures" -eq 0 ]
