#!/usr/bin/env bash
# Ending a session never harms the program (issue 30): a program whose loop is nearly always
# inside `nap` (tests/programs/nap_target.c) traced with -p in each mode and ended by Ctrl-C,
# by a tool killed with SIGKILL or SIGHUP, and a kretprobe module loaded on nap and removed. After each, the program lives, and at the
# end every nap it took returned its own value.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" detach
target=$bin/tests/lp_nap_target
samples=$bin/samples

# start NAME [US]: the target in the background ($pid), its output in $tmp/NAME.out; naps of US
# microseconds (1000).
start() {
    local name=$1
    "${launch[@]}" "$target" "${2:-1000}" >"$tmp/$name.out" 2>&1 &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 500); do grep -q '^ready$' "$tmp/$name.out" 2>/dev/null && return 0; sleep 0.01; done
    fail "$name: the target did not start"; return 1
}
# finish NAME: SIGTERM to the target; it must exit 0 with every nap's value right.
finish() {
    local name=$1 rc
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1000); do kill -0 "$pid" 2>/dev/null || break; sleep 0.01; done
    wait "$pid"; rc=$?
    if [ "$rc" -eq 0 ] && grep -Eq '^naps [1-9][0-9]* bad 0$' "$tmp/$name.out"; then pass "$name: $(tail -1 "$tmp/$name.out")"
    else fail "$name: the target exited $rc, output:"; sed 's/^/    /' "$tmp/$name.out"; fi
}
# alive NAME WHAT: the target still runs after WHAT.
alive() {
    sleep 0.3
    if kill -0 "$pid" 2>/dev/null; then pass "$1: the target lives after $2"; return 0; fi
    fail "$1: the target died after $2"; return 1
}
# interrupted NAME TRACE-ARGS...: traces the target for a second, then Ctrl-C (SIGINT) to the tool.
interrupted() {
    local name=$1 tr; shift
    "$lp" trace -p "$pid" "$@" >"$tmp/$name.trace" 2>&1 &
    tr=$!
    sleep 1.5
    kill -INT "$tr"
    wait "$tr"; rc=$?
    [ "$rc" -eq 0 ] && grep -q '^liveprobe: [0-9]* functions traced' "$tmp/$name.trace" ||
        { fail "$name: the tool ended with status $rc after Ctrl-C:"; tail -3 "$tmp/$name.trace" | sed 's/^/    /'; }
    alive "$name" "Ctrl-C of 'trace $*'"
}

# 1. The issue's first reproducer, then the same in each mode: Ctrl-C with nap in flight.
start events && interrupted events nap && finish events
start hist && interrupted hist --hist nap && finish hist
start count && interrupted count --count nap && finish count
start retprobe && interrupted retprobe 'r:nap ret=$retval:s32' && finish retprobe
start file && interrupted file -o "$tmp/nap.lptrace" nap && finish file
start all && interrupted all '*' && interrupted all-hist --hist '*' && finish all
# Several sessions in turn on one process, each ended with a call in flight.
start turns && for i in 1 2 3; do interrupted "turns-$i" --hist nap || break; done && finish turns

# A thread blocked inside a probed call (naps of 3 s: the second starts under the probe) when
# its trace ends: the removed probe's record stays while the call is in flight, and status
# counts it.
if start blocked 3000000; then
    "$lp" trace -p "$pid" --hist nap >"$tmp/blocked.trace" 2>&1 & tr=$!
    sleep 4
    kill -INT "$tr"; wait "$tr"
    "$lp" status -p "$pid" >"$tmp/blocked.status" 2>&1
    grep -q '^removed return probes still held by threads (a call in flight, or a thread.s cache until its next return probe): 1$' "$tmp/blocked.status" &&
        pass "status counts the removed probe a blocked call still holds" ||
        { fail "status with a call in flight after the trace:"; sed 's/^/    /' "$tmp/blocked.status"; }
    kill -9 "$pid"; wait "$pid" 2>/dev/null
fi

