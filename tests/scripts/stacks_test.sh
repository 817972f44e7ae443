#!/usr/bin/env bash
# trace --stacks and --folded (issue 34, item 2): the user stack at each event, walked by the
# call frame information (tests/programs/nap_target.c is built -O2: no frame pointers), through
# return probes (a traced caller's return slot holds the trampoline), counted per stack,
# folded for flame graph tools, kept in trace files and named after the process is gone. On
# tests/programs/calltree_target.c, whose calls are known (tests/golden/stacks_*.txt; frames'
# offsets masked: the compiler's).
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" stacks
target=$bin/tests/lp_calltree_target

# golden NAME WHAT FILE: FILE masked against tests/golden/stacks_NAME.txt.
golden() {
    sed -E 's/\+0x[0-9a-f]+/+OFF/g' "$3" >"$tmp/$1.masked"
    local want=$LIVEPROBE_SOURCE_DIR/tests/golden/stacks_$1.txt
    [ -n "${LIVEPROBE_UPDATE_GOLDEN:-}" ] && cp "$tmp/$1.masked" "$want"
    if diff -u "$want" "$tmp/$1.masked" >"$tmp/$1.diff"; then pass "$2 (stacks_$1.txt)"
    else fail "$2: differs from stacks_$1.txt:"; sed 's/^/    /' "$tmp/$1.diff"; fi
}
lp_trace() { "${launch[@]}" "$lp" trace "$@"; }

lp_trace --folded 'ct_*' -- "$target" >"$tmp/folded.out" 2>"$tmp/folded.err" || { fail "--folded: exit $?"; cat "$tmp/folded.err"; }
golden folded "--folded: every call's stack, both threads, recursion and all" "$tmp/folded.out"

# Through return probes: ct_lex's stacks are the same whether its callers are traced or not.
lp_trace --folded ct_lex -- "$target" >"$tmp/alone.out" 2>/dev/null
grep ';ct_lex ' "$tmp/folded.out" >"$tmp/with_callers.out"
if diff -u "$tmp/alone.out" "$tmp/with_callers.out" >"$tmp/through.diff" && [ -s "$tmp/alone.out" ]; then
    pass "through return probes: ct_lex's stacks, its callers traced or not, are the same"
else fail "ct_lex's stacks differ when its callers are traced:"; sed 's/^/    /' "$tmp/through.diff"; fi

# -O2, no frame pointers: the CFI's walk, through a recursion 4 deep in a thread.
lp_trace --folded nap -- "$bin/tests/lp_nap_target" 1000 1 1 3 >"$tmp/nap.out" 2>&1
grep -Eq '^_start;__libc_start_main;__libc_start_call_main;main;nap [1-9][0-9]*$' "$tmp/nap.out" &&
    grep -Eq '^clone3;start_thread;worker;nap_rec;nap_rec;nap_rec;nap_rec;nap [1-9][0-9]*$' "$tmp/nap.out" &&
    [ "$(grep -cE '^[^ ]+ [0-9]+$' "$tmp/nap.out")" -eq 2 ] &&
    pass "-O2 without frame pointers: main's naps and the worker's through nap_rec 4 deep" ||
    { fail "nap_target's stacks:"; sed 's/^/    /' "$tmp/nap.out"; }

# A program that ends at once, in a call that never returns: its frames named all the same
# (the mappings come with the session, not read later), and the frame of the call whose return
# address is the next function's first byte named by the call.
lp_trace --folded p:nr_bail -- "$bin/tests/lp_noreturn_target" >"$tmp/nr.out" 2>/dev/null
grep -qx '_start;__libc_start_main;__libc_start_call_main;main;nr_fail;nr_bail 1' "$tmp/nr.out" &&
    pass "a program that ends at once, in a noreturn call: its stack named, nr_fail's frame by its call" ||
    { fail "noreturn_target's stack:"; sed 's/^/    /' "$tmp/nr.out"; }
nm "$bin/tests/lp_noreturn_target" | grep -q ' nr_next$' || fail "noreturn_target has no nr_next"

