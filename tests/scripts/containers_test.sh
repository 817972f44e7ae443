#!/usr/bin/env bash
# liveprobe into a container (issue 33, item 4): a process in a mount and pid namespace of its
# own, chrooted into a root of its own, where neither the agent's file nor the tool's paths
# exist. No container engine: `unshare --mount --pid --fork` and `chroot` into a directory of
# bind mounts, which die with the namespace (nothing to unmount, whatever fails).
#   1. A root like a Debian 12 container with the agent's libraries (/usr and /etc bound
#      read-only, a private /tmp, its own /proc): `trace -p` counts its calls; the output,
#      counts masked, is tests/golden/containers_count.txt; status and detach answer; a second
#      trace uses the agent already there (one copy mapped, never a second).
#   2. A root with only glibc (a distroless-like image): the tool refuses and names every
#      library of the agent's that is missing there; the program runs on, no agent in it.
#   3. The full root without /proc mounted: refused, saying so.
#   4. (run before 3) The full root as a rootless container: an unprivileged user's own user,
#      mount and pid namespace, traced by that user from outside.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" containers
# Sets pid to the child of $holder once it runs nap (and a while more: an attach during its
# loading found no symbol nap, seen under load), and adds it to the processes to kill.
wait_nap() {
    pid=
    for _ in $(seq 100); do
        pid=$(pgrep -P "$holder")
        [ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = nap ] && break
        sleep 0.05
    done
    pids+=("$pid")
    sleep 0.5
}
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null || ! command -v chroot >/dev/null ||
   ! command -v setpriv >/dev/null; then
    echo "containers: needs root, unshare, chroot and setpriv"
    exit 1
fi
chmod 755 "$tmp"
nap=$bin/tests/lp_nap_target

# in_container ROOT [BIND...]: starts ROOT/nap as PID 1 of a new mount and pid namespace,
# chrooted into ROOT, with each /BIND bound read-only at ROOT/BIND, a tmpfs at ROOT/tmp and
# the namespace's proc at ROOT/proc when ROOT has those directories. Sets $pid (host pid) and
# $holder (unshare's, whose end ends the namespace).
in_container() {
    unshare --mount --pid --fork bash -c '
        set -e
        root=$1; shift
        for d in "$@"; do mount --bind "/$d" "$root/$d"; mount -o remount,bind,ro "$root/$d"; done
        [ -d "$root/tmp" ] && mount -t tmpfs tmpfs "$root/tmp"
        [ -d "$root/proc" ] && mount -t proc proc "$root/proc"
        exec chroot "$root" /nap 1000 30' bash "$@" >"$tmp/container.out" 2>&1 &
    holder=$!
    pids+=("$holder")
    wait_nap
}
stop_container() { kill "$pid" 2>/dev/null; wait "$holder" 2>/dev/null; }
# Whether process $pid maps no libliveprobe.
agent_absent() { ! grep -q libliveprobe /proc/"$pid"/maps; }

# 1. A root with the agent's libraries: /usr and /etc of the host, read-only.
full=$tmp/full
mkdir -p "$full"/{usr,etc,proc,tmp}
ln -s usr/lib "$full/lib"; ln -s usr/lib64 "$full/lib64"; ln -s usr/bin "$full/bin"
cp "$nap" "$full/nap"
in_container "$full" usr etc
inner=$(awk '/^NSpid:/ { print $3 }' /proc/"$pid"/status)
[ -e "/proc/$pid/root$(readlink -f "$bin/src/libliveprobe.so.0")" ] &&
    fail "the agent's file is visible in the container: the test proves nothing"
"$lp" trace -p "$pid" --count nap --duration 0.5 >"$tmp/count.out" 2>&1; rc=$?
sed -E 's/^(nap +)[0-9]+ *$/\1N/; s/[0-9]+ calls/N calls/; s/process [0-9]+/process PID/g; s/in [0-9.]+ ms/in T ms/' "$tmp/count.out" >"$tmp/count.masked"
if [ "$inner" = 1 ] && [ "$rc" = 0 ] && grep -qE '^nap +[1-9][0-9]* *$' "$tmp/count.out" &&
   diff "$LIVEPROBE_SOURCE_DIR/tests/golden/containers_count.txt" "$tmp/count.masked" >"$tmp/count.diff"; then
    pass "trace -p of PID 1 of a chrooted mount and pid namespace (host pid $pid): the golden output, $(grep -E '^nap ' "$tmp/count.out" | tr -s ' ')"
