#!/usr/bin/env bash
# liveprobe against a peer: bpftrace's uprobe and uretprobe (the kernel's int3-based user
# probes) on the same function of the same program. Entry probes: liveprobe's optimized and
# breakpoint kprobes against a uprobe, each with an empty handler (bpftrace counts). Return
# probes: a liveprobe kretprobe against uprobe+uretprobe, with empty handlers (counting) and
# doing the seeds' work (the entry stamps the time, the return adds up the duration). Prints ns
# per call for each (probed ns/call - plain ns/call) and the ratios, from one run of this script
# (liveprobe's modes: the best of 5 short runs; bpftrace's: one run each).
#
#   bench/peers.sh                 # N = 1000000 calls per run
#   PEERS_N=200000 bench/peers.sh
#   PEERS_RET_N=50000 bench/peers.sh   # calls per run under bpftrace's uretprobe (default 200000)
#   LIVEPROBE_BINARY_DIR=/path/to/build bench/peers.sh   # default: build/ of this checkout
#
# bpftrace is installed with apt-get when missing (as root). When it cannot run (not root, no
# uprobes, lockdown, BTF, ...), its error is printed and liveprobe's figures still are; exit 0.
set -u

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LIVEPROBE_BINARY_DIR:-$src/build}
n=${PEERS_N:-1000000}
nret=${PEERS_RET_N:-200000}   # calls under bpftrace's return probes (tens of us each)
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
#include <liveprobe/ktime.h>
#include <stdint.h>
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

/* kret: empty entry handler, return handler that counts (checked against N).
 * kret_time: the seeds' use: the entry stamps the time into ri->data, the return adds up the
 * duration. */
