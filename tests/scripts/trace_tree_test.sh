#!/usr/bin/env bash
# liveprobe trace --tree (issue 34, item 1): the call tree drawn as it happens.
#  1. On tests/programs/calltree_target.c, each thread's lines are replay's of a trace file of
#     the same program: the whole output compared with tests/golden/views_replay.txt (durations
#     and thread ids masked, each thread's lines together, in their order).
#  2. Calls that longjmp out (trace_target's lp_tr_jump) are closed as having left, and the
#     next round starts at the same depth (tests/golden/tree_jump.txt).
#  3. A call in flight shows its block before it returns, and a trace ended (--duration) with a
#     call in flight leaves the program running, every value right.
#  4. --tree with an output it cannot draw is refused.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" tree

# by_thread FILE: the tree lines grouped by thread, the threads in the order of their first
# lines (not of their ids, which wrap), each thread's lines in their order; masked as
# views_test.sh masks them.
by_thread() {
    grep -E '^ *([0-9.]+ (ns|us|ms|  s))? *\[ *[0-9]+\] \|' "$1" |
        awk '{ match($0, /\[ *[0-9]+\]/); t = substr($0, RSTART + 1, RLENGTH - 2) + 0
               if (!(t in first)) first[t] = NR
               print first[t] "\t" NR "\t" $0 }' |
        sort -t$'\t' -k1,1n -k2,2n | cut -f3- |
        sed -E 's/ *[0-9]+(\.[0-9]+)? (ns|us|ms|  s)/ D/g; s/\[ *[0-9]+\] \|/[TID] |/'
}

