#!/usr/bin/env bash
# `make demo`: the workflow of the kernel's kprobes documents, on a running user-space program.
# Starts samples/target (it keeps calling do_sys_open, sys_open and do_fork), loads the
# kretprobe_example module into it with func=do_sys_open, follows its log for 3 seconds, lists
# the module and its probe, unloads it (its exit prints the missed count) and stops the target.
set -euo pipefail
build=${1:-build}
lp=$build/tools/liveprobe/liveprobe
out=$(mktemp "${TMPDIR:-/tmp}/liveprobe-demo.XXXXXX")
"$build/samples/target" 0 250 >"$out" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -f "$out"' EXIT
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
for _ in $(seq 200); do [ -s "$out" ] && break; sleep 0.01; done
say "$build/samples/target &          # pid $pid: calls do_sys_open() 8 times a second, do_fork() every 2.5 s"
say "liveprobe insmod -p $pid kretprobe_example.so func=do_sys_open"
"$lp" insmod -p "$pid" "$build/samples/kretprobe_example.so" func=do_sys_open
say "liveprobe dmesg -f -p $pid        # for 3 seconds"
timeout 3 "$lp" dmesg -f -p "$pid" || true
say "liveprobe lsmod -p $pid"
"$lp" lsmod -p "$pid"
say "liveprobe rmmod -p $pid kretprobe_example"
"$lp" rmmod -p "$pid" kretprobe_example
say "liveprobe dmesg -p $pid | tail -1"
"$lp" dmesg -p "$pid" | tail -1
kill "$pid"
wait "$pid" 2>/dev/null || true
say "kill $pid                          # the target ran $(wc -l <"$out") rounds, its output unchanged:"
tail -2 "$out"