# A signal handler's stack ends at the signal frame (libc's restorer), with no address of the
# stack itself taken for a frame after it (trace_target raises SIGUSR1 three times).
lp_trace --stacks lp_sg_handler -- "$bin/tests/lp_trace_target" >"$tmp/sig.out" 2>/dev/null
frames=$(grep -c '^        ' "$tmp/sig.out")
if [ "$frames" -gt 0 ] && ! grep -q '^        0x7ff' "$tmp/sig.out"; then
    pass "a signal handler's stack: $((frames / 3)) frames each, none of them the stack"
else fail "a signal handler's stack:"; grep -A4 -m 1 lp_sg_handler "$tmp/sig.out" | sed 's/^/    /'; fi

# Each event with its frames: a p: probe at an entry, a call at its return.
lp_trace --stacks p:ct_emit ct_neg -- "$target" >"$tmp/events.out" 2>&1
grep -v '^liveprobe:' "$tmp/events.out" | sed -E 's/^\[ *[0-9.]+\] [0-9]+ /[T] TID /; s/took [0-9]+ ns/took D ns/' >"$tmp/events.lines"
golden events "--stacks: an instruction's hit and a call's return, each with its frames" "$tmp/events.lines"
lp_trace --stacks --stack-depth 2 --json ct_lex -- "$target" >"$tmp/json.out" 2>/dev/null
n=$(grep -c '"stack":\["ct_lex","ct_parse+0x[0-9a-f]*"\]' "$tmp/json.out")
[ "$n" -eq 9 ] && pass "--json --stack-depth 2: each of the 9 events' stack member, two frames" ||
    { fail "--json --stack-depth 2: $n events with two frames:"; head -3 "$tmp/json.out" | sed 's/^/    /'; }
lp_trace --count --stacks ct_lex -- "$target" >"$tmp/count.out" 2>/dev/null
golden count "--count --stacks: ct_lex's calls per stack, a frame a line" "$tmp/count.out"

# A trace file keeps the frames and the mappings: named after the process is gone.
lp_trace -o "$tmp/s.lptrace" --stacks ct_lex -- "$target" >/dev/null 2>&1
"$lp" report --folded "$tmp/s.lptrace" >"$tmp/file.out" 2>&1
if diff -u "$tmp/alone.out" "$tmp/file.out" >"$tmp/file.diff"; then pass "report --folded of a trace file: its stacks, named after the process ended"
else fail "report --folded of the file differs from trace --folded:"; sed 's/^/    /' "$tmp/file.diff"; fi
"$lp" trace -i "$tmp/s.lptrace" 2>/dev/null | grep -c '^        ct_parse+0x' | grep -qx 9 &&
    pass "trace -i: each event's frames, named" || fail "trace -i of the file: $("$lp" trace -i "$tmp/s.lptrace" 2>&1 | head -8)"

"$lp" trace -i "$tmp/s.lptrace" --folded >"$tmp/ifolded.out" 2>/dev/null
diff -u "$tmp/alone.out" "$tmp/ifolded.out" >/dev/null && pass "trace -i FILE --folded: the file's stacks, folded" ||
    { fail "trace -i --folded:"; sed 's/^/    /' "$tmp/ifolded.out"; }
out=$("$lp" trace -i "$tmp/s.lptrace" --filter 'arg0 > 1' 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q "decided while tracing" <<<"$out" && pass "trace -i FILE --filter: refused ($out)" ||
    fail "trace -i --filter: exit $rc: $out"

for args in "--stacks --tree ct_lex" "--folded --hist ct_lex" "--count --by tid --stacks ct_lex" "--stacks --stack-depth 0 ct_lex" "--stacks --stack-depth 128 ct_lex"; do
    out=$(eval "\"$lp\" trace $args -- \"$target\"" 2>&1); rc=$?
    [ "$rc" -ne 0 ] && [ "$rc" -ne 30 ] && pass "trace $args: refused: $(head -1 <<<"$out")" || fail "trace $args: exit $rc: $out"
done
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