# leaves: a block with nothing inside (`f() {` then its `}` at once) written as the leaf it is
# (`f(); = V`). The printer opens a block for a call still running after 100 ms; a target the
# machine's load kept off the CPU that long gets one for a call that is a leaf, with the same
# meaning. Both sides of each comparison go through it.
leaves() {
    awk 'function flush() { if (held != "") print held; held = "" }
         { if (held != "") {
               bar = index($0, "|"); hbar = index(held, "|")
               close_ind = substr($0, bar + 1); sub(/\}.*/, "", close_ind)
               call = substr(held, hbar + 1); open_ind = call; sub(/[^ ].*/, "", open_ind)
               sub(/^ +/, "", call); sub(/ \{$/, "", call)
               rest = substr($0, index($0, "}") + 1)
               if (close_ind == open_ind && close_ind !~ /[^ ]/) {
                   if (rest ~ /^ \/\* .*: left without returning \*\/$/) {
                       print substr($0, 1, bar) open_ind call "; /* left without returning */"; held = ""; next }
                   if (rest ~ /^ \/\* [^*]* \*\/$/) {  # no value (void)
                       print substr($0, 1, bar) open_ind call ";"; held = ""; next }
                   if (rest ~ /^ = .* \/\* [^*]* \*\/$/) {
                       sub(/ \/\* [^*]* \*\/$/, "", rest); print substr($0, 1, bar) open_ind call ";" rest; held = ""; next }
               }
           }
           flush()
           if ($0 ~ /\| .* \{$/) { held = $0; next }
           print }
         END { flush() }' "$1"
}

"${launch[@]}" "$lp" trace --tree 'ct_*' main -- "$bin/tests/lp_calltree_target" >"$tmp/tree.out" 2>"$tmp/tree.err" ||
    { fail "trace --tree: exit $?"; sed 's/^/    /' "$tmp/tree.err"; }
{ echo "# DURATION    TID     FUNCTION"; by_thread "$tmp/tree.out"; } >"$tmp/tree.masked"
if diff -u <(leaves "$LIVEPROBE_SOURCE_DIR/tests/golden/views_replay.txt") <(leaves "$tmp/tree.masked") >"$tmp/tree.diff"; then
    pass "trace --tree: each thread's tree as replay draws it (views_replay.txt)"
else fail "trace --tree differs from replay's views_replay.txt:"; sed 's/^/    /' "$tmp/tree.diff"; fi
grep -q '26 calls (26 events read)' "$tmp/tree.err" && pass "trace --tree: the summary counts each call once" ||
    fail "trace --tree: the summary: $(grep 'functions traced' "$tmp/tree.err")"

"${launch[@]}" "$lp" trace --tree lp_tr_jump lp_tr_square -- "$bin/tests/lp_trace_target" >"$tmp/jump.out" 2>"$tmp/jump.err"
by_thread "$tmp/jump.out" >"$tmp/jump.masked"
[ -n "${LIVEPROBE_UPDATE_GOLDEN:-}" ] && cp "$tmp/jump.masked" "$LIVEPROBE_SOURCE_DIR/tests/golden/tree_jump.txt"
if diff -u <(leaves "$LIVEPROBE_SOURCE_DIR/tests/golden/tree_jump.txt") <(leaves "$tmp/jump.masked") >"$tmp/jump.diff"; then
    pass "trace --tree: calls that longjmp out are closed, each round at depth 0 (tree_jump.txt)"
else fail "trace --tree of lp_tr_jump differs from tree_jump.txt:"; sed 's/^/    /' "$tmp/jump.diff"; fi

# Naps of 400 ms: a nap's block opens while it sleeps; --duration ends the trace with one in flight.
"${launch[@]}" "$bin/tests/lp_nap_target" 400000 >"$tmp/nap.out" 2>&1 &
pid=$!
pids+=("$pid")
for _ in $(seq 500); do grep -q '^ready$' "$tmp/nap.out" 2>/dev/null && break; sleep 0.01; done
"$lp" trace --tree -p "$pid" --duration 1.5 nap >"$tmp/live.out" 2>"$tmp/live.err" &
tr=$!
# While it runs: a block opened, not closed yet, shows up within a nap.
seen=""
for _ in $(seq 150); do
    if tail -1 "$tmp/live.out" 2>/dev/null | grep -Eq '\| nap\(\) \{$'; then seen=1; break; fi
    sleep 0.01
done
wait "$tr"; rc=$?
[ -n "$seen" ] && pass "trace --tree: a nap in flight shows as an open block ($(grep -c 'nap() {' "$tmp/live.out") opened)" ||
    { fail "trace --tree: no open block seen while a nap slept (exit $rc):"; sed 's/^/    /' "$tmp/live.out"; }
grep -Eq '^ *[0-9.]+ ms \[ *[0-9]+\] \| \} = 400000 /\* nap \*/$' "$tmp/live.out" &&
    pass "trace --tree: the block closed with the value and duration" ||
    { fail "trace --tree: no block closed:"; sed 's/^/    /' "$tmp/live.out"; }
kill -TERM "$pid"
wait "$pid"; rc=$?
[ "$rc" -eq 0 ] && grep -Eq '^naps [1-9][0-9]* bad 0$' "$tmp/nap.out" && pass "the program: $(tail -1 "$tmp/nap.out")" ||
    { fail "the program exited $rc:"; sed 's/^/    /' "$tmp/nap.out"; }

# A C++ name keeps its own parameter list in every line, as replay prints it.
"${launch[@]}" "$lp" trace --tree 'lp_cx::Diver::dive*' -- "$bin/tests/lp_trace_target_cxx" "$bin/tests/liblp_cxx_plugin.so" \
    >"$tmp/cxx.out" 2>&1
grep -q '| lp_cx::Diver::dive(int) {$' "$tmp/cxx.out" && ! grep -q ')()' "$tmp/cxx.out" &&
    pass "trace --tree: a C++ name as replay prints it (lp_cx::Diver::dive(int) {)" ||
    { fail "trace --tree of a C++ name:"; grep -m 3 dive "$tmp/cxx.out" | sed 's/^/    /'; }

out=$("$lp" trace --tree --count nap -- /bin/true 2>&1); rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--tree draws calls as they begin" <<<"$out" && pass "--tree --count: refused ($out)" ||
    fail "--tree --count: exit $rc: $out"
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
