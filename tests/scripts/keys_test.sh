#!/usr/bin/env bash
# trace --by KEY, --hist-of EXPR and --interval (issue 34, item 4): aggregates keyed by an
# argument (by name and by position), the caller, the thread's name and id; value histograms;
# with --filter; printed and started again every interval. On tests/programs/calltree_target.c,
# whose calls are known: whole outputs compared with tests/golden/keys_*.txt (callers' offsets
# masked: they are the compiler's). LIVEPROBE_UPDATE_GOLDEN=1 rewrites them.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" keys
target=$bin/tests/lp_calltree_target

# golden NAME WHAT ARGS...: liveprobe trace ARGS... -- target, its stdout against keys_NAME.txt.
golden() {
    local name=$1 what=$2
    shift 2
    "${launch[@]}" "$lp" trace "$@" -- "$target" >"$tmp/$name.out" 2>"$tmp/$name.err" ||
        { fail "$name: exit $?"; sed 's/^/    /' "$tmp/$name.err"; }
    sed -E 's/\+0x[0-9a-f]+\]/+OFF]/' "$tmp/$name.out" >"$tmp/$name.masked"
    local want=$LIVEPROBE_SOURCE_DIR/tests/golden/keys_$name.txt
    [ -n "${LIVEPROBE_UPDATE_GOLDEN:-}" ] && cp "$tmp/$name.masked" "$want"
    if diff -u "$want" "$tmp/$name.masked" >"$tmp/$name.diff"; then pass "$what (keys_$name.txt)"
    else fail "$what: differs from keys_$name.txt:"; sed 's/^/    /' "$tmp/$name.diff"; fi
}

golden by_param "--count --by i: ct_lex's calls by its parameter, the most first" --count --by i ct_lex
golden by_caller "--count --by caller: each function's calls by the call site" --count --by caller 'ct_*'
golden by_comm "--count --by comm: by the thread's name (the worker names itself)" --count --by comm 'ct_*'
golden hist_of "--hist-of 'i * 100': a histogram of a value" --hist-of 'i * 100' ct_lex
golden filtered "--count --by i --filter 'i > 2': the filter first, then the keys" --count --by i --filter 'i > 2' ct_lex
golden negative "--hist-of retval: a negative value said beside the buckets" --hist-of retval ct_neg ct_emit

"${launch[@]}" "$lp" trace --count --by arg0 ct_lex -- "$target" >"$tmp/pos.out" 2>&1
diff <(grep '^@' "$tmp/pos.out") <(grep '^@' "$tmp/by_param.out") >/dev/null &&
    pass "--by arg0 counts as --by i (by position, by name)" || fail "--by arg0: $(grep '^@' "$tmp/pos.out" | tr '\n' ' ')"
"${launch[@]}" "$lp" trace --hist --by tid ct_parse -- "$target" >"$tmp/tid.out" 2>&1
calls=$(grep -o '^@ns\[ct_parse, [0-9]*\]: [0-9]* calls' "$tmp/tid.out" | awk '{ print $3 }' | sort | tr '\n' ' ')
[ "$calls" = "1 2 " ] && pass "--hist --by tid: ct_parse's 2 calls in main's thread, 1 in the worker's" ||
    { fail "--hist --by tid: calls per thread '$calls':"; sed 's/^/    /' "$tmp/tid.out"; }

# trace -i FILE --count keeps --tid's thread and --min-duration's calls only.
"${launch[@]}" "$lp" trace -o "$tmp/k.lptrace" 'ct_*' -- "$target" >/dev/null 2>&1
worker=$("$lp" replay "$tmp/k.lptrace" | sed -nE 's/.*\[ *([0-9]+)\] \| ct_worker\(\) \{/\1/p')
got=$("$lp" trace -i "$tmp/k.lptrace" --count --tid "$worker" 2>/dev/null | grep -c '^ct_')
long=$("$lp" trace -i "$tmp/k.lptrace" --count --min-duration 10ms 2>/dev/null | awk '/^ct_/ { print $1 }')
[ "$got" -eq 3 ] && [ "$long" = ct_wait ] && pass "trace -i --count: --tid (the worker's 3 functions) and --min-duration (ct_wait)" ||
    fail "trace -i --count --tid $worker: $got functions; --min-duration 10ms: '$long'"

# --interval: naps of 100 ms for 1.5 s, printed every 0.4 s: each interval's count is its own,
# and together they are the summary's.
"${launch[@]}" "$bin/tests/lp_nap_target" 100000 >"$tmp/nap.out" 2>&1 &
pid=$!
pids+=("$pid")
for _ in $(seq 500); do grep -q '^ready$' "$tmp/nap.out" 2>/dev/null && break; sleep 0.01; done
"$lp" trace --count --interval 0.4 --duration 1.5 -p "$pid" nap >"$tmp/int.out" 2>"$tmp/int.err"
stamps=$(grep -cE '^[0-9]{2}:[0-9]{2}:[0-9]{2}$' "$tmp/int.out")
sum=$(awk '$1 == "nap" { s += $2 } END { print s + 0 }' "$tmp/int.out")
total=$(sed -nE 's/.* ([0-9]+) calls.*/\1/p' "$tmp/int.err")
most=$(awk '$1 == "nap" && $2 > m { m = $2 } END { print m + 0 }' "$tmp/int.out")
[ "$stamps" -ge 4 ] && [ "$sum" -eq "$total" ] && [ "$most" -le 6 ] &&
    pass "--interval 0.4: $stamps intervals of at most $most naps, adding up to the $total calls" ||
    { fail "--interval: $stamps intervals, $sum naps in them, $total calls, $most the most:"; sed 's/^/    /' "$tmp/int.out"; }
kill -TERM "$pid"; wait "$pid"

# Mistakes, refused before anything runs.
for args in "--by i ct_lex" "--count --by 'i +' ct_lex" "--count --by i --json ct_lex" \
    "--count --by retval p:ct_lex" "--interval 1 ct_lex" "--hist-of 'nope(' ct_lex"; do
    out=$(eval "\"$lp\" trace $args -- \"$target\"" 2>&1); rc=$?
    [ "$rc" -eq 2 ] && pass "trace $args: refused: $(head -1 <<<"$out")" || fail "trace $args: exit $rc: $out"
done
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