# 2. A tool that dies: SIGKILL (at random moments, placement included) and SIGHUP (its ssh
# session dropped). The agent removes the session's probes by itself and says so in its log.
# no_probes NAME: the agent reports no probe and no session (10 s at most).
no_probes() {
    for _ in $(seq 200); do
        "$lp" status -p "$pid" >"$tmp/$1.status" 2>&1
        grep -q '^probes: 0$' "$tmp/$1.status" && grep -q '^trace session: none$' "$tmp/$1.status" && return 0
        sleep 0.05
    done
    return 1
}
killed() {
    local name=$1 sig=$2 after=$3 tr; shift 3
    "$lp" trace -p "$pid" "$@" >"$tmp/$name.trace" 2>&1 &
    tr=$!
    sleep "$after"
    kill "-$sig" "$tr"
    wait "$tr" 2>/dev/null
    alive "$name" "SIG$sig of 'trace $*' after $after s" || return 1
    if no_probes "$name"; then pass "$name: the agent removed the session's probes"
    else fail "$name: probes left after SIG$sig of the tool:"; sed 's/^/    /' "$tmp/$name.status"; fi
}
if start killed; then
    killed kill-1 KILL 1.5 nap
    grep -q "liveprobe: the trace session's tool (pid [0-9]*) is gone without stopping it: removed its 1 probes" <<<"$("$lp" dmesg -p "$pid" 2>/dev/null)" &&
        pass "killed: the agent's log says it removed the dead tool's probes" || fail "killed: no line in the agent's log"
    killed hup HUP 1.5 --hist nap
    for i in $(seq 6); do
        killed "kill-random-$i" KILL "0.$((RANDOM % 10))$((RANDOM % 10))" --hist '*' || break
    done
    finish killed
fi

# 3. liveprobe detach: refused while a tool's session is live, then --force (that tool ends and
# says why); it removes the session and every module, stops the agent's thread and closes its
# door; status then says there is no agent; attach and trace work again; no zombie child.
threads() { ls "/proc/$pid/task" | wc -l; }
fds() { ls "/proc/$pid/fd" | wc -l; }
if start detach; then
    before=$(threads) fds_before=$(fds)
    "$lp" trace -p "$pid" --hist nap >"$tmp/detach.trace" 2>&1 & tr=$!
    sleep 1.5
    "$lp" insmod -p "$pid" "$samples/kretprobe_example.so" func=nap >/dev/null 2>&1
    out=$("$lp" detach -p "$pid" 2>&1); rc=$?
    [ "$rc" -eq 1 ] && grep -q "a trace session of tool pid $tr (1 probes) is live: end it, or detach with --force" <<<"$out" &&
        pass "detach refused while a session is live: $out" || fail "detach during a session: exit $rc: $out"
    out=$("$lp" detach -p "$pid" --force 2>&1); rc=$?
    if [ "$rc" -eq 0 ] && grep -q "removed the trace session (1 probes, of tool pid $tr)" <<<"$out" &&
        grep -q "removed module kretprobe_example" <<<"$out" && grep -q "agent stopped, its door closed" <<<"$out"; then
        pass "detach --force: $(echo "$out" | tr '\n' ' ')"
    else fail "detach --force: exit $rc:"; echo "$out" | sed 's/^/    /'; fi
    for _ in $(seq 100); do kill -0 "$tr" 2>/dev/null || break; sleep 0.05; done
    if kill -0 "$tr" 2>/dev/null; then fail "the tool whose session was detached runs on"; kill "$tr"
    else grep -q "the session was ended in process $pid (liveprobe detach" "$tmp/detach.trace" &&
        pass "the detached session's tool ended and said why" || { fail "the detached tool's output:"; cat "$tmp/detach.trace"; }
    fi
    wait "$tr" 2>/dev/null
    alive detach "detach --force"
    [ "$(threads)" -eq "$before" ] && pass "detach: the agent's thread is gone ($(threads) threads, as before attaching)" ||
        fail "detach: $(threads) threads, $before before attaching"
    ls -l "/proc/$pid/fd" | grep -q 'socket:' && fail "detach: a socket is still open in the process" ||
        pass "detach: no socket left in the process"
    [ "$(fds)" -eq "$fds_before" ] && pass "detach: no descriptor left ($(fds), as before attaching)" ||
        { fail "detach: $(fds) descriptors, $fds_before before attaching:"; ls -l "/proc/$pid/fd" | sed 's/^/    /'; }
    out=$("$lp" status -p "$pid" 2>&1)
    grep -q "^liveprobe: no agent in process $pid " <<<"$out" && pass "status after detach: $out" || fail "status after detach: $out"
    if "$lp" attach -p "$pid" >/dev/null 2>&1 && "$lp" trace -p "$pid" --duration 0.5 --hist nap >"$tmp/again.out" 2>&1 &&
        grep -q '^@ns\[nap\]: [0-9]* calls$' "$tmp/again.out"; then pass "attach and trace again after detach"
    else fail "attach and trace after detach:"; cat "$tmp/again.out"; fi
    out=$("$lp" detach -p "$pid" 2>&1) && grep -q "agent stopped" <<<"$out" && pass "detach with nothing placed: $out" ||
        fail "detach with nothing placed: $out"
    zombies=$(ps --ppid "$pid" -o stat= | grep -c Z)
    [ "$zombies" -eq 0 ] && pass "no zombie child left" || fail "$zombies zombie children of the target"
    finish detach