static unsigned long returns;
static uint64_t total_ns;
static int empty_entry(struct kretprobe_instance *ri, struct pt_regs *regs) { (void)ri; (void)regs; return 0; }
static int count_return(struct kretprobe_instance *ri, struct pt_regs *regs) { (void)ri; (void)regs; returns++; return 0; }
static int stamp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    (void)regs;
    *(uint64_t *)ri->data = liveprobe_ktime_ns();
    return 0;
}
static int duration_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
    (void)regs;
    total_ns += liveprobe_ktime_ns() - *(uint64_t *)ri->data;
    returns++;
    return 0;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 3) { fprintf(stderr, "usage: peer plain|opt|bp|kret|kret_time N\n"); return 2; }
    const char *mode = argv[1];
    long n = atol(argv[2]);
    struct kprobe kp = {.symbol_name = "target", .pre_handler = empty_pre};
    int kret = strncmp(mode, "kret", 4) == 0;
    int timed = strcmp(mode, "kret_time") == 0;
    struct kretprobe rp = {.kp.symbol_name = "target",
                           .entry_handler = timed ? stamp_entry : empty_entry,
                           .handler = timed ? duration_return : count_return,
                           .data_size = sizeof(uint64_t)};
    if (kret) {
        int err = register_kretprobe(&rp);
        if (err) { fprintf(stderr, "register_kretprobe: %s\n", liveprobe_strerror(err)); return 1; }
        struct liveprobe_info info;
        liveprobe_kprobe_info(&rp.kp, &info);
        if (!info.optimized) {
            fprintf(stderr, "peer %s: the entry probe is not optimized: %s\n", mode, info.why_not_optimized);
            return 1;
        }
    } else if (strcmp(mode, "plain") != 0) {
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
    if (kret) {
        hits = returns - 1; /* the warm-up call */
        unregister_kretprobe(&rp);
        if (timed && total_ns == 0) { fprintf(stderr, "peer: no duration measured\n"); return 1; }
    } else if (strcmp(mode, "plain") != 0) {
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

best kret; kret=$ns
best kret_time; kret_time=$ns

# bt_measure SCRIPT N: runs the plain program (N calls) under bpftrace -e SCRIPT, whose map @c
# must count N; sets $ns (ns/call) and $bt_count, or leaves $ns empty and says why in $bt_why.
bt_measure() {
    local script=$1 calls=$2 saved_n=$n
    ns=
    bt_count=
    [ -n "$bt_why" ] && return
    bpftrace -e "$script" > "$tmp/bt.out" 2> "$tmp/bt.err" &
    bt_pid=$!
    for _ in $(seq 1 300); do   # up to 30 s
        grep -q "Attaching" "$tmp/bt.out" 2>/dev/null && break
        kill -0 "$bt_pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$bt_pid" 2>/dev/null && grep -q "Attaching" "$tmp/bt.out"; then
        sleep 1   # "Attaching N probes..." is printed just before the attachment itself
        n=$calls
        run plain
        n=$saved_n
        kill -INT "$bt_pid"
        wait "$bt_pid"
        bt_pid=
        bt_count=$(sed -n 's/^@c: *//p' "$tmp/bt.out")
        if [ -z "$bt_count" ] || [ "$bt_count" -lt "$calls" ]; then
            bt_why="bpftrace attached but counted '${bt_count:-nothing}' hits for $calls calls: $(cat "$tmp/bt.err")"
            ns=
        fi
    else
        if kill -0 "$bt_pid" 2>/dev/null; then kill -INT "$bt_pid"; wait "$bt_pid"; fi
        bt_pid=
        bt_why="bpftrace did not attach: $(cat "$tmp/bt.out" "$tmp/bt.err")"
    fi
}

bt_measure "uprobe:$peer:target { @c = count(); }" "$n"; uprobe=$ns; up_count=$bt_count
bt_measure "uprobe:$peer:target { @e = count(); } uretprobe:$peer:target { @c = count(); }" "$nret"
uret=$ns
bt_measure "uprobe:$peer:target { @s[tid] = nsecs; } uretprobe:$peer:target { @ns = sum(nsecs - @s[tid]); delete(@s[tid]); @c = count(); }" "$nret"
uret_time=$ns

# ---- report -----------------------------------------------------------------------------------
hit() { awk -v a="$1" -v b="$plain" 'BEGIN { printf "%.1f", a - b }'; }
ratio() { awk -v u="$1" -v l="$2" -v p="$plain" 'BEGIN { d = l - p; if (d <= 0) print "n/a"; else printf "%.1f", (u - p) / d }'; }
w='%-44s %10s %12s\n'
printf "$w" "" "ns/call" "ns per call"
printf "$w" "plain (no probe)" "$plain" "-"
printf "$w" "liveprobe kprobe, optimized (jmp)" "$opt" "$(hit "$opt")"
printf "$w" "liveprobe kprobe, breakpoint (int3)" "$bp" "$(hit "$bp")"
printf "$w" "liveprobe kretprobe, empty handlers" "$kret" "$(hit "$kret")"
printf "$w" "liveprobe kretprobe, ktime duration" "$kret_time" "$(hit "$kret_time")"
[ -n "$uprobe" ] && printf "$w" "bpftrace uprobe (count)" "$uprobe" "$(hit "$uprobe")"
[ -n "$uret" ] && printf "$w" "bpftrace uprobe+uretprobe (count)" "$uret" "$(hit "$uret")"
[ -n "$uret_time" ] && printf "$w" "bpftrace uprobe+uretprobe (nsecs duration)" "$uret_time" "$(hit "$uret_time")"
if [ -n "$uprobe" ]; then
    echo "bpftrace counted $up_count hits ($(bpftrace --version 2>/dev/null)); return probes: $nret calls per run"
    echo "uprobe / liveprobe kprobe optimized:           $(ratio "$uprobe" "$opt")x"
    echo "uprobe / liveprobe kprobe breakpoint:          $(ratio "$uprobe" "$bp")x"
fi
[ -n "$uret" ] && echo "uprobe+uretprobe / liveprobe kretprobe:        $(ratio "$uret" "$kret")x"
[ -n "$uret_time" ] && echo "same, timing the call (bpftrace / liveprobe):  $(ratio "$uret_time" "$kret_time")x"
if [ -z "$uprobe" ] || [ -z "$uret" ] || [ -z "$uret_time" ]; then
    echo "bpftrace: not (all) measured. Why:"
    printf '%s\n' "$bt_why" | sed 's/^/  /'
fi
exit 0
