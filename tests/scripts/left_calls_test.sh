#!/usr/bin/env bash
# Calls that leave without returning are each counted as such, also the last ones before the
# program ends (a new user's trial found them lost: "4 calls (3 events read) (1 left)" of 5
# calls, 2 of which threw). The per-event summary's calls are the --count's:
#   - C++ exceptions (trace_target_cxx: lp_cx::Diver::dive throws at depth 3, caught two frames
#     up, 200 times: 600 calls, none returns); the one that threw from the catching frame's
#     call is gone when __cxa_begin_catch takes its return slot;
#   - longjmp (trace_target: lp_tr_jump, 10 rounds of 3 calls, none returns): the last round's
#     calls are reaped as the program exits;
#   - --tree closes each with "left without returning".
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" left_calls
cxx=$bin/tests/lp_trace_target_cxx plugin=$bin/tests/liblp_cxx_plugin.so

# check NAME WANT ARGS...: the summary of liveprobe trace ARGS... holds WANT.
check() {
    local name=$1 want=$2
    shift 2
    "${launch[@]}" "$lp" trace "$@" >"$tmp/out" 2>&1
    if grep -qF -- "$want" "$tmp/out"; then pass "$name: $want"
    else fail "$name: no '$want' in:"; grep '^liveprobe:' "$tmp/out" | sed 's/^/    /'; fi
}
check "exceptions, per event" "600 calls (0 events read) (600 left without returning)" \
    'lp_cx::Diver::dive*' -- "$cxx" "$plugin"
check "exceptions, --count" "600 calls" --count 'lp_cx::Diver::dive*' -- "$cxx" "$plugin"
check "longjmp, per event" "30 calls (0 events read) (30 left without returning)" lp_tr_jump -- "$bin/tests/lp_trace_target"
"${launch[@]}" "$lp" trace --tree lp_tr_jump -- "$bin/tests/lp_trace_target" >"$tmp/tree.out" 2>&1
n=$(grep -c '| .*left without returning \*/$' "$tmp/tree.out")
[ "$n" -eq 30 ] && pass "--tree: each of the 30 calls closed as left without returning" ||
    { fail "--tree: $n calls closed as left"; tail -8 "$tmp/tree.out" | sed 's/^/    /'; }
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
