#!/usr/bin/env bash
# Issue 33: a progress line on stderr while probes are placed (-p, and -- CMD) and while a large
# trace file is read (-i), only when stderr is a terminal (script(1) gives the tool a pty); with
# stderr a file, nothing of it: what tests and logs capture is as it was.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" trace_progress
command -v script >/dev/null || { echo "SKIP: no script(1) (util-linux)"; exit 0; }
ft=$bin/tests/lp_fork_target   # parent and child call in_parent and in_child, 100 calls a ms each
nap=$bin/tests/lp_nap_target
# on_tty OUT CMD...: CMD run with a terminal for its stdin, stdout and stderr, all of it in OUT.
on_tty() { local out=$1; shift; script -qfec "$(printf '%q ' "$@")" /dev/null </dev/null >"$out" 2>&1; }

# 1. -i FILE: "reading FILE: N% (X of Y)", on a terminal only, and the counts the same.
"${launch[@]}" "$lp" trace -o "$tmp/big.lptrace" in_parent in_child -- "$ft" 0 1 >"$tmp/o.out" 2>&1 ||
    fail "-o: exit $?: $(tail -2 "$tmp/o.out")"
"$lp" trace -i "$tmp/big.lptrace" --count >"$tmp/plain.out" 2>"$tmp/plain.err"
on_tty "$tmp/tty.out" "$lp" trace -i "$tmp/big.lptrace" --count
if grep -aq "liveprobe: reading $tmp/big.lptrace: [0-9]*% ([0-9.]* [KMG]\?i\?B of [0-9.]* [KMG]iB)" "$tmp/tty.out"; then
    pass "-i, stderr a terminal: $(grep -ao 'reading [^:]*: [0-9]*% ([^)]*)' "$tmp/tty.out" | head -1 | sed "s|$tmp/||")"
else fail "-i, stderr a terminal: no progress line:"; cat -v "$tmp/tty.out" | head -5 | sed 's/^/    /'; fi
grep -q 'reading' "$tmp/plain.err" && fail "-i, stderr a file: a progress line in it" || pass "-i, stderr a file: no progress line"
# The line is erased (\r, erase to the end of the line) before what follows; the counts as without it.
tr -d '\r' <"$tmp/tty.out" | sed 's/^.*\x1b\[K//' | grep -v '^$' >"$tmp/tty.clean"
diff <(grep -E '^in_|functions called' "$tmp/plain.out") <(grep -E '^in_|functions called' "$tmp/tty.clean") >/dev/null &&
    pass "-i --count on a terminal: the same counts" || { fail "-i --count on a terminal: counts differ"; cat -v "$tmp/tty.out" | head; }
# Events printed to the terminal: no progress line among them.
on_tty "$tmp/tty-lines.out" "$lp" trace -i "$tmp/big.lptrace"
grep -aq 'liveprobe: reading' "$tmp/tty-lines.out" && fail "-i printing lines on the terminal: a progress line among them" ||
    pass "-i printing lines on the terminal: no progress line among them"

# 2. -- CMD: "placing N probes in PID P: S s" while the program's agent places them, before main.
on_tty "$tmp/cmd.out" "${launch[@]}" "$lp" trace --count 'libc.so.6:*' -- "$nap" 1000 0.2
if grep -aq 'liveprobe: \(placing [0-9]* probes\|finding the functions to probe\) in PID [0-9]*: [0-9.]* s' "$tmp/cmd.out" &&
   grep -aq 'liveprobe: placed [0-9]* probes' "$tmp/cmd.out"; then
    pass "-- CMD, stderr a terminal: $(grep -ao 'placing [0-9]* probes in PID [0-9]*' "$tmp/cmd.out" | head -1)"
else fail "-- CMD, stderr a terminal: no progress line:"; cat -v "$tmp/cmd.out" | head -5 | sed 's/^/    /'; fi
"${launch[@]}" "$lp" trace --count 'libc.so.6:*' -- "$nap" 1000 0.2 >"$tmp/cmd-plain.out" 2>&1
grep -q 'placing\|finding the functions' "$tmp/cmd-plain.out" && fail "-- CMD, stderr a file: a progress line in it" ||
    pass "-- CMD, stderr a file: no progress line"

# 3. -p: "placing probes in process P: S s" while the agent places them.
"${launch[@]}" "$nap" 1000 0 >"$tmp/nap.out" 2>&1 & pid=$!; pids+=("$pid")
sleep 0.3
on_tty "$tmp/p.out" "$lp" trace -p "$pid" --count --duration 0.2 'libc.so.6:*'
if grep -aq "liveprobe: placing probes in process $pid: [0-9.]* s" "$tmp/p.out"; then
    pass "-p, stderr a terminal: $(grep -ao "placing probes in process $pid: [0-9.]* s" "$tmp/p.out" | tail -1)"
else fail "-p, stderr a terminal: no progress line:"; cat -v "$tmp/p.out" | head -5 | sed 's/^/    /'; fi
"$lp" trace -p "$pid" --count --duration 0.2 'libc.so.6:*' >"$tmp/p-plain.out" 2>&1
grep -q "placing probes in process $pid:" "$tmp/p-plain.out" && fail "-p, stderr a file: a progress line in it" ||
    pass "-p, stderr a file: no progress line"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