fi

# 4. An agent leaves no file behind: a killed process's agent leaves nothing in the runtime
# directory (its door is a socket pair, gone with the process).
if start victim; then
    "$lp" attach -p "$pid" >/dev/null 2>&1
    victim=$pid
    kill -9 "$victim"; wait "$victim" 2>/dev/null
    left=$(find "$LIVEPROBE_RUNTIME_DIR" -name "*$victim*" 2>/dev/null)
    [ -z "$left" ] && pass "a killed process leaves no file of its agent" || fail "a killed process left: $left"
fi

# 5. trace -- CMD: the program stays in the terminal's foreground process group. Ctrl-C typed
# in a terminal (script(1) gives it one) reaches the program once, which handles it and runs on,
# traced to its end: every nap counted. SIGTERM sent to the tool is passed on. --duration stops
# the tracing and the program runs its time. A tool killed with SIGKILL leaves the program
# running, its probes removed by its agent. (exec: script runs $SHELL -c, and a dash (CI's
# /bin/sh) that waits for the tool dies of the Ctrl-C itself, as no interactive shell would.)
prog() { echo "$target 1000 $1"; }
{ sleep 1.5; printf '\003'; sleep 5; } | script -qec "exec $lp trace --hist nap -- $(prog 3)" /dev/null >"$tmp/tty.out" 2>&1; rc=$?
tr -d '\r' <"$tmp/tty.out" >"$tmp/tty.txt"
naps=$(sed -n 's/.*naps \([0-9]*\) bad 0 sigint 1 ran its time$/\1/p' "$tmp/tty.txt")
if [ "$rc" -eq 0 ] && [ -n "$naps" ] && grep -q "^@ns\[nap\]: $naps calls$" "$tmp/tty.txt"; then
    pass "trace -- CMD: Ctrl-C in the terminal reached the program once; all $naps naps traced"
else fail "trace -- CMD with Ctrl-C typed: exit $rc:"; grep -v '^\[' "$tmp/tty.txt" | sed 's/^/    /'; fi

"$lp" trace --hist nap -- $(prog 0) >"$tmp/term.out" 2>&1 & tr=$!
sleep 1.5; kill -TERM "$tr"; wait "$tr"; rc=$?
[ "$rc" -eq 0 ] && grep -q '^naps [0-9]* bad 0$' "$tmp/term.out" && grep -q '^@ns\[nap\]: [0-9]* calls$' "$tmp/term.out" &&
    pass "trace -- CMD: SIGTERM to the tool reached the program, which exited 0" ||
    { fail "trace -- CMD, SIGTERM to the tool: exit $rc:"; grep -v '^\[' "$tmp/term.out" | sed 's/^/    /'; }

"$lp" trace --duration 1 --hist nap -- $(prog 3) >"$tmp/dur.out" 2>&1; rc=$?
[ "$rc" -eq 0 ] && grep -q '^liveprobe: tracing stopped (--duration); PID [0-9]* runs on untraced$' "$tmp/dur.out" &&
    grep -q 'naps [0-9]* bad 0 sigint 0 ran its time$' "$tmp/dur.out" &&
    pass "trace --duration -- CMD: tracing stopped, the program ran its time" ||
    { fail "trace --duration -- CMD: exit $rc:"; grep -v '^\[' "$tmp/dur.out" | sed 's/^/    /'; }