else
    fail "trace -p in a container (host pid $pid, $inner inside): exit $rc; the output, then its difference from the golden file:"
    sed 's/^/    /' "$tmp/count.out"; sed 's/^/    /' "$tmp/count.diff"
fi
"$lp" status -p "$pid" >"$tmp/status.out" 2>&1 && "$lp" trace -p "$pid" --count nap --duration 0.2 >>"$tmp/status.out" 2>&1 &&
    "$lp" detach -p "$pid" >>"$tmp/status.out" 2>&1; rc=$?
copies=$(grep -c 'libliveprobe.*r-xp\|r-xp.*libliveprobe' /proc/"$pid"/maps)
[ "$rc" = 0 ] && [ "$copies" = 1 ] &&
    pass "status, a second trace and detach answer; one copy of the agent is mapped ($(grep 'r-xp.*libliveprobe' /proc/"$pid"/maps | awk '{print $6, $7}'))" ||
    { fail "status, a second trace, detach: exit $rc, $copies executable mappings of the agent:"; sed 's/^/    /' "$tmp/status.out"; }
stop_container

# 2. A root with only the program and glibc.
small=$tmp/small
mkdir -p "$small"/{proc,tmp,lib/x86_64-linux-gnu,lib64}
cp "$nap" "$small/nap"
for f in /lib/x86_64-linux-gnu/{libc.so.6,libm.so.6} /lib64/ld-linux-x86-64.so.2; do cp -L "$f" "$small$f"; done
in_container "$small"
"$lp" trace -p "$pid" --count nap --duration 0.5 >"$tmp/small.out" 2>&1; rc=$?
missing="libZydis.so.4.0 libfmt.so.9 libdw.so.1 libelf.so.1 libstdc++.so.6 libgcc_s.so.1"
ok=1
for l in $missing; do grep -qF "$l" "$tmp/small.out" || ok=0; done
if [ "$rc" = 1 ] && [ "$ok" = 1 ] && grep -q "lacks" "$tmp/small.out" && agent_absent && kill -0 "$pid"; then
    pass "a root with only glibc: refused, each missing library named, the program runs on without an agent"
    sed 's/^/    /' "$tmp/small.out"
else
    fail "a root with only glibc: exit $rc, agent absent: $(agent_absent && echo yes || echo no):"
    sed 's/^/    /' "$tmp/small.out"
fi
stop_container

# 4. A rootless container: user 64003 makes a user, mount and pid namespace of its own (root
# in there, nothing outside) chrooted into the full root, and traces it from outside, unprivileged
# (the agent's symbols then read through the memfd's descriptor, not /proc/PID/map_files).
user=64003
setpriv --reuid="$user" --regid="$user" --clear-groups unshare --user --map-root-user --mount --pid --fork bash -c '
    set -e
    for d in usr etc; do mount --rbind "/$d" "$1/$d"; done
    mount -t tmpfs tmpfs "$1/tmp"
    mount -t proc proc "$1/proc"
    exec chroot "$1" /nap 1000 30' bash "$full" >"$tmp/rootless.out" 2>&1 &
holder=$!
pids+=("$holder")
wait_nap
setpriv --reuid="$user" --regid="$user" --clear-groups "$lp" trace -p "$pid" --count nap --duration 0.5 >"$tmp/rootless.trace" 2>&1; rc=$?
[ "$rc" = 0 ] && grep -qE '^nap +[1-9][0-9]* *$' "$tmp/rootless.trace" &&
    pass "uid $user traces its rootless container's PID 1 from outside: $(grep -E '^nap ' "$tmp/rootless.trace" | tr -s ' ')" ||
    { fail "a rootless container traced by its user: exit $rc"; sed 's/^/    /' "$tmp/rootless.trace" "$tmp/rootless.out"; }
stop_container

# 3. The full root without its /proc.
rmdir "$full/proc"
in_container "$full" usr etc
"$lp" trace -p "$pid" --count nap --duration 0.5 >"$tmp/noproc.out" 2>&1; rc=$?
if [ "$rc" = 1 ] && grep -q "/proc" "$tmp/noproc.out" && agent_absent && kill -0 "$pid"; then
    pass "a root without /proc: refused: $(grep -v '^$' "$tmp/noproc.out" | head -1)"
else
    fail "a root without /proc: exit $rc:"; sed 's/^/    /' "$tmp/noproc.out"
fi
stop_container

[ "$failures" -eq 0 ] && echo "containers: all passed" || echo "containers: $failures failure(s)"
[ "$failures" -eq 0 ]
