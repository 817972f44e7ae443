#!/usr/bin/env bash
# The views of a trace file (issue 34, item 1): replay, report and graph, and their filters
# (-F, -N, -D, --min-duration, --tid), on tests/programs/calltree_target.c, whose call tree is
# known. Whole outputs are compared with tests/golden/views_*.txt, durations and thread ids
# masked (they move from run to run; the trees do not). LIVEPROBE_UPDATE_GOLDEN=1 rewrites them.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" views
target=$bin/tests/lp_calltree_target
"${launch[@]}" "$lp" trace -o "$tmp/c.lptrace" 'ct_*' main -- "$target" >"$tmp/trace.out" 2>&1 ||
    { fail "trace -o: exit $?"; sed 's/^/    /' "$tmp/trace.out"; }
f=$tmp/c.lptrace

# golden NAME WHAT ARGS...: liveprobe ARGS..., masked, against tests/golden/views_NAME.txt.
golden() {
    local name=$1 what=$2
    shift 2
    "$lp" "$@" >"$tmp/$name.out" 2>&1 || echo "exit $?" >>"$tmp/$name.out"
    sed -E 's/ *[0-9]+(\.[0-9]+)? (ns|us|ms|  s)/ D/g; s/\[ *[0-9]+\] \|/[TID] |/; /^[a-z_;]+ [0-9]+$/ s/ [0-9]+$/ N/' "$tmp/$name.out" |
        sed "s|$tmp|TMP|g" >"$tmp/$name.masked"
    local want=$LIVEPROBE_SOURCE_DIR/tests/golden/views_$name.txt
    [ -n "${LIVEPROBE_UPDATE_GOLDEN:-}" ] && cp "$tmp/$name.masked" "$want"
    if diff -u "$want" "$tmp/$name.masked" >"$tmp/$name.diff"; then
        pass "$what (views_$name.txt)"
    else fail "$what: differs from views_$name.txt:"; sed 's/^/    /' "$tmp/$name.diff"; fi
}

golden replay "replay: both threads' trees, recursion nested, values at the ends" replay "$f"
golden replay_include "replay -F ct_parse: each call of ct_parse and its callees, in both threads" \
    replay -F ct_parse "$f"
golden replay_exclude "replay -N ct_eval -D 2: main's callees but ct_eval, and theirs not" \
    replay -N ct_eval -D 2 "$f"
golden replay_min "replay --min-duration 10ms: main and ct_wait only" replay --min-duration 10000000 "$f"
golden report "report -s calls: calls, and a recursion's total its outermost call's" report -s calls "$f"
golden folded "report --folded: each call path once, both threads merged" report --folded "$f"
golden graph "graph ct_lex: its two chains of callers" graph "$f" ct_lex
golden graph_eval "graph ct_eval: the recursion as a tree under the outermost call" graph "$f" ct_eval
golden graph_all "graph -D 2: the whole trace's tree, two deep" graph -D 2 "$f"
golden graph_none "graph of a function not called: an error" graph "$f" ct_nothing

# A recursive function's total time is its outermost call's, which is also its longest.
line=$("$lp" report "$f" | grep ' ct_eval$')
awk '{ exit !($1 $2 == $10 $11) }' <<<"$line" && pass "report: ct_eval's total is its outermost call's: $line" ||
    fail "report: ct_eval's total is not its longest call's: $line"
# Self time is the time less the shown callees': ct_parse's self with ct_lex hidden is its total.
self_shown=$("$lp" report "$f" | awk '$NF == "ct_parse" { print $3 $4 }')
read -r t1 u1 s1 v1 <<<"$("$lp" report -N ct_lex "$f" | awk '$NF == "ct_parse" { print $1, $2, $3, $4 }')"
[ "$t1 $u1" = "$s1 $v1" ] && [ "$self_shown" != "$s1$v1" ] &&
    pass "report -N ct_lex: ct_parse's self time is its total ($t1 $u1); with ct_lex shown it is less ($self_shown)" ||
    fail "report -N ct_lex: ct_parse total $t1 $u1, self $s1 $v1 (with ct_lex: $self_shown)"