"$lp" trace --hist nap -- $(prog 4) >"$tmp/kill.out" 2>&1 & tr=$!
sleep 1.5
cpid=$(sed -n 's/^liveprobe: started PID //p' "$tmp/kill.out")
kill -KILL "$tr"; wait "$tr" 2>/dev/null
pid=$cpid
if [ -n "$cpid" ] && no_probes cmd-kill; then pass "trace -- CMD, tool killed: the program's agent removed its probes"
else fail "trace -- CMD, tool killed: probes left:"; cat "$tmp/cmd-kill.status" 2>/dev/null; fi
for _ in $(seq 100); do grep -q 'ran its time' "$tmp/kill.out" && break; sleep 0.1; done
grep -q 'naps [0-9]* bad 0 sigint 0 ran its time$' "$tmp/kill.out" && pass "trace -- CMD, tool killed: the program ran its time" ||
    { fail "trace -- CMD, tool killed: the program's output:"; grep -v '^\[' "$tmp/kill.out"; }

# 6. Threads that block every signal (as jemalloc's background thread does) while libc's
# functions are probed, many on the breakpoint path, and probes are placed and removed (each
# placement or removal of a jump probe writes an int3 first): the kernel kills a thread that
# hits an int3 with SIGTRAP blocked. And the agent's own thread, which runs libc's code while it
# places the probes, after a detach and an attach again.
"${launch[@]}" "$target" 1000 0 2 3 1 >"$tmp/blocking.out" 2>&1 &
pid=$!; pids+=("$pid")
for _ in $(seq 500); do grep -q '^ready$' "$tmp/blocking.out" 2>/dev/null && break; sleep 0.01; done
for i in 1 2 3; do
    "$lp" attach -p "$pid" >/dev/null 2>&1; "$lp" detach -p "$pid" >/dev/null 2>&1
    mode=--count; [ "$i" -eq 2 ] && mode=--hist
    "$lp" trace -p "$pid" $mode 'libc.so.6:*' >"$tmp/blocking-$i.trace" 2>&1 & tr=$!
    for _ in $(seq 1000); do grep -q '^liveprobe: placed' "$tmp/blocking-$i.trace" 2>/dev/null && break; sleep 0.01; done
    sleep 1
    sig=INT; [ "$i" -eq 3 ] && sig=KILL
    kill -$sig "$tr"; wait "$tr" 2>/dev/null
    alive blocking "SIG$sig of 'trace $mode libc.so.6:*' (threads blocking every signal) #$i" || break
done
finish blocking
# The same with jump optimization off in the target: no thread stop happens while probes are
# placed, and the threads that block every signal meet the int3 of nap_rec's probe at once.
LIVEPROBE_OPTIMIZE=0 "${launch[@]}" "$target" 1000 0 2 3 1 >"$tmp/blocking-bp.out" 2>&1 &
pid=$!; pids+=("$pid")
for _ in $(seq 500); do grep -q '^ready$' "$tmp/blocking-bp.out" 2>/dev/null && break; sleep 0.01; done
interrupted blocking-bp --count nap_rec nap
kill -TERM "$pid" 2>/dev/null; wait "$pid"; rc=$?
[ "$rc" -eq 0 ] && grep -Eq '^naps [1-9][0-9]* bad 0$' "$tmp/blocking-bp.out" && pass "blocking-bp: $(tail -1 "$tmp/blocking-bp.out")" ||
    { fail "blocking-bp: the target exited $rc"; tail -2 "$tmp/blocking-bp.out"; }

# 7. kretprobe_example on nap, then rmmod while nap is in flight: rmmod answers, the program lives.
if start module; then
    if out=$("$lp" insmod -p "$pid" "$samples/kretprobe_example.so" func=nap 2>&1); then
        sleep 0.5
        "$lp" dmesg -p "$pid" >"$tmp/module.dmesg" 2>&1
        grep -Eq 'nap returned 1000 and took' "$tmp/module.dmesg" &&
            pass "module: dmesg has nap's returns" || { fail "module: no 'nap returned 1000' in dmesg:"; head -5 "$tmp/module.dmesg"; }
        if out=$("$lp" rmmod -p "$pid" kretprobe_example 2>&1); then pass "rmmod with nap in flight: ${out:-ok}"
        else fail "rmmod with nap in flight: $out"; fi
        alive module "rmmod kretprobe_example"
    else fail "insmod kretprobe_example func=nap: $out"; fi
    finish module
fi

# A mistyped command is named as such, with --help too (it printed the general help, exit 0).
for args in "detahc -p 1" "detahc --help"; do
    out=$("$lp" $args 2>&1); rc=$?
    [ "$rc" -eq 2 ] && grep -q "^liveprobe: unknown command 'detahc' (the commands: run, attach, .*detach" <<<"$out" &&
        pass "liveprobe $args: $out" || fail "liveprobe $args: exit $rc: $out"
done

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all passed"
