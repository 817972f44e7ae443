#!/usr/bin/env bash
# liveprobe report FILE and replay FILE (issue 34, item 1): each function of a trace file, against
# tests/programs/trace_target.c's calls of known counts; the whole output compared with
# tests/golden/report_calls.txt, times masked (they move from run to run; the counts do not).
# Also: a recursion counted once in the total (lp_tr_fib), every sort
# column is taken, and a file that is no trace file is refused.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" report
target=$bin/tests/lp_trace_target
"${launch[@]}" "$lp" trace -o "$tmp/t.lptrace" 'lp_tr_*' -- "$target" >"$tmp/trace.out" 2>&1 ||
    { fail "trace -o: exit $?"; sed 's/^/    /' "$tmp/trace.out"; }
"$lp" report -s calls "$tmp/t.lptrace" >"$tmp/report.out" 2>&1
sed -E 's/[0-9]+(\.[0-9]+)? (ns|us|ms|  s)/T/g' "$tmp/report.out" | tr -s ' ' >"$tmp/report.masked"
if diff -u "$LIVEPROBE_SOURCE_DIR/tests/golden/report_calls.txt" "$tmp/report.masked" >"$tmp/report.diff"; then
    pass "report -s calls: every function, its calls (report_calls.txt)"
else fail "report -s calls differs from report_calls.txt:"; sed 's/^/    /' "$tmp/report.diff"; fi
# lp_tr_fib calls itself: its total time is its outermost calls' (the recursion is not counted
# again), each the longest of its tree; its self time, all its calls', is no more.
read -r total self max <<<"$(awk '/lp_tr_fib$/ { print $1 * ($2 == "ms" ? 1e6 : $2 == "us" ? 1e3 : 1), $3 * ($4 == "ms" ? 1e6 : $4 == "us" ? 1e3 : 1), $10 * ($11 == "ms" ? 1e6 : $11 == "us" ? 1e3 : 1) }' "$tmp/report.out")"
awk -v t="$total" -v s="$self" -v m="$max" 'BEGIN { exit !(s > 0 && s <= t && t == m) }' &&
    pass "recursion: lp_tr_fib's total $total ns is its outermost call's, self $self ns" ||
    fail "recursion: lp_tr_fib's total $total, self $self, longest $max"
before=$failures
for col in total self calls min avg max name; do
    "$lp" report -s "$col" "$tmp/t.lptrace" >"$tmp/col.out" 2>&1 && [ "$(grep -c 'lp_tr_' "$tmp/col.out")" -eq 5 ] ||
        fail "report -s $col: $(head -3 "$tmp/col.out")"
done
[ "$failures" -eq "$before" ] && pass "report -s total|self|calls|min|avg|max|name"
# liveprobe replay FILE: the call tree, thread by thread (a forked child's apart), values at
# the end of a block; -D 2 shows main's callees as lines.
"${launch[@]}" "$lp" trace -o "$tmp/tree.lptrace" main lp_tr_fib lp_tr_square -- "$target" >"$tmp/tree.out" 2>&1
"$lp" replay -D 2 "$tmp/tree.lptrace" 2>&1 |
    sed -E 's/^ *[0-9]+(\.[0-9]+)? (ns|us|ms|  s) /D /; s/\[ *[0-9]+\]/[TID]/' >"$tmp/replay.masked"
if diff -u "$LIVEPROBE_SOURCE_DIR/tests/golden/replay_depth2.txt" "$tmp/replay.masked" >"$tmp/replay.diff"; then
    pass "replay -D 2: main's calls as a tree, the child's apart (replay_depth2.txt)"
else fail "replay -D 2 differs from replay_depth2.txt:"; sed 's/^/    /' "$tmp/replay.diff"; fi
n=$("$lp" replay "$tmp/tree.lptrace" | grep -c 'lp_tr_fib()')
[ "$n" -eq 177 ] && pass "replay: each of lp_tr_fib's 177 calls, nested" || fail "replay: $n calls of lp_tr_fib, not 177"
# A trace that traced nothing leaves no empty file to be taken for a trace file.
"${launch[@]}" "$lp" trace -o "$tmp/none.lptrace" lp_no_such_function -- "$target" >/dev/null 2>&1
[ ! -e "$tmp/none.lptrace" ] && pass "trace -o of nothing traced: no file left" || fail "trace -o of nothing: $(ls -l "$tmp/none.lptrace")"
echo "not a trace" >"$tmp/bad"
out=$("$lp" report "$tmp/bad" 2>&1); rc=$?
[ "$rc" -eq 1 ] && grep -q "not a liveprobe trace file" <<<"$out" && pass "a file that is no trace file: refused ($out)" ||
    fail "a bad file: exit $rc: $out"
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
