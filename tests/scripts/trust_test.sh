#!/usr/bin/env bash
# The trust boundary (issue 32, item 1), tried by two unprivileged users that exist nowhere but
# here (setpriv with unused ids), in a scratch directory anyone may write (mode 1777, as /tmp):
#   1. A squatter who made the victim's runtime directory first and serves a fake agent socket
#      there: the victim's attach loaded nothing ("already running"), status and lsmod showed
#      the squatter's answers, escapes and all. Now the tool reaches the real agent through its
#      door, and the squatter's socket is never read.
#   2. Another user's tool gets nothing out of the victim's agent: the kernel's ptrace verdict.
#   3. A program that makes itself non-dumpable after its agent started (as ssh-agent does):
#      ptrace refuses its own user then, and so does the agent; root, whom ptrace still lets in
#      (CAP_SYS_PTRACE), still gets in.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" trust
attacker=64001 victim=64002
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
    echo "trust: needs root and setpriv, to run as two other users"
    exit 1
fi
chmod 755 "$tmp"
scratch=$tmp/scratch
mkdir -m 1777 "$scratch"
as() {
    local u=$1
    shift
    setpriv --reuid="$u" --regid="$u" --clear-groups env LIVEPROBE_RUNTIME_DIR="$scratch/run-$u" "$@"
}
has_escape() { grep -q $'\x1b' "$1"; }

# 1. The squatter.
# (Background commands spelled out: `as ... &` would fork a shell first, and $! be its pid.)
setpriv --reuid="$victim" --regid="$victim" --clear-groups env LIVEPROBE_RUNTIME_DIR="$scratch/run-$victim" \
    "${launch[@]}" "$bin/tests/lp_dumpable_target" \
    >"$scratch/v1.out" 2>&1 &
pid=$!
pids+=("$pid")
for _ in $(seq 100); do grep -q ready "$scratch/v1.out" 2>/dev/null && break; sleep 0.05; done
as "$attacker" mkdir -m 777 "$scratch/run-$victim"
setpriv --reuid="$attacker" --regid="$attacker" --clear-groups "$bin/tests/lp_fake_agent" \
    "$scratch/run-$victim/$pid.sock" >"$scratch/fake.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q listening "$scratch/fake.out" 2>/dev/null && break; sleep 0.05; done
as "$victim" "$lp" attach -p "$pid" >"$scratch/attach.out" 2>&1; rc=$?
[ "$rc" -eq 0 ] && grep -q "agent loaded and started in process $pid" "$scratch/attach.out" &&
    pass "squatter: the victim's attach loaded the agent: $(cat "$scratch/attach.out")" ||
    fail "squatter: attach exit $rc: $(cat "$scratch/attach.out")"
as "$victim" "$lp" status -p "$pid" >"$scratch/status.out" 2>&1; rc=$?
[ "$rc" -eq 0 ] && grep -q "^pid: $pid$" "$scratch/status.out" && grep -q '^door: ' "$scratch/status.out" &&
    ! has_escape "$scratch/status.out" && pass "squatter: status answered by the real agent" ||
    { fail "squatter: status exit $rc:"; cat -v "$scratch/status.out" | sed 's/^/    /'; }
as "$victim" "$lp" lsmod -p "$pid" >"$scratch/lsmod.out" 2>&1; rc=$?
[ "$rc" -eq 0 ] && ! grep -q fake "$scratch/lsmod.out" && pass "squatter: lsmod lists no fake module" ||
    { fail "squatter: lsmod exit $rc:"; cat -v "$scratch/lsmod.out" | sed 's/^/    /'; }

