#!/usr/bin/env bash
# Off the trap path (issue 31, item 7): functions that jump through a pointer, a tail call
# (dispatch: `jmp *%rax` after the epilogue) and a computed goto (run: an interpreter's loop),
# take the jump path once nothing the program stores or computes can land inside the bytes the
# jmp replaces; and so does a function shorter than the jump (peek), whose jmp also covers its
# alignment padding. Before, every function with such a jump took the breakpoint path (a signal a
# hit, microseconds): in a real C++ program, one function in ten. Their calls are counted
# exactly, in each mode, and the program's output is unchanged.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" jump_path
target=$bin/tests/lp_indirect_jump_target
calls=20000

if objdump -d --no-show-raw-insn "$target" | awk '/<dispatch>:/,/^$/' | grep -qE 'jmp +\*%r'; then
    pass "dispatch ends in a tail call through a pointer"
else fail "dispatch has no jmp through a register: this test needs GCC's -O2 shape"; fi
want=$("$target" "$calls")
steps=$(sed -n 's/^steps //p' <<<"$want")

# MODE...: traces the five functions; checks the placement, the counts and the output.
check() {
    local name=$1 out n_dispatch n_run n_step n_twice n_peek; shift
    "$lp" trace --verbose "$@" dispatch run step twice peek -- "$target" "$calls" >"$tmp/$name.out" 2>"$tmp/$name.err"
    out=$(cat "$tmp/$name.out")
    if grep -q '^liveprobe: placed 5 probes (5 jump-optimized)' "$tmp/$name.err" &&
        ! grep -q 'on the breakpoint path' "$tmp/$name.err" &&
        grep -q '^liveprobe: the 5 functions called all took the jump path$' "$tmp/$name.err"; then
        pass "$name: the five functions take the jump path"
    else fail "$name: not all on the jump path:"; grep -E 'placed|breakpoint' "$tmp/$name.err" | sed 's/^/    /'; fi
    [ "$(head -4 <<<"$out")" = "$want" ] && pass "$name: the program's output is unchanged" ||
        fail "$name: the program printed $(head -4 <<<"$out" | tr '\n' ' ') against $(tr '\n' ' ' <<<"$want")"
    out=$(tail -n +5 <<<"$out")  # the trace's, after the program's four lines
    case $name in
    count)
        n_dispatch=$(sed -n 's/^dispatch  *\([0-9]*\)$/\1/p' <<<"$out")
        n_run=$(sed -n 's/^run  *\([0-9]*\)$/\1/p' <<<"$out")
        n_step=$(sed -n 's/^step  *\([0-9]*\)$/\1/p' <<<"$out")
        n_twice=$(sed -n 's/^twice  *\([0-9]*\)$/\1/p' <<<"$out")
        n_peek=$(sed -n 's/^peek  *\([0-9]*\)$/\1/p' <<<"$out")
        ;;
    hist)
        n_dispatch=$(sed -n 's/^@ns\[dispatch\]: \([0-9]*\) calls$/\1/p' <<<"$out")
        n_run=$(sed -n 's/^@ns\[run\]: \([0-9]*\) calls$/\1/p' <<<"$out")
        n_step=$(sed -n 's/^@ns\[step\]: \([0-9]*\) calls$/\1/p' <<<"$out")
        n_twice=$(sed -n 's/^@ns\[twice\]: \([0-9]*\) calls$/\1/p' <<<"$out")
        n_peek=$(sed -n 's/^@ns\[peek\]: \([0-9]*\) calls$/\1/p' <<<"$out")
        ;;
    esac
    if [ "$n_dispatch" = "$calls" ] && [ "$n_run" = "$calls" ] && [ "$n_peek" = "$calls" ] && [ $((n_step + n_twice)) = "$steps" ] &&
        grep -q 'missed 0$' "$tmp/$name.err"; then
        pass "$name: $n_dispatch dispatch, $n_run run, $n_peek peek, $((n_step + n_twice)) step and twice: the program's counts"
    else
        fail "$name: dispatch ${n_dispatch:-?}, run ${n_run:-?}, peek ${n_peek:-?}, step+twice $((n_step + n_twice)); the program: $calls, $calls, $calls, $steps"
        tail -2 "$tmp/$name.err" | sed 's/^/    /'
    fi
}
check count --count
check hist --hist

[ "$failures" -eq 0 ] && echo "jump_path: all passed" || echo "jump_path: $failures failure(s)"
[ "$failures" -eq 0 ]
