#!/bin/bash
# Instructions per probed call, counted by single-stepping one call under gdb: a figure that,
# unlike nanoseconds on this shared machine, does not move with the load. Each mode calls a
# noinline function (`lea 1(%rdi),%rax; ret` in effect) 100 times to warm up, then once between
# two calls of marker(); the script steps from the first marker to the second and prints the
# instructions executed, by function, and the difference to the unprobed call.
#
#   bash bench/insn_count.sh                 # every mode
#   bash bench/insn_count.sh kret_empty -v   # one mode, with each function's share
#
# Modes: unprobed; kprobe_full (a pre handler that reads its regs: the full jump path);
# kret_empty (a kretprobe with empty entry and return handlers).
# Not countable this way: the light entry (single-stepping sets TF, and a hit with TF set takes
# the full entry by design: arch/x86_64/detour.hpp), and the clock (liveprobe_ktime_ns under
# gdb, whose steps take milliseconds, runs the refinement's slow path every time). The full
# entry's step 1 with TF set executes 3 instructions more than without (it clears TF: pushf,
# and, popf), counted here.
#
# Environment: LIVEPROBE_BINARY_DIR (default build/ of this checkout). Needs gdb and cc.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${LIVEPROBE_BINARY_DIR:-$here/build}
modes=(unprobed kprobe_full kret_empty)
verbose=0
case "${1:-}" in
-h | --help)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
if [ $# -gt 0 ]; then
    modes=("$1")
    [ "${2:-}" = -v ] && verbose=1
fi
for tool in gdb cc; do
    command -v $tool >/dev/null || { echo "insn_count.sh: $tool is missing" >&2; exit 1; }
done
[ -f "$bin/src/libliveprobe.so" ] || { echo "insn_count.sh: no $bin/src/libliveprobe.so (build first: make build)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/lp-insn.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/calls.c" <<'EOF'
#include <liveprobe/kprobes.h>
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) long target(long x) { __asm__ volatile("" : "+r"(x)); return x + 1; }
__attribute__((noinline)) void marker(void) { __asm__ volatile(""); }

static volatile unsigned long g_seen;
static int pre_regs(struct kprobe *p, struct pt_regs *r) { (void)p; g_seen = r->di; return 0; }
static int kret_nothing(struct kretprobe_instance *ri, struct pt_regs *r) { (void)ri; (void)r; return 0; }

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "unprobed";
    static struct kprobe kp;
    static struct kretprobe rp;
    int err = 0;
    kp.symbol_name = rp.kp.symbol_name = "target";
    if (strcmp(mode, "kprobe_full") == 0) {
        kp.pre_handler = pre_regs;
        err = register_kprobe(&kp);
    } else if (strcmp(mode, "kret_empty") == 0) {
        rp.entry_handler = kret_nothing;
        rp.handler = kret_nothing;
        err = register_kretprobe(&rp);
    } else if (strcmp(mode, "unprobed") != 0) {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    if (err) {
        fprintf(stderr, "register: %s\n", liveprobe_strerror(err));
        return 1;
    }
    long x = 0;
    for (int i = 0; i < 100; i++) x = target(x);
    marker();
    x = target(x);
    marker();
    printf("%ld\n", x);
    return x == 101 ? 0 : 1;
}
EOF
cc -O2 -g -o "$tmp/calls" "$tmp/calls.c" -I"$here/include" -L"$bin/src" -lliveprobe -Wl,-rpath,"$bin/src"
cat >"$tmp/count.py" <<'EOF'
import gdb
gdb.execute("set pagination off")
gdb.execute("break marker")
gdb.execute("run")
gdb.execute("finish", to_string=True)
n = 0
funcs = {}
while n < 20000:
    f = gdb.selected_frame()
    name = f.name() or "(no symbol: a detour or trampoline block)"
    gdb.execute("stepi", to_string=True)
    n += 1
    funcs[name] = funcs.get(name, 0) + 1
    if gdb.selected_frame().name() == "marker":
        break
print("COUNT %d" % n)
for k, v in sorted(funcs.items(), key=lambda x: -x[1]):
    print("FUNC %6d %s" % (v, k))
gdb.execute("kill")
EOF
count() {
    gdb -q -batch -x "$tmp/count.py" --args "$tmp/calls" "$1" 2>/dev/null
}
base=$(count unprobed | sed -n 's/^COUNT //p')
[ -n "$base" ] || { echo "insn_count.sh: gdb could not step the unprobed call" >&2; exit 1; }
printf '%-14s %12s %12s\n' mode instructions added
for m in "${modes[@]}"; do
    out=$(count "$m")
    n=$(sed -n 's/^COUNT //p' <<<"$out")
    [ -n "$n" ] || { echo "insn_count.sh: $m: gdb could not step the call" >&2; exit 1; }
    printf '%-14s %12d %12d\n' "$m" "$n" $((n - base))
    if [ $verbose = 1 ]; then
        sed -n 's/^FUNC /    /p' <<<"$out"
    fi
done