# 2. Another user, against the victim's agent: every command refused, by the kernel's verdict.
for cmd in status lsmod dmesg "insmod $bin/samples/kprobe_example.so"; do
    as "$attacker" "$lp" $cmd -p "$pid" >"$scratch/other.out" 2>&1; rc=$?
    [ "$rc" -eq 1 ] && grep -q "does not let you ptrace process $pid" "$scratch/other.out" &&
        pass "another user's ${cmd%% *}: refused: $(head -1 "$scratch/other.out")" ||
        fail "another user's ${cmd%% *}: exit $rc: $(head -3 "$scratch/other.out")"
done
as "$victim" "$lp" lsmod -p "$pid" 2>&1 | grep -q kprobe_example && fail "the other user's insmod loaded a module" ||
    pass "the other user's insmod loaded nothing"

# 3. Non-dumpable after the agent started: its own user is refused from then on, as ptrace
# refuses it; root is not.
kill -USR1 "$pid"
for _ in $(seq 100); do grep -q 'non-dumpable 0' "$scratch/v1.out" && break; sleep 0.05; done
if ! as "$victim" cat "/proc/$pid/environ" >/dev/null 2>&1; then
    pass "non-dumpable: the kernel refuses its own user now (/proc/$pid/environ)"
else fail "non-dumpable: the kernel still lets its user read /proc/$pid/environ"; fi
for cmd in status "insmod $bin/samples/kprobe_example.so"; do
    as "$victim" "$lp" $cmd -p "$pid" >"$scratch/nd.out" 2>&1; rc=$?
    [ "$rc" -eq 1 ] && grep -q "does not let you ptrace process $pid" "$scratch/nd.out" &&
        pass "non-dumpable: its own user's ${cmd%% *} refused" ||
        fail "non-dumpable: its own user's ${cmd%% *}: exit $rc: $(head -3 "$scratch/nd.out")"
done
"$lp" status -p "$pid" >"$scratch/root.out" 2>&1 && grep -q "^pid: $pid$" "$scratch/root.out" &&
    pass "non-dumpable: root (CAP_SYS_PTRACE) still reaches the agent" ||
    fail "non-dumpable: root: $(head -3 "$scratch/root.out")"
kill -TERM "$pid"
wait "$pid" 2>/dev/null; rc=$?
[ "$rc" -eq 0 ] && pass "the victim's program ended well" || fail "the victim's program: exit $rc"

# 4. A set-uid program never loads the agent, whatever its caller's environment says
# (secure_getenv): the same program, not set-uid, does (the test's control).
door_of() { ls -l "/proc/$1/fd" 2>/dev/null | awk '$9 >= 512 && $11 ~ /^socket:/' | grep -c .; }
cp "$bin/tests/lp_suid_target" "$scratch/suid"
cp "$bin/tests/lp_suid_target" "$scratch/plain"
chmod 4755 "$scratch/suid"
chmod 755 "$scratch/plain"
for kind in suid plain; do
    setpriv --reuid="$victim" --regid="$victim" --clear-groups env LIVEPROBE_AGENT=1 "$scratch/$kind" \
        >"$scratch/$kind.out" 2>&1 &
    p=$!
    pids+=("$p")
    for _ in $(seq 100); do grep -q ready "$scratch/$kind.out" 2>/dev/null && break; sleep 0.05; done
    sleep 0.2
    doors=$(door_of "$p")
    if [ "$kind" = suid ]; then
        [ "$doors" -eq 0 ] && pass "set-uid: LIVEPROBE_AGENT=1 started no agent" ||
            fail "set-uid: an agent started from the caller's environment ($doors sockets at 512 and up)"
    else
        [ "$doors" -ge 1 ] && pass "not set-uid: LIVEPROBE_AGENT=1 started the agent (the control)" ||
            fail "not set-uid: no agent started: $(cat "$scratch/$kind.out")"
    fi
    kill -TERM "$p"
    wait "$p" 2>/dev/null
done

