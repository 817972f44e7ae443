#!/usr/bin/env bash
# liveprobe against a peer: bpftrace's uprobe (the kernel's int3-based user probe) on the same
# function of the same program, and liveprobe's optimized and breakpoint probes, each with an
# empty handler. Prints ns per hit for each (probed ns/call - plain ns/call) and the ratio
# uprobe / liveprobe, from one run of this script (liveprobe's modes: the best of 5 short runs; the
# uprobe: one run of about 20 s).
#
#   bench/peers.sh                 # N = 1000000 calls per run
#   PEERS_N=200000 bench/peers.sh
#   LIVEPROBE_BINARY_DIR=/path/to/build bench/peers.sh   # default: build/ of this checkout
#
# bpftrace is installed with apt-get when missing (as root). When it cannot run (not root, no
# uprobes, lockdown, BTF, ...), its error is printed and liveprobe's figures still are; exit 0.
set -u

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LIVEPROBE_BINARY_DIR:-$src/build}
n=${PEERS_N:-1000000}
cc=${CC:-cc}

if [ ! -e "$build/src/libliveprobe.so" ]; then
    echo "peers.sh: no $build/src/libliveprobe.so: build liveprobe first" \
         "(cmake -S $src -B $build && cmake --build $build), or set LIVEPROBE_BINARY_DIR" >&2
    exit 1
fi

tmp=$(mktemp -d /tmp/liveprobe-peers.XXXXXX)
bt_pid=
cleanup() {
    if [ -n "$bt_pid" ] && kill -0 "$bt_pid" 2>/dev/null; then kill -INT "$bt_pid"; wait "$bt_pid"; fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# ---- the program ------------------------------------------------------------------------------
# peer MODE N: calls target() N times and prints ns per call. MODE: plain (no probe), opt (a
# liveprobe probe with an empty pre_handler, which must be optimized), bp (the same, which must
# take the breakpoint path: run it with LIVEPROBE_OPTIMIZE=0).
cat > "$tmp/peer.c" <<'C'
#define _GNU_SOURCE
#include <liveprobe/kprobes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__attribute__((noinline)) long target(long x)
{
    __asm__ volatile("" : "+r"(x));
    return x + 1;
}

static int empty_pre(struct kprobe *p, struct pt_regs *regs) { (void)p; (void)regs; return 0; }

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 3) { fprintf(stderr, "usage: peer plain|opt|bp N\n"); return 2; }
    const char *mode = argv[1];
    long n = atol(argv[2]);
    struct kprobe kp = {.symbol_name = "target", .pre_handler = empty_pre};
    if (strcmp(mode, "plain") != 0) {
        int err = register_kprobe(&kp);
        if (err) { fprintf(stderr, "register_kprobe: %s\n", liveprobe_strerror(err)); return 1; }
        struct liveprobe_info info;
        liveprobe_kprobe_info(&kp, &info);
        int want = strcmp(mode, "opt") == 0;
        if (info.optimized != want) {
            fprintf(stderr, "peer %s: the probe is %soptimized%s%s\n", mode, info.optimized ? "" : "not ",
                    info.why_not_optimized ? ": " : "", info.why_not_optimized ? info.why_not_optimized : "");
            return 1;
        }
    }
    long x = 0;
    target(x); /* warm */
    double t0 = now_ns();
    for (long i = 0; i < n; i++) x = target(x);
    double t1 = now_ns();
    unsigned long hits = 0;
    if (strcmp(mode, "plain") != 0) {
        struct liveprobe_info info;
        liveprobe_kprobe_info(&kp, &info);
        hits = info.hits;
        unregister_kprobe(&kp);
    }
    printf("%.2f %ld %lu\n", (t1 - t0) / n, x, hits); /* ns/call, result, liveprobe hits */
    return x == n ? 0 : 1;
}
C
if ! "$cc" -std=c11 -O2 -g "$tmp/peer.c" -I"$src/include" -L"$build/src" -lliveprobe \
        -Wl,-rpath,"$build/src" -o "$tmp/peer" 2> "$tmp/cc.err"; then
    echo "peers.sh: cannot build the test program:" >&2
    cat "$tmp/cc.err" >&2
    exit 1
fi
peer="$tmp/peer"

# run MODE [VAR=value...]: one run; its ns/call in $ns. Exits with the program's error.
run() {
    local mode=$1 out
    shift
    if ! env "$@" "$peer" "$mode" "$n" > "$tmp/run.out" 2> "$tmp/run.err"; then
        echo "peers.sh: peer $mode failed:" >&2
        cat "$tmp/run.out" "$tmp/run.err" >&2
        exit 1
    fi
    read -r ns _ < "$tmp/run.out"
}

