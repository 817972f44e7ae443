#!/usr/bin/env bash
# siglongjmp out of signal handlers (issue 31, part 3): a timer's handler that lands in a loop of
# probed calls, often inside liveprobe's own hit path, and siglongjmps out, on the thread's
# stack and on a sigaltstack. Every later call of the thread is traced: `after` counted exactly
# as often as the program says it called it, in --count and --hist, with every function
# probed. Before, each siglongjmp out of a hit left a level of the thread's dispatch taken, and
# after four of them its hits were lost without a word (`after` 84, 1220, 187 of 1300).
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" siglongjmp
target=$bin/tests/lp_siglongjmp_target

for stack in '' alt; do
    for mode in --count --hist; do
        name="${mode#--}${stack:+ on a sigaltstack}"
        "$lp" trace "$mode" '*' -- "$target" $stack >"$tmp/out" 2>&1; rc=$?
        want=$(sed -n 's/^after \([0-9]*\) jumps [0-9]*$/\1/p' "$tmp/out")
        if [ "$mode" = --count ]; then got=$(sed -n 's/^after  *\([0-9]*\)$/\1/p' "$tmp/out")
        else got=$(sed -n 's/^@ns\[after\]: \([0-9]*\) calls$/\1/p' "$tmp/out"); fi
        if [ "$rc" -eq 0 ] && [ -n "$want" ] && [ "$got" = "$want" ]; then pass "$name: after traced $got times, as the program called it"
        else fail "$name: exit $rc, after traced ${got:-never}, called ${want:-?} times:"; grep -v '^\[' "$tmp/out" | tail -4 | sed 's/^/    /'; fi
    done
done

[ "$failures" -eq 0 ] && echo "siglongjmp: all passed" || echo "siglongjmp: $failures failure(s)"
[ "$failures" -eq 0 ]
