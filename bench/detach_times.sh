#!/bin/bash
# How long ending a session takes on a real server: memcached (Debian's, a private instance on a
# free loopback port) traced with --hist on every function of libevent (about 600 return
# probes), ended RUNS times each way:
#   killed  the tool gets SIGKILL; the agent notices its connection closed and removes the
#           probes itself: the agent's own figure (its log line), and the wall time from the
#           kill until `status` shows no probe;
#   detach  `liveprobe detach --force` while the tool runs: the agent's figure (its reply) and
#           the command's wall time (it also stops the agent; the next run attaches again).
# Prints each run and the medians.
#
#   bash bench/detach_times.sh [RUNS]      (LIVEPROBE_BINARY_DIR: default build/)
set -euo pipefail
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; fi
runs=${1:-5}
bin=${LIVEPROBE_BINARY_DIR:-build}
lp=$bin/tools/liveprobe/liveprobe
tmp=$(mktemp -d)
export LIVEPROBE_RUNTIME_DIR=$tmp/run
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
       echo $((20000 + RANDOM % 20000)))
memcached -u "$(id -un)" -l 127.0.0.1 -p "$port" -m 64 >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
sleep 0.5
now_ms() { date +%s%3N; }
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
spec='libevent-2.1.so.7:*'
for i in $(seq "$runs"); do
    "$lp" trace -p "$pid" --hist "$spec" >"$tmp/t.out" 2>&1 & tr=$!
    until grep -q '^liveprobe: placed' "$tmp/t.out" 2>/dev/null; do sleep 0.05; done
    sleep 0.5
    t0=$(now_ms); kill -9 "$tr"; wait "$tr" 2>/dev/null || true
    until "$lp" status -p "$pid" 2>/dev/null | grep -q '^probes: 0$'; do sleep 0.005; done
    t1=$(now_ms)
    agent=$("$lp" dmesg -t -p "$pid" | sed -n 's/.*removed its \([0-9]*\) probes in \([0-9.]*\) ms.*/\1 \2/p' | tail -1)
    echo "killed $i: ${agent% *} probes, agent ${agent#* } ms, kill to no probe $((t1 - t0)) ms" | tee -a "$tmp/killed"
    "$lp" trace -p "$pid" --hist "$spec" >"$tmp/t.out" 2>&1 & tr=$!
    until grep -q '^liveprobe: placed' "$tmp/t.out" 2>/dev/null; do sleep 0.05; done
    sleep 0.5
    t0=$(now_ms); out=$("$lp" detach -p "$pid" --force); t1=$(now_ms)
    wait "$tr" 2>/dev/null || true
    n=$(sed -n 's/.*removed the trace session (\([0-9]*\) probes.*/\1/p' <<<"$out")
    ms=$(sed -n 's/.*agent stopped, socket .* removed, in \([0-9.]*\) ms/\1/p' <<<"$out")
    echo "detach $i: $n probes, agent $ms ms, command $((t1 - t0)) ms" | tee -a "$tmp/detach"
done
echo "medians of $runs: killed: agent $(awk '{print $6}' "$tmp/killed" | median) ms, kill to no probe $(awk '{print $12}' "$tmp/killed" | median) ms;" \
     "detach: agent $(awk '{print $6}' "$tmp/detach" | median) ms, command $(awk '{print $9}' "$tmp/detach" | median) ms"
