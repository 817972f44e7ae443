#!/usr/bin/env bash
# liveprobe across pid and user namespaces (issue 32, item 1: "make it hold across pid and user
# namespaces (a process in a container)"). The door is found among the target's descriptors
# and taken with pidfd_getfd, which the kernel grants by ptrace's rules in whatever namespace:
#   1. root on the host traces a program that is PID 1 of a pid and mount namespace of its own
#      (a container's init): the calls counted, status and detach answered.
#   2. An unprivileged user makes a user and pid namespace of its own (root in there, no
#      capability outside) and traces its own program inside it.
#   3. From inside that namespace, the same user's program outside is not even nameable: its
#      pid means nothing there ("no process").
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" namespaces
user=64003
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null || ! command -v unshare >/dev/null; then
    echo "namespaces: needs root, setpriv and unshare"
    exit 1
fi
chmod 755 "$tmp"
nap=$bin/tests/lp_nap_target

# 1. PID 1 of its own pid namespace.
unshare --pid --fork --mount-proc "$nap" 1000 30 >"$tmp/ns1.out" 2>&1 &
holder=$!
pids+=("$holder")
pid=
for _ in $(seq 100); do pid=$(pgrep -P "$holder"); [ -n "$pid" ] && break; sleep 0.05; done
pids+=("$pid")
inner=$(awk '/^NSpid:/ { print $3 }' /proc/"$pid"/status)
"$lp" trace -p "$pid" --count nap --duration 0.5 >"$tmp/t1" 2>&1; rc=$?
[ "$inner" = 1 ] && [ "$rc" = 0 ] && grep -qE '^nap +[1-9][0-9]* *$' "$tmp/t1" &&
    pass "root traces PID 1 of a pid namespace (host pid $pid): $(grep -E '^nap ' "$tmp/t1" | tr -s ' ')" ||
    { fail "a trace of PID 1 of a pid namespace (host pid $pid, $inner inside): exit $rc"; sed 's/^/    /' "$tmp/t1"; }
"$lp" status -p "$pid" >"$tmp/st1" 2>&1 && "$lp" detach -p "$pid" >>"$tmp/st1" 2>&1 &&
    pass "status and detach answer for it" || { fail "status or detach in a pid namespace:"; sed 's/^/    /' "$tmp/st1"; }
kill "$pid" 2>/dev/null
wait "$holder"

# 2 and 3. An unprivileged user's own user and pid namespace; its program outside, $outside.
setpriv --reuid="$user" --regid="$user" --clear-groups "$nap" 1000 30 >/dev/null 2>&1 &
outside=$!
pids+=("$outside")
sleep 0.2
setpriv --reuid="$user" --regid="$user" --clear-groups env HOME="$tmp" LP="$lp" NAP="$nap" OUTSIDE="$outside" \
    unshare --user --map-root-user --pid --fork --mount-proc bash -c '
        "$NAP" 1000 30 >/dev/null 2>&1 &
        p=$!
        sleep 0.2
        echo "inside: uid $(id -u), pid $p"
        "$LP" trace -p "$p" --count nap --duration 0.5 2>&1
        echo "rc=$?"
        "$LP" status -p "$OUTSIDE" 2>&1
        echo "outside rc=$?"
        kill "$p"' >"$tmp/t2" 2>&1
grep -q '^inside: uid 0' "$tmp/t2" && grep -qE '^nap +[1-9][0-9]* *$' "$tmp/t2" && grep -q '^rc=0$' "$tmp/t2" &&
    pass "uid $user traces its own program in its own user and pid namespace: $(grep -E '^nap ' "$tmp/t2" | tr -s ' ')" ||
    { fail "a trace inside a user namespace:"; sed 's/^/    /' "$tmp/t2"; }
grep -q "^outside rc=1$" "$tmp/t2" && grep -q "no process $outside" "$tmp/t2" &&
    pass "from inside it, the same user's program outside is no process: $(grep "no process" "$tmp/t2" | head -1)" ||
    { fail "the program outside the namespace, named from inside:"; sed 's/^/    /' "$tmp/t2"; }
kill "$outside" 2>/dev/null

[ "$failures" -eq 0 ] && echo "namespaces: all passed" || echo "namespaces: $failures failure(s)"
[ "$failures" -eq 0 ]