# 5. The audit trail (item 3): who attached, loaded, unloaded and traced, in the process's log,
# and nothing of another process's choosing printed raw: the tool runs under a name with a
# terminal escape in it (its command line is the log's to show), and the log shows it escaped.
"${launch[@]}" "$bin/tests/lp_nap_target" 1000 30 >/dev/null 2>&1 &
pid=$!
pids+=("$pid")
sleep 0.3
evil=$(printf 'lp\033]0;owned\007')
(exec -a "$evil" "$lp" attach -p "$pid") >/dev/null 2>&1
"$lp" insmod -p "$pid" "$bin/samples/kretprobe_example.so" func=nap >/dev/null 2>&1
"$lp" rmmod -p "$pid" kretprobe_example >/dev/null 2>&1
"$lp" trace -p "$pid" --count nap --duration 0.3 >/dev/null 2>&1
"$lp" dmesg -p "$pid" >"$scratch/dmesg.out" 2>&1
for what in "attached (the agent started)" "insmod $bin/samples/kretprobe_example.so func=nap: done" \
    "rmmod kretprobe_example: done" "trace-start .*nap: done" "trace-stop .*: done"; do
    grep -q "liveprobe: audit: uid 0 pid [0-9]* (.*): $what" "$scratch/dmesg.out" &&
        pass "audit: $(grep -o "audit: uid 0 pid [0-9]* (.*): $what" "$scratch/dmesg.out" | head -1 | cut -c1-120)" ||
        { fail "audit: no line for '$what':"; sed 's/^/    /' "$scratch/dmesg.out"; }
done
! grep -q $'\x1b' "$scratch/dmesg.out" && grep -q 'lp\\x1b\]0;owned\\x07' "$scratch/dmesg.out" &&
    pass "dmesg shows the escape in the tool's name as \\x1b, never raw" ||
    { fail "dmesg and the escape:"; cat -v "$scratch/dmesg.out" | sed 's/^/    /'; }
kill -TERM "$pid"

# 6. One slow client holds nobody up (item 2): a client that sends a byte every 1.5 s and never
# ends its request; meanwhile status answers (within the tool's own 5 s), and the slow client
# is answered with an error once its time is up.
"${launch[@]}" "$bin/tests/lp_nap_target" 1000 30 >/dev/null 2>&1 &
pid=$!
pids+=("$pid")
sleep 0.3
"$lp" attach -p "$pid" >/dev/null 2>&1
"$bin/tests/lp_slow_client" "$pid" 9 >"$scratch/slow.out" 2>&1 &
slow=$!
for _ in $(seq 100); do grep -q connected "$scratch/slow.out" && break; sleep 0.05; done
sleep 2
"$lp" status -p "$pid" >"$scratch/busy.out" 2>&1 && grep -q "^pid: $pid$" "$scratch/busy.out" &&
    pass "a slow client connected: status answered all the same" || fail "status beside a slow client: $(cat "$scratch/busy.out")"
wait "$slow"
grep -q "^answer: error $(printf '%d' 71) request not whole within 5000 ms" "$scratch/slow.out" &&
    pass "the slow client: $(cat "$scratch/slow.out" | tail -1)" || fail "the slow client: $(cat "$scratch/slow.out")"
kill -TERM "$pid"

# 6b. A fork while a request is half read: the child's agent (started under `run`) must not
# answer its parent's client too; the slow client gets one answer, its parent's.
"$lp" run -- "$bin/tests/lp_fork_target" 2 8 >"$scratch/fork.out" 2>&1 &
runner=$!
pid=
for _ in $(seq 100); do pid=$(sed -n 's/^liveprobe: started PID \([0-9]*\)$/\1/p' "$scratch/fork.out"); [ -n "$pid" ] && break; sleep 0.05; done
sleep 0.5
"$bin/tests/lp_slow_client" "$pid" 9 >"$scratch/slow2.out" 2>&1
n=$(grep -o 'error 71 request not whole' "$scratch/slow2.out" | wc -l)
[ "$n" -eq 1 ] && pass "a fork while a request was half read: one answer, the parent's" ||
    fail "a fork while a request was half read: $n answers: $(cat "$scratch/slow2.out")"
