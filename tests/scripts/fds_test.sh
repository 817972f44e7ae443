#!/usr/bin/env bash
# liveprobe's descriptors stay out of the program's way (issue 31, item 5; the real-program
# suite's bug 3). A program's open() takes the lowest free number and programs count on it:
# fmtlib's tests close a descriptor and dup2() it back, daemons close every descriptor above 2
# and open their own. The agent kept /proc/self/mem and every object file it read at 4 to 9:
# they took the numbers the program's files were to get, and after a closefrom the program's
# own file could sit under liveprobe's number, where its next patch would have been written.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" fds
target=$bin/tests/lp_closefrom_target
mkdir -p "$tmp/files"
"${launch[@]}" "$target" "$tmp/files" >"$tmp/out" 2>&1 &
pid=$!
pids+=("$pid")
for _ in $(seq 100); do grep -q ready "$tmp/out" && break; sleep 0.05; done
low_fds() { ls /proc/"$1"/fd | awk '$1 >= 3 && $1 < 512' | sort -n | tr '\n' ' '; }
before=$(low_fds "$pid")

# 1. A trace comes and goes: the program's numbers below 512 are as they were.
"$lp" trace -p "$pid" --count --duration 0.5 work 'libc.so.6:usleep' >"$tmp/t1" 2>&1 || fail "trace 1: $(tail -2 "$tmp/t1")"
after=$(low_fds "$pid")
[ "$after" = "$before" ] && pass "after a trace, the program's descriptors below 512 are its own (${after:-none})" ||
    fail "after a trace, descriptors below 512: '$after', before it: '$before'"

# 2. The program closes everything above 2 and opens 16 files (3 to 18); a second trace patches
#    code again: none of the program's files is written, and the trace counts the calls.
kill -USR1 "$pid"
for _ in $(seq 100); do grep -q reopened "$tmp/out" && break; sleep 0.05; done
"$lp" trace -p "$pid" --count --duration 0.5 work 'libc.so.6:usleep' >"$tmp/t2" 2>&1
grep -qE '^work +[0-9]+$' "$tmp/t2" && pass "a trace after the program's closefrom counts its calls" ||
    fail "trace 2: $(grep -v '^\[' "$tmp/t2" | tail -3)"
bad=0
for i in $(seq 0 15); do
    [ "$(cat "$tmp/files/f$i")" = "file $i" ] || { bad=$((bad + 1)); fail "f$i holds $(stat -c %s "$tmp/files/f$i") bytes, not its own line"; }
done
[ "$bad" = 0 ] && pass "the program's 16 files hold only what it wrote"
# 3. The program closes everything above 2 during a trace, the tool's connection included: the
#    session has lost its tool, and its probes go at once (before, they stayed in the program
#    after the tool had ended, and `status` still showed the session).
"$lp" trace -p "$pid" --count --duration 2 work >"$tmp/t3" 2>&1 &
tool=$!
for _ in $(seq 100); do grep -q placed "$tmp/t3" && break; sleep 0.05; done
kill -USR1 "$pid"
wait "$tool"
st=$("$lp" status -p "$pid" 2>&1)
grep -q '^probes: 0$' <<<"$st" && grep -q '^trace session: none$' <<<"$st" &&
    pass "a closefrom during a trace ends its session: no probe is left" ||
    { fail "a closefrom during a trace:"; grep -E '^(probes|trace session)' <<<"$st" | sed 's/^/    /'; }
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" = 0 ] && grep -q "^fds: $(seq -s ' ' 3 18)\$" "$tmp/out" &&
    pass "the program ends well, with its descriptors 3 to 18 its own" ||
    fail "the program: exit $rc, $(grep '^fds' "$tmp/out")"

# 4. A program that dup2()s onto its lowest free number in a loop (fmtlib's output-redirect tests)
#    while traces come and go, and an insmod and rmmod: every dup2 takes, and the number holds
#    the program's file until the program closes it. Before the agent's work had a descriptor
#    table of its own, each connection, memfd and object file it opened took that number for an
#    instant: the program's dup2 failed with EBUSY, or its file was closed under it.
"${launch[@]}" "$bin/tests/lp_dup2_target" >"$tmp/dup2" 2>&1 &
pid=$!
pids+=("$pid")
for _ in $(seq 100); do grep -q ready "$tmp/dup2" && break; sleep 0.05; done
for i in 1 2 3 4 5 6; do
    "$lp" trace -p "$pid" --count --duration 0.2 work 'libc.so.6:dup*' 'libc.so.6:close' >"$tmp/d$i" 2>&1 ||
        fail "trace $i of the dup2 program: $(tail -2 "$tmp/d$i")"
done
"$lp" insmod -p "$pid" "$bin/samples/kretprobe_example.so" func=work >"$tmp/dins" 2>&1 || fail "insmod: $(tail -1 "$tmp/dins")"
"$lp" rmmod -p "$pid" kretprobe_example >>"$tmp/dins" 2>&1 || fail "rmmod: $(tail -1 "$tmp/dins")"
"$lp" detach -p "$pid" >>"$tmp/dins" 2>&1 || fail "detach: $(tail -1 "$tmp/dins")"
kill -TERM "$pid"
wait "$pid"
line=$(grep '^rounds' "$tmp/dup2")
read -r _ rounds _ ebusy _ other _ replaced _ closed <<<"$line"
[ "${rounds:-0}" -gt 0 ] && [ "$ebusy" = 0 ] && [ "$other" = 0 ] && [ "$replaced" = 0 ] && [ "$closed" = 0 ] &&
    pass "a program dup2()ing onto its lowest free number through 6 traces and a module: $rounds rounds, none failed" ||
    fail "the dup2 program through traces: '${line:-no line}'"

[ "$failures" -eq 0 ] && echo "fds: all passed" || echo "fds: $failures failure(s)"
[ "$failures" -eq 0 ]