# best MODE [VAR=value...]: the fastest of 5 runs in $ns. A run of liveprobe's modes lasts tens
# of milliseconds, where a shared machine's noise shows; the uprobe run lasts about 20 s and is
# run once (its best of 5 could only be faster: this favours the kernel, not liveprobe).
best() {
    local b=
    for _ in 1 2 3 4 5; do
        run "$@"
        b=$(awk -v a="$ns" -v b="$b" 'BEGIN { print (b == "" || a < b) ? a : b }')
    done
    ns=$b
}

# ---- bpftrace ---------------------------------------------------------------------------------
bt_why=
if ! command -v bpftrace > /dev/null; then
    if [ "$(id -u)" = 0 ]; then
        echo "peers.sh: installing bpftrace (apt-get install -y bpftrace)" >&2
        if ! DEBIAN_FRONTEND=noninteractive apt-get install -y bpftrace > "$tmp/apt.log" 2>&1; then
            apt-get update > /dev/null 2>&1
            DEBIAN_FRONTEND=noninteractive apt-get install -y bpftrace > "$tmp/apt.log" 2>&1 ||
                bt_why="apt-get install -y bpftrace failed: $(tail -3 "$tmp/apt.log")"
        fi
    else
        bt_why="bpftrace is not installed and this is not root: run 'apt-get install -y bpftrace' as root, then this script as root"
    fi
fi
if [ -z "$bt_why" ] && [ "$(id -u)" != 0 ]; then
    bt_why="bpftrace needs root (CAP_BPF + CAP_PERFMON); run this script as root"
fi

# ---- the runs ---------------------------------------------------------------------------------
echo "N = $n calls per run; program $peer (target() is a noinline x + 1)"
best plain; plain=$ns
best opt; opt=$ns
best bp LIVEPROBE_OPTIMIZE=0; bp=$ns

uprobe=
bt_count=
if [ -z "$bt_why" ]; then
    bpftrace -e "uprobe:$peer:target { @c = count(); }" > "$tmp/bt.out" 2> "$tmp/bt.err" &
    bt_pid=$!
    for _ in $(seq 1 300); do   # up to 30 s
        grep -q "Attaching" "$tmp/bt.out" 2>/dev/null && break
        kill -0 "$bt_pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$bt_pid" 2>/dev/null && grep -q "Attaching" "$tmp/bt.out"; then
        sleep 1   # "Attaching 1 probe..." is printed just before the attachment itself
        run plain; uprobe=$ns
        kill -INT "$bt_pid"
        wait "$bt_pid"
        bt_pid=
        bt_count=$(sed -n 's/^@c: *//p' "$tmp/bt.out")
        if [ -z "$bt_count" ] || [ "$bt_count" -lt "$n" ]; then
            bt_why="bpftrace attached but counted '${bt_count:-nothing}' hits for $n calls: $(cat "$tmp/bt.err")"
            uprobe=
        fi
    else
        if kill -0 "$bt_pid" 2>/dev/null; then kill -INT "$bt_pid"; wait "$bt_pid"; fi
        bt_pid=
        bt_why="bpftrace did not attach: $(cat "$tmp/bt.out" "$tmp/bt.err")"
    fi
fi

# ---- report -----------------------------------------------------------------------------------
hit() { awk -v a="$1" -v b="$plain" 'BEGIN { printf "%.1f", a - b }'; }
ratio() { awk -v u="$1" -v l="$2" -v p="$plain" 'BEGIN { d = l - p; if (d <= 0) print "n/a"; else printf "%.1f", (u - p) / d }'; }
printf '%-34s %10s %12s\n' "" "ns/call" "ns per hit"
printf '%-34s %10s %12s\n' "plain (no probe)" "$plain" "-"
printf '%-34s %10s %12s\n' "liveprobe, optimized (jmp)" "$opt" "$(hit "$opt")"
printf '%-34s %10s %12s\n' "liveprobe, breakpoint (int3)" "$bp" "$(hit "$bp")"
if [ -n "$uprobe" ]; then
    printf '%-34s %10s %12s\n' "bpftrace uprobe (@c = count())" "$uprobe" "$(hit "$uprobe")"
    echo "bpftrace counted $bt_count hits ($(bpftrace --version 2>/dev/null))"
    echo "uprobe / liveprobe optimized:  $(ratio "$uprobe" "$opt")x"
    echo "uprobe / liveprobe breakpoint: $(ratio "$uprobe" "$bp")x"
else
    echo "bpftrace uprobe: not measured. Why:"
    printf '%s\n' "$bt_why" | sed 's/^/  /'
fi
exit 0
