#!/usr/bin/env bash
# `liveprobe attach`, `status`, `list` and `run` as a user runs them, against the targets of
# tests/programs/attach_target.c: each target must behave exactly as it does unattached (its
# report is checked), whatever it was doing when attached, and whatever happens to the tool.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" attach
target=$bin/tests/lp_attach_target

# start NAME MODE ARG: runs the target in the background (stdout to $tmp/NAME.out) and waits
# until it says "ready"; $pid is its pid.
start() {
    local name=$1; shift
    "${launch[@]}" "$target" "$@" >"$tmp/$name.out" 2>&1 &
    pid=$!
    pids+=("$pid")
    for _ in $(seq 500); do grep -q ready "$tmp/$name.out" 2>/dev/null && return 0; sleep 0.01; done
    fail "$name: the target did not start"; return 1
}
# finish NAME EXPECTED: waits for the target (10 s at most) and checks its exit status 0 and
# that its report matches the regular expression.
finish() {
    local name=$1 want=$2 rc
    for _ in $(seq 1000); do kill -0 "$pid" 2>/dev/null || break; sleep 0.01; done
    if kill -0 "$pid" 2>/dev/null; then fail "$name: the target did not finish"; kill -9 "$pid"; return; fi
    wait "$pid"; rc=$?
    if [ "$rc" -eq 0 ] && grep -Eq "$want" "$tmp/$name.out"; then pass "$name: $(grep -Ev '^ready$' "$tmp/$name.out" | head -1)"
    else fail "$name: exit $rc, report:"; sed 's/^/    /' "$tmp/$name.out"; fi
}
# attach NAME: attaches to $pid; checks the report and that status answers.
attach() {
    local name=$1 out
    if ! out=$("$lp" attach -p "$pid" 2>&1); then fail "$name: attach failed: $out"; return 1; fi
    echo "    $out"
    if ! "$lp" status -p "$pid" >"$tmp/$name.status" 2>&1 || ! grep -q "^agent: liveprobe" "$tmp/$name.status"; then
        fail "$name: status after attach:"; sed 's/^/    /' "$tmp/$name.status"; return 1
    fi
    if ! grep -q liveprobe /proc/"$pid"/task/*/comm; then fail "$name: no thread named liveprobe"; fi
    return 0
}

# 1. A 4-thread target busy computing (and its main thread too): every thread's results stay
# right, whichever thread made the calls.
start busy busy 6 && attach busy && finish busy "^busy ok"
# The same with every signal blocked in every thread.
start blocked blocked 6 && attach blocked && finish blocked "^busy ok"

# 2. Targets blocked in system calls: no EINTR, the data read right, the sleep its full length
# (at least: the attach itself happens during it, and on a loaded machine it may take seconds).
mkfifo "$tmp/fifo.read"
start read read "$tmp/fifo.read" && attach read && { echo "payload-1" >"$tmp/fifo.read"; finish read "^read 10 bytes: payload-1"; }
start nanosleep nanosleep 1500 && attach nanosleep && finish nanosleep "^slept (1[5-9][0-9][0-9]|[2-9][0-9][0-9][0-9]) ms rc 0"
start clock_nanosleep clock_nanosleep 1500 && attach clock_nanosleep && finish clock_nanosleep "^slept (1[5-9][0-9][0-9]|[2-9][0-9][0-9][0-9]) ms rc 0"
start accept accept "$tmp/accept.sock" && attach accept && {
    "$target" connect "$tmp/accept.sock"
    finish accept "^accepted"; }
mkfifo "$tmp/fifo.epoll"
start epoll epoll "$tmp/fifo.epoll" && attach epoll && { echo x >"$tmp/fifo.epoll"; finish epoll "^epoll_wait 1"; }

mkfifo "$tmp/fifo.poll"
start poll poll "$tmp/fifo.poll" && attach poll && { echo x >"$tmp/fifo.poll"; finish poll "^poll 1"; }
start futex futex 1500 && attach futex && finish futex "^futex ETIMEDOUT after (1[5-9][0-9][0-9]|[2-9][0-9][0-9][0-9]) ms"

# The same without the stub in libc's padding: a code page of its own, mapped and unmapped by
# calls of the process's mmap and munmap.
start nopad-busy busy 2 && LIVEPROBE_TEST_NO_PADDING=1 attach nopad-busy && finish nopad-busy "^busy ok"
start nopad-sleep nanosleep 1500 && LIVEPROBE_TEST_NO_PADDING=1 attach nopad-sleep && {
    if grep -q "rwxp" /proc/"$pid"/maps; then fail "nopad: the code page is still mapped"; fi
    finish nopad-sleep "^slept (1[5-9][0-9][0-9]|[2-9][0-9][0-9][0-9]) ms rc 0"; }

# 3. Attaching twice finds the agent there.
start twice nanosleep 1500 && attach twice && {
    out=$("$lp" attach -p "$pid" 2>&1)
    if grep -q "already running" <<<"$out"; then pass "second attach: $out"; else fail "second attach: $out"; fi
    finish twice "rc 0"; }

# 4. Killing the tool (SIGKILL) at each step of an attach leaves the target unharmed: it goes on
# and its results stay right; a later attach works.
for step in seized stopped frame-written registers-set calling returned loaded detached; do
    start "kill-$step" busy 2 || continue
    LIVEPROBE_TEST_KILL_AT=$step "$lp" attach -p "$pid" >/dev/null 2>&1
    rc=$?
    state=$(awk '/^State:/ {print $2}' /proc/"$pid"/status 2>/dev/null)
    if [ "$rc" -ne 137 ]; then fail "kill at $step: the tool was not killed there (exit $rc)"; fi
    if [ "$state" = T ] || [ "$state" = t ]; then fail "kill at $step: the target is left stopped ($state)"; fi
    "$lp" attach -p "$pid" >/dev/null 2>&1 || fail "kill at $step: attaching again failed"
    finish "kill-$step" "^busy ok"
done

# A tool killed once the call returned (its thread waits in the stub for the tool) or during it
# does not freeze the thread it used: the stub sees the tool gone within 50 ms (it waited 3 s
# before, and the main thread of a target paused for 2.9-3.0 s).
for step in calling returned; do
    start "freeze-$step" ticks 4 || continue
    LIVEPROBE_TEST_KILL_AT=$step "$lp" attach -p "$pid" >/dev/null 2>&1
    finish "freeze-$step" "^ticks ok, longest pause ([0-9]|[1-9][0-9]|[1-6][0-9][0-9]) ms$"
done

# A program that reaps any child (waitpid(-1)) never sees liveprobe's thread-stop helper while
# sessions place and remove probes in it, and no zombie is left.
if start waiter waiter 6; then
    attach waiter
    for i in 1 2 3; do "$lp" trace -p "$pid" --duration 0.3 --hist '*' >/dev/null 2>&1; done
    zombies=$(ps --ppid "$pid" -o stat= | grep -c Z)
    [ "$zombies" -eq 0 ] && pass "waiter: no zombie child after 3 sessions" || fail "waiter: $zombies zombie children"
    finish waiter "^waiter: no child seen$"
fi

# 5. A target that exits during the attach: a clear failure or a success, never a hang.
for i in 1 2 3 4 5; do
    start "exiting-$i" exit $((i * 5)) || continue
    out=$(timeout 20 "$lp" attach -p "$pid" 2>&1); rc=$?
    if [ "$rc" -eq 0 ] || { [ "$rc" -eq 1 ] && grep -Eq "exit|no process|gone" <<<"$out"; }; then
        pass "exiting target ($((i * 5)) ms): exit $rc: $out"
    else fail "exiting target ($((i * 5)) ms): exit $rc: $out"; fi
    wait "$pid" 2>/dev/null
done

# 6. Refusals: another user's process, a nonexistent one.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
    start mine nanosleep 1500
    lout=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$lp" list -p "$pid" 2>&1); lrc=$?
    # (issue 32, item 5: it said "no function of process N matches '*'")
    [ "$lrc" -eq 1 ] && grep -q "the kernel does not let you read the memory map of process $pid" <<<"$lout" &&
        pass "list as another user: $lout" || fail "list as another user: exit $lrc: $lout"
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$lp" attach -p "$pid" 2>&1); rc=$?
    who="the tool as user 65534 against a root process"
else
    out=$("$lp" attach -p 1 2>&1); rc=$?
    who="pid 1 (root's) as user $(id -u)"
fi
if [ "$rc" -eq 1 ] && grep -q "the kernel does not let you ptrace process" <<<"$out"; then pass "refused $who: $out"
else fail "$who: exit $rc: $out"; fi
[ "$(id -u)" -eq 0 ] && finish mine "rc 0"
nopid=4194000; while kill -0 "$nopid" 2>/dev/null; do nopid=$((nopid + 1)); done
out=$("$lp" attach -p "$nopid" 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -q "no process $nopid" <<<"$out"; then pass "nonexistent pid: $out"; else fail "nonexistent pid: exit $rc: $out"; fi
out=$("$lp" status -p "$nopid" 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -q "no process" <<<"$out"; then pass "status of a nonexistent pid: $out"; else fail "status, nonexistent pid: exit $rc: $out"; fi
out=$("$lp" attach 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q -- "--pid" <<<"$out"; then pass "attach without -p: exit 2"; else fail "attach without -p: exit $rc: $out"; fi
# Not a process (issue 32, item 5: these said "exited during the attach"): 0, -1, a thread's
# id, a kernel thread.
for bad in 0 -1; do
    out=$("$lp" attach -p "$bad" 2>&1); rc=$?
    [ "$rc" -eq 1 ] && grep -q -- "$bad is not a process id" <<<"$out" && ! grep -q exited <<<"$out" &&
        pass "attach -p $bad: $out" || fail "attach -p $bad: exit $rc: $out"
done
start threads nanosleep 1500 && {
    "${launch[@]}" "$bin/tests/lp_nap_target" 1000 3 2 >/dev/null 2>&1 &
    np=$!
    pids+=("$np")
    for _ in $(seq 100); do [ "$(ls "/proc/$np/task" 2>/dev/null | wc -l)" -ge 3 ] && break; sleep 0.02; done
    tid=$(ls "/proc/$np/task" | grep -vx "$np" | head -1)
    out=$("$lp" attach -p "$tid" 2>&1); rc=$?
    [ "$rc" -eq 1 ] && grep -q "$tid is a thread of process $np, not a process" <<<"$out" && ! grep -q exited <<<"$out" &&
        pass "attach -p THREAD: $out" || fail "attach -p $tid (a thread of $np): exit $rc: $out"
    kill "$np" 2>/dev/null
    finish threads "rc 0"
}
kthread=
for f in /proc/[0-9]*/stat; do  # PF_KTHREAD in the flags, the 9th field (the name may hold spaces)
    read -r line <"$f" 2>/dev/null || continue
    read -r -a rest <<<"${line##*) }"
    if (( ${rest[6]:-0} & 0x200000 )); then kthread=${f#/proc/}; kthread=${kthread%/stat}; break; fi
done
if [ -n "$kthread" ]; then
    out=$("$lp" attach -p "$kthread" 2>&1); rc=$?
    [ "$rc" -eq 1 ] && grep -q "is a kernel thread: there is no program in it to attach to" <<<"$out" &&
        pass "attach -p KTHREAD: $out" || fail "attach -p $kthread (a kernel thread): exit $rc: $out"
else echo "(no kernel thread visible here: that case not tried)"; fi

# run and trace -- CMD of a program the agent cannot be loaded into: refused, saying why (they
# started a static program without an agent, silently).
for kind in static musl; do
    for how in run "trace --count main"; do
        out=$("$lp" $how -- "$bin/tests/lp_${kind}_target" 2>&1); rc=$?
        want="statically linked"; [ "$kind" = musl ] && want="runs on musl's loader"
        [ "$rc" -eq 1 ] && grep -q "$want" <<<"$out" && ! grep -q '^ran$' <<<"$out" &&
            pass "${how%% *} of a $kind program: $out" || fail "${how%% *} of a $kind program: exit $rc: $out"
    done
done

# 7. list: the functions, as OBJECT:NAME.
start list nanosleep 1000 && {
    out=$("$lp" list -p "$pid" 'round_of_work*' 2>&1)
    if grep -q "^lp_attach_target:round_of_work" <<<"$out"; then pass "list: $out"; else fail "list: $out"; fi
    out=$("$lp" list -p "$pid" 'nanosleep' 2>&1)
    if grep -q "^libc.so.6:nanosleep$" <<<"$out"; then pass "list libc: $(echo "$out" | head -1)"; else fail "list libc: $out"; fi
    # OBJECT:GLOB, as trace takes it (issue 33: list refused it, "no function matches").
    out=$("$lp" list -p "$pid" 'libc.so.6:nanosle*' 2>&1)
    [ "$out" = "libc.so.6:nanosleep" ] && pass "list OBJECT:GLOB: $out" || fail "list 'libc.so.6:nanosle*': $out"
    finish list "rc 0"; }
# list -x FILE: a binary on disk, no process (issue 33); demangled names match without -d, as
# --help says; not ELF, or no file: said, exit 1; neither -p nor -x: exit 2.
out=$("$lp" list -x "$bin/tests/lp_throw_target" 'mid(int)' 2>&1); rc=$?
[ "$rc" = 0 ] && [ "$out" = "lp_throw_target:_Z3midi" ] && pass "list -x FILE 'mid(int)': $out" ||
    fail "list -x FILE 'mid(int)': exit $rc: $out"
out=$("$lp" list -x /lib/x86_64-linux-gnu/libc.so.6 'libc.so.6:getpid' 2>&1); rc=$?
[ "$rc" = 0 ] && [ "$out" = "libc.so.6:getpid" ] && pass "list -x LIBRARY OBJECT:NAME: $out" || fail "list -x libc getpid: exit $rc: $out"
out=$("$lp" list -x /etc/passwd 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "is not an ELF executable or library" <<<"$out" && pass "list -x of a text file: $out" ||
    fail "list -x /etc/passwd: exit $rc: $out"
out=$("$lp" list 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "name a process (-p PID) or a file (-x FILE)" <<<"$out" && pass "list alone: $out" ||
    fail "list alone: exit $rc: $out"

# 8. run: the agent preloaded, the program's exit status, signals passed on, children inherit.
out=$("${launch[@]}" "$lp" run -- sh -c 'exit 7' 2>&1); rc=$?
if [ "$rc" -eq 7 ] && grep -q "^liveprobe: started PID [0-9]*$" <<<"$out"; then pass "run: exit status 7 and '$out'"
else fail "run: exit $rc: $out"; fi
"${launch[@]}" "$lp" run -- "$target" fork 20 >"$tmp/run.out" 2>"$tmp/run.err" &
tool=$!; pids+=("$tool")
for _ in $(seq 500); do grep -q ready "$tmp/run.out" 2>/dev/null && break; sleep 0.01; done
runpid=$(sed -n 's/^liveprobe: started PID \([0-9]*\)$/\1/p' "$tmp/run.err")
child=$(sed -n 's/^child \([0-9]*\)$/\1/p' "$tmp/run.out")
# answers PID PATTERN: the agent of PID answers status with a line matching PATTERN within 5 s
# (a loaded machine may take a while to start it).
answers() {
    for _ in $(seq 50); do "$lp" status -p "$1" 2>&1 | grep -q "$2" && return 0; sleep 0.1; done
    return 1
}
if answers "$runpid" "started: preload"; then pass "run: the program's agent answers (started: preload)"
else fail "run: status of $runpid: $("$lp" status -p "$runpid" 2>&1)"; fi
if [ -n "$child" ] && answers "$child" "^pid: $child"; then pass "run: the forked child $child has its own agent"
else fail "run: status of the child ${child:-?}: $("$lp" status -p "${child:-0}" 2>&1)"; fi
kill -TERM "$tool"
wait "$tool"; rc=$?
if [ "$rc" -eq 143 ]; then pass "run: SIGTERM passed on, exit 143"; else fail "run: after SIGTERM, exit $rc"; fi
out=$("$lp" run -- /nonexistent/program 2>&1); rc=$?
if [ "$rc" -eq 127 ] && grep -q "cannot run /nonexistent/program" <<<"$out"; then pass "run: a missing program: exit 127"
else fail "run, missing program: exit $rc: $out"; fi

# 9. dmesg: the lines of the process's log, oldest first; -f follows it.
"${launch[@]}" "$lp" run -- "$target" log 3 >"$tmp/log.out" 2>"$tmp/log.err" &
tool=$!; pids+=("$tool")
for _ in $(seq 500); do grep -q ready "$tmp/log.out" 2>/dev/null && break; sleep 0.01; done
logpid=$(sed -n 's/^liveprobe: started PID \([0-9]*\)$/\1/p' "$tmp/log.err")
out=$("$lp" dmesg -t -p "$logpid" 2>&1)
if [ "$(echo "$out" | head -3 | tr '\n' ,)" = "hello 0,hello 1,hello 2," ]; then pass "dmesg: $(echo "$out" | head -3 | tr '\n' ' ')"
else fail "dmesg: $out"; fi
out=$(timeout 1 "$lp" dmesg -t -f -p "$logpid" 2>&1)
ticks=$(grep -c '^tick' <<<"$out")
later=$("$lp" dmesg -t -p "$logpid" 2>&1 | grep -c '^tick')
if [ "$ticks" -ge 3 ] && grep -q "^hello 0$" <<<"$out"; then pass "dmesg -f: followed $ticks tick lines in 1 s"
else fail "dmesg -f: $out"; fi
[ "$later" -ge "$ticks" ] || fail "dmesg after -f: $later tick lines, fewer than followed ($ticks)"
wait "$tool"
out=$("$lp" dmesg -p "$nopid" 2>&1); rc=$?
if [ "$rc" -eq 1 ] && grep -q "no process" <<<"$out"; then pass "dmesg of a nonexistent pid: $out"; else fail "dmesg, nonexistent pid: exit $rc: $out"; fi

# A program whose thread holds libstdc++'s locale mutex much of the time (fmtlib's chrono tests
# do): the attach stops it there and makes it start the agent, which logged the attach with an
# std::ifstream (a std::locale: that mutex) and waited for itself for ever ("the call in thread
# N did not return within 10000 ms"). Attached and detached 5 times; it ends as it would.
"${launch[@]}" "$bin/tests/lp_locale_target" 4 >"$tmp/locale.out" 2>&1 &
pid=$!
pids+=("$pid")
for _ in $(seq 500); do grep -q ready "$tmp/locale.out" 2>/dev/null && break; sleep 0.01; done
ok=0
for i in 1 2 3 4 5; do
    out=$(timeout 30 "$lp" attach -p "$pid" 2>&1) && ok=$((ok + 1)) || { fail "attach $i to a program in its locale code: $out"; break; }
    timeout 30 "$lp" detach -p "$pid" >/dev/null 2>&1
done
for _ in $(seq 1000); do kill -0 "$pid" 2>/dev/null || break; sleep 0.01; done
kill -9 "$pid" 2>/dev/null && fail "the program in its locale code did not end"
wait "$pid"; rc=$?
[ "$ok" = 5 ] && [ "$rc" = 0 ] && grep -q '^switches [0-9]' "$tmp/locale.out" &&
    pass "5 attaches to a program in its locale code, each answered; it ends: $(grep '^switches' "$tmp/locale.out")" ||
    fail "a program in its locale code: $ok attaches, exit $rc, $(tail -1 "$tmp/locale.out")"

if [ "$failures" -eq 0 ]; then echo "attach test: PASSED"; exit 0; fi
echo "attach test: FAILED ($failures failure(s))"
exit 1