# --tid: the worker's calls only.
worker=$("$lp" replay "$f" | sed -nE 's/.*\[ *([0-9]+)\] \| ct_worker\(\) \{/\1/p')
out=$("$lp" replay --tid "$worker" "$f")
n=$(grep -c '|' <<<"$out")
[ "$n" -eq 7 ] && ! grep -q main <<<"$out" && pass "replay --tid $worker: the worker's 7 lines only" ||
    fail "replay --tid $worker: $n lines: $out"
# The folded paths' times add up to the report's: main's thread's paths to main's total.
main_ns=$("$lp" report --folded "$f" | awk '/^main[; ]/ { s += $NF } END { print s }')
main_rep=$("$lp" report "$f" | awk '$NF == "main" { print $1 * ($2 == "ms" ? 1e6 : $2 == "us" ? 1e3 : 1) }')
awk -v a="$main_ns" -v b="$main_rep" 'BEGIN { d = a - b; exit !(d < 1000 && d > -1000) }' &&
    pass "report --folded: main's paths add up to its total ($main_ns ns)" ||
    fail "report --folded: main's paths add up to $main_ns ns, its total is $main_rep ns"
# report's Avg is the mean of every call, a recursion's inner ones too (it was total / calls,
# below Min for a recursion): ct_eval's four durations, from the file's events.
mean=$("$lp" trace -i "$f" --json 2>/dev/null | sed -n 's/.*"function":"ct_eval".*"duration_ns":\([0-9]*\).*/\1/p' |
    awk '{ s += $1; n++ } END { if (n) printf "%d ns", int(s / n) }')
avg=$("$lp" report "$f" | awk '$NF == "ct_eval" { print $8, $9 }')
[ -n "$mean" ] && [ "$avg" = "$mean" ] && pass "report: ct_eval's Avg is the mean of its 4 calls ($avg)" ||
    fail "report: ct_eval's Avg $avg, the mean of its calls ${mean:-?}"
# The filters take one GLOB each: the file and the function after them are the positionals;
# --min-duration takes a unit.
"$lp" graph -F ct_parse "$f" ct_lex >"$tmp/graph_f.out" 2>&1 && grep -q ' (9) ct_lex$' "$tmp/graph_f.out" &&
    pass "graph -F ct_parse FILE ct_lex: -F takes its GLOB only" || { fail "graph -F GLOB FILE FUNC:"; sed 's/^/    /' "$tmp/graph_f.out"; }
diff <("$lp" replay --min-duration 10ms "$f" 2>&1) <("$lp" replay --min-duration 10000000 "$f" 2>&1) >/dev/null &&
    pass "--min-duration 10ms is 10000000 ns" || fail "--min-duration 10ms: $("$lp" replay --min-duration 10ms "$f" 2>&1 | head -3)"

# A C++ name keeps its own parameter list: no "()" after it.
"${launch[@]}" "$lp" trace -o "$tmp/cxx.lptrace" 'shop::Cart::total*' -- "$bin/tests/lp_typed_target" >/dev/null 2>&1
"$lp" replay "$tmp/cxx.lptrace" | grep -q '| shop::Cart::total() const; = 6.75$' &&
    pass "replay: a C++ name as it is (shop::Cart::total() const)" || fail "replay of a C++ name: $("$lp" replay "$tmp/cxx.lptrace" 2>&1 | tail -2)"

out=$("$lp" replay --tid 1 "$f" 2>&1); rc=$?
[ "$rc" -eq 1 ] && grep -q "holds no call of thread 1" <<<"$out" && pass "replay --tid of no thread in the file: said ($out)" ||
    fail "replay --tid 1: exit $rc: $out"
out=$("$lp" replay -D 0 "$f" 2>&1); rc=$?
[ "$rc" -ne 0 ] && grep -q -- "--depth" <<<"$out" && pass "replay -D 0: refused ($(head -1 <<<"$out"))" ||
    fail "replay -D 0: exit $rc: $out"
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