wait "$runner"

# 7. Root's tool trusts nothing the target writes (item 2): root traces a process of the victim,
# who then tries to shrink the session's shared memory (sealed: refused; the tool died of SIGBUS)
# and writes nonsense into its header and a ring's head (the tool aborted with bad_alloc). The
# tool says so, reads no more of it, and ends as --duration says, exit status 1. The memory is
# passed to the tool with the agent's reply and kept by no descriptor of the process: the victim
# reaches it through the mapping alone (/proc/PID/mem).
setpriv --reuid="$victim" --regid="$victim" --clear-groups env LIVEPROBE_RUNTIME_DIR="$scratch/run-$victim" \
    "${launch[@]}" "$bin/tests/lp_nap_target" 1000 30 >/dev/null 2>&1 &
pid=$!
pids+=("$pid")
sleep 0.3
"$lp" trace -p "$pid" --count nap --duration 3 >"$scratch/root-trace.out" 2>&1 &
tracer=$!
start=
for _ in $(seq 200); do
    start=$(awk '/memfd:liveprobe-trace/ { split($1, r, "-"); print r[1]; exit }' /proc/"$pid"/maps 2>/dev/null)
    [ -n "$start" ] && break
    sleep 0.02
done
if [ -z "$start" ]; then fail "root's trace: no shared memory mapped in the process"; else
    sleep 0.5
    held=$(ls -l /proc/"$pid"/task/*/fd 2>/dev/null | grep -c 'memfd:liveprobe-trace')
    [ "$held" = 0 ] && pass "no descriptor of the process holds the session's shared memory (none to shrink it by)" ||
        fail "$held descriptors of the process hold the session's shared memory"
    for at in 48 128; do  # Header::names_bytes, ring 0's head
        printf '\377\377\377\377\377\377\377\177' |
            as "$victim" dd of="/proc/$pid/mem" bs=1 seek=$((0x$start + at)) conv=notrunc status=none ||
            fail "the victim could not write its process's memory at $at"
    done
    wait "$tracer"; rc=$?
    if [ "$rc" -eq 1 ] && grep -q "the shared memory of process $pid is not as liveprobe wrote it" "$scratch/root-trace.out"; then
        pass "root's trace: $(grep -o 'is not as liveprobe wrote it.*' "$scratch/root-trace.out" | head -1)"
    else fail "root's trace after the victim's writes: exit $rc:"; sed 's/^/    /' "$scratch/root-trace.out"; fi
fi
kill -TERM "$pid"

# 8. An agent older than the door (it listened on RUNTIME_DIR/PID.sock, a path any user could
# make first) in a program still running after an upgrade: the tool says so, connects to
# nothing, and loads no second agent beside it (attach loaded one: two registries patching the
# same code). The old agent is played by the fake one, listening in its own process.
mkdir -p "$scratch/old/liveprobe-0"
bash -c 'exec "$0" "$1/$$.sock"' "$bin/tests/lp_fake_agent" "$scratch/old/liveprobe-0" >"$scratch/old.out" 2>&1 &
pid=$!
pids+=("$pid")
for _ in $(seq 100); do grep -q listening "$scratch/old.out" && break; sleep 0.02; done
out=$("$lp" attach -p "$pid" 2>&1); rc=$?
if [ "$rc" = 1 ] && grep -q "is older than this tool" <<<"$out" && ! grep -q libliveprobe /proc/"$pid"/maps; then
    pass "an agent older than the door: attach loads nothing beside it: ${out#liveprobe: }"
else fail "an agent older than the door: attach exit $rc, $(grep -c libliveprobe /proc/"$pid"/maps) libliveprobe mappings: $out"; fi
kill -TERM "$pid"

[ "$failures" -eq 0 ] && echo "trust: all passed" || echo "trust: $failures failure(s)"
[ "$failures" -eq 0 ]
