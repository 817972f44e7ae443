#!/usr/bin/env bash
# Calls, not entries (issue 31, part 6): a function whose first instruction is also a loop's
# head (drain, built at -O2: each turn of its do-while jumps back to the entry) is counted and
# timed once a call in every mode, as many times as the program says it called it. Before,
# --count counted every turn (1,000,000 for 1,000 calls), and the return-probe modes took an
# instance a turn.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" loop_entry
target=$bin/tests/lp_loop_entry_target

entry=$(nm "$target" | awk '$3 == "drain" {print $1}' | sed 's/^0*//')
if objdump -d --no-show-raw-insn "$target" | grep -qE "j[a-z]+ +$entry <drain>"; then
    pass "drain's loop jumps back to its entry (0x$entry)"
else fail "drain's code has no jump to its entry: this test needs GCC's -O2 shape"; fi
want=$("$target" | sed -n 's/^drain \([0-9]*\)$/\1/p')

# calls MODE...: traces drain in MODE; prints the calls the trace counted.
check() {
    local name=$1 n rc; shift
    "$lp" trace "$@" drain -- "$target" >"$tmp/$name.out" 2>&1; rc=$?
    case $name in
    count) n=$(sed -n 's/^drain   *\([0-9]*\)$/\1/p' "$tmp/$name.out") ;;
    hist) n=$(sed -n 's/^@ns\[drain\]: \([0-9]*\) calls$/\1/p' "$tmp/$name.out") ;;
    *) n=$(grep -c ' drain returned ' "$tmp/$name.out") ;;
    esac
    if [ "$rc" -eq 0 ] && [ "$n" = "$want" ] && grep -q "missed 0$" "$tmp/$name.out"; then
        pass "$name: $n calls of drain, as the program made, none missed"
    else fail "$name: exit $rc, ${n:-no} calls counted, the program made $want:"; grep -v '^\[' "$tmp/$name.out" | tail -4 | sed 's/^/    /'; fi
}
check count --count
check hist --hist
check events

[ "$failures" -eq 0 ] && echo "loop_entry: all passed" || echo "loop_entry: $failures failure(s)"
[ "$failures" -eq 0 ]
