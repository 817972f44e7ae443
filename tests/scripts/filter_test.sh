#!/usr/bin/env bash
# trace --filter (issue 34, item 4): predicates decided in the target, over arguments by
# position and by DWARF name, the return value (typed: an int's -3 is negative), the duration,
# the thread's name and id, in each mode (events, --count, --hist) and at p: probes, on
# tests/programs/calltree_target.c, whose calls are known. Bad expressions are refused with a
# caret under the mistake, before anything runs (tests/golden/filter_errors.txt).
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" filter
target=$bin/tests/lp_calltree_target

# run NAME ARGS...: liveprobe trace ARGS... -- target; stdout in $tmp/NAME.out, masked in .masked.
run() {
    local name=$1
    shift
    "${launch[@]}" "$lp" trace "$@" -- "$target" >"$tmp/$name.out" 2>"$tmp/$name.err" ||
        { fail "$name: exit $?"; sed 's/^/    /' "$tmp/$name.err"; }
    sed -E 's/^\[[0-9.]+\] [0-9]+ /[T] TID /; s/took [0-9]+ ns/took D ns/' "$tmp/$name.out" >"$tmp/$name.masked"
}
# same WHAT NAME WANT: $tmp/NAME.masked is WANT, line for line.
same() {
    if diff -u <(printf '%s\n' "$3") "$tmp/$2.masked" >"$tmp/$2.diff"; then pass "$1"
    else fail "$1:"; sed 's/^/    /' "$tmp/$2.diff"; fi
}

run byname --filter 'i > 0 && i < 10' ct_lex
same "events: a parameter by name (ct_lex's i)" byname "[T] TID ct_lex returned 2 and took D ns to execute
[T] TID ct_lex returned 4 and took D ns to execute
[T] TID ct_lex returned 2 and took D ns to execute
[T] TID ct_lex returned 4 and took D ns to execute
[T] TID ct_lex returned 6 and took D ns to execute"
run bypos --count --filter 'arg0 == 1 || $arg1 == 11' ct_lex ct_parse
same "--count: arguments by position, bpftrace's arg0 and the kernel's \$arg1" bypos "ct_lex                                   3
ct_parse                                 1
(2 of 2 functions called)"
run neg --filter 'retval < 0' 'ct_*'
same "retval typed by DWARF: the int -3 is negative" neg "[T] TID ct_neg returned -3 and took D ns to execute"
run negraw --count --filter 'retval:u32 > 100' 'ct_*'
same "retval:u32: the same -3 read as an unsigned 32-bit value" negraw "ct_neg                                   1
(1 of 8 functions called)"
run long --hist --filter 'duration >= 10ms' 'ct_*' main
grep '^@ns' "$tmp/long.out" | sort >"$tmp/long.masked"
same "--hist: duration >= 10ms keeps main and ct_wait" long "@ns[ct_wait]: 1 calls
@ns[main]: 1 calls"
# --count decides at the entry (the filter reads neither retval nor duration): ct_worker began
# before its thread took its name, its callees after.
run comm --count --filter 'comm == "ct-worker"' 'ct_*'
same "comm, with --count at the entry: the calls the thread made once it was named ct-worker" comm "ct_lex                                   3
ct_parse                                 1
(2 of 8 functions called)"
# A filter that reads the duration is decided at the return, where ct_worker's thread is named.
run comm_events --filter 'comm == "ct-worker" && duration >= 0' ct_worker
run comm_entry --filter 'comm == "ct-worker"' ct_worker
grep -q 'ct_worker returned' "$tmp/comm_events.out" && ! grep -q 'ct_worker' "$tmp/comm_entry.out" &&
    pass "comm: decided at the return when the filter reads the duration (ct_worker passes), else at the entry (not)" ||
    fail "comm per event: at the return: $(cat "$tmp/comm_events.out"); at the entry: $(cat "$tmp/comm_entry.out")"
run notcomm --count --filter 'comm != "ct-worker" && tid == pid' 'ct_*'
grep -q '^ct_worker' "$tmp/notcomm.out" && fail "comm != and tid == pid: the worker's calls passed" ||
    { grep -Eq '^ct_lex +6$' "$tmp/notcomm.out" && pass "comm != \"ct-worker\" && tid == pid: the main thread's calls" ||
        fail "comm !=: $(cat "$tmp/notcomm.out")"; }
run probe --filter 'i == 10' 'p:ct_lex i'
grep -c . "$tmp/probe.out" | grep -qx 1 && grep -q 'i=10$' "$tmp/probe.out" &&
    pass "p:: a parameter at the entry ($(cat "$tmp/probe.out"))" || fail "p: with a filter: $(cat "$tmp/probe.out")"
run math --count --filter '(i * 3 + 1) % 4 == 0 && (i << 2) != 0 && ~i != 0 && !(i == 2) && -i < 0' ct_lex
# i of ct_lex: 0 1 2 1 2 3 10 11 12; (3i + 1) % 4 == 0: i = 1, 1; i != 2 and > 0: the same.
same "arithmetic, shifts and logic, as C's precedence" math "ct_lex                                   2
(1 of 1 functions called)"
# The target's answer: a parameter no function has.
run noparam --filter 'nope > 0' ct_lex
grep -q "ct_lex: --filter: no parameter 'nope' (its parameters: i)" "$tmp/noparam.err" &&
    pass "a parameter the function does not have: named, with those it has" ||
    { fail "an unknown parameter:"; sed 's/^/    /' "$tmp/noparam.err"; }

# Mistakes, each refused before anything runs, with a caret under it.
: >"$tmp/errors.out"
for e in 'arg0 >' 'arg0 >> (3' 'comm > 1' 'arg0 > 5x' 'x:u33 > 5' '1 + * 2' '"a" == 1' 'arg0 $ 1' '' \
    '1 1' 'arg0 > 1)' "$(printf '1+(%.0s' $(seq 17))1$(printf ')%.0s' $(seq 17))" \
    "$(printf '(%.0s' $(seq 70))1$(printf ')%.0s' $(seq 70))" "$(printf -- '-%.0s' $(seq 200))1"; do
    echo "== --filter '$e'" >>"$tmp/errors.out"
    "$lp" trace --filter "$e" ct_lex -- "$target" >>"$tmp/errors.out" 2>&1
    echo "exit $?" >>"$tmp/errors.out"
done
echo "== --filter 'retval > 0' p:ct_lex" >>"$tmp/errors.out"
"$lp" trace --filter 'retval > 0' p:ct_lex -- "$target" >>"$tmp/errors.out" 2>&1
echo "exit $?" >>"$tmp/errors.out"
[ -n "${LIVEPROBE_UPDATE_GOLDEN:-}" ] && cp "$tmp/errors.out" "$LIVEPROBE_SOURCE_DIR/tests/golden/filter_errors.txt"
if diff -u "$LIVEPROBE_SOURCE_DIR/tests/golden/filter_errors.txt" "$tmp/errors.out" >"$tmp/errors.diff"; then
    pass "bad expressions: refused, exit 2, the mistake pointed at (filter_errors.txt)"
else fail "bad expressions: differ from filter_errors.txt:"; sed 's/^/    /' "$tmp/errors.diff"; fi
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
