#!/usr/bin/env bash
# Issue 33: a forked child's events under the child's own pid, in every output. A program that
# forks (tests/programs/fork_golden_target.c: its calls in one order every run) is traced with
# --json and --chrome, and to a trace file (-o) shown again with -i; each whole output is
# compared with a golden file (tests/golden/fork_*) after tests/support/mask_trace.py masked its
# times, pids and tids (PID1, TID1, ... in order of appearance: the golden files show which
# events share a process or a thread).
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" trace_fork_golden
target=$bin/tests/lp_fork_golden_target
golden=$LIVEPROBE_SOURCE_DIR/tests/golden
mask=$LIVEPROBE_SOURCE_DIR/tests/support/mask_trace.py
specs=(before_fork in_child in_thread after_wait)

# same WHAT GOLDEN FILE: FILE, masked, is GOLDEN.
same() {
    python3 "$mask" "$3" >"$3.masked"
    if diff -u "$golden/$2" "$3.masked" >"$3.diff"; then pass "$1"
    else fail "$1: differs from tests/golden/$2:"; sed 's/^/    /' "$3.diff" | head -40; fi
}
# started FILE: the pid the tool started (its "started PID N" line).
started() { sed -n 's/^liveprobe: started PID \([0-9]*\)$/\1/p' "$1"; }

# 1. --json: every event with its process's pid, the child's its own.
"${launch[@]}" "$lp" trace --json "${specs[@]}" -- "$target" >"$tmp/json.out" 2>"$tmp/json.err"; rc=$?
[ "$rc" -eq 0 ] || { fail "--json: exit $rc"; sed 's/^/    /' "$tmp/json.err"; }
grep '^{' "$tmp/json.out" >"$tmp/json.events"
same "--json: a forked child's events carry its pid" fork_events.json "$tmp/json.events"
first=$(head -1 "$tmp/json.events" | grep -o '"pid":[0-9]*' | cut -d: -f2)
[ -n "$first" ] && [ "$first" = "$(started "$tmp/json.err")" ] && pass "--json: PID1 is the program started" ||
    fail "--json: the first event's pid '$first', the program started $(started "$tmp/json.err")"

# 2. --chrome: the child's events under its pid, with a process_name event of its own.
"${launch[@]}" "$lp" trace --chrome "$tmp/chrome.json" "${specs[@]}" -- "$target" >"$tmp/chrome.out" 2>&1; rc=$?
[ "$rc" -eq 0 ] || { fail "--chrome: exit $rc"; sed 's/^/    /' "$tmp/chrome.out"; }
same "--chrome: a forked child is a process of its own" fork_chrome.json "$tmp/chrome.json"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$tmp/chrome.json" && pass "--chrome: valid JSON" ||
    fail "--chrome: not valid JSON"

# 3. -o FILE, then -i FILE: the file keeps each event's process (the -i output is the live one's).
"${launch[@]}" "$lp" trace -o "$tmp/t.lptrace" "${specs[@]}" -- "$target" >"$tmp/o.out" 2>&1; rc=$?
[ "$rc" -eq 0 ] || { fail "-o: exit $rc"; sed 's/^/    /' "$tmp/o.out"; }
"$lp" trace -i "$tmp/t.lptrace" --json >"$tmp/ij.out" 2>"$tmp/ij.err"
same "-o FILE, -i FILE --json: the child's pid kept in the file" fork_events.json "$tmp/ij.out"
"$lp" trace -i "$tmp/t.lptrace" --chrome "$tmp/ichrome.json" >"$tmp/ic.out" 2>&1
same "-o FILE, -i FILE --chrome: the child a process of its own" fork_chrome_file.json "$tmp/ichrome.json"

# 4. The text output: a thread's id says its process (a child's first thread has the child's
# pid as its id); the child's thread under its own id.
"$lp" trace -i "$tmp/t.lptrace" >"$tmp/it.out" 2>&1
tids=$(sed -n 's/^\[ *[0-9.]*\] \([0-9]*\) .*/\1/p' "$tmp/it.out" | uniq | tr '\n' ' ')
[ "$(wc -w <<<"$tids")" -eq 5 ] && [ "$(cut -d' ' -f1 <<<"$tids")" = "$(cut -d' ' -f5 <<<"$tids")" ] &&
    [ "$(cut -d' ' -f2 <<<"$tids")" = "$(cut -d' ' -f4 <<<"$tids")" ] && pass "-i FILE: the text lines, each under its thread ($tids)" ||
    { fail "-i FILE, text: threads $tids"; sed 's/^/    /' "$tmp/it.out"; }

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
