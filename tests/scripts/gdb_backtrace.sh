#!/usr/bin/env bash
# Debuggers see through probes: gdb attached to a process stopped below two frames whose
# return addresses liveprobe replaced, inside a kprobe's pre handler, and inside a return
# handler, shows the real callers in order, on both entry paths; continued, the process still
# runs every handler.
set -euo pipefail
prog="$LIVEPROBE_BINARY_DIR/tests/lp_gdb_target"
command -v gdb >/dev/null || { echo "FAIL: gdb is not installed (scripts/deps.sh installs it)"; exit 1; }
fail=0
# mode, then the program's frames gdb must show, in order, with nothing between them but
# liveprobe's own (and none of the program's after main).
cases=(
    "below|lp_gdb_inner lp_gdb_middle lp_gdb_outer main "
    "pre|on_pre lp_gdb_inner lp_gdb_middle lp_gdb_outer main "
    "return|on_return lp_gdb_outer main "
)
for optimize in 1 0; do
    for c in "${cases[@]}"; do
        mode=${c%%|*}
        want=${c#*|}
        out=$(mktemp)
        LIVEPROBE_OPTIMIZE=$optimize "$prog" "$mode" >"$out" 2>&1 &
        pid=$!
        # Wait until it has stopped itself (state T).
        for _ in $(seq 1 200); do
            [ "$(awk '{print $3}' /proc/$pid/stat 2>/dev/null)" = "T" ] && break
            sleep 0.05
        done
        bt=$(gdb -batch -nx -p "$pid" -ex "bt" 2>&1 | grep -E '^#' || true)
        kill -CONT "$pid"
        wait "$pid" || true
        # "#N  0x... in name (" or, for a frame stopped at a function's first byte, "#N  name (".
        order=$(echo "$bt" | grep -oE '^#[0-9]+ +(0x[0-9a-f]+ in )?(on_pre|on_return|lp_gdb_inner|lp_gdb_middle|lp_gdb_outer|main) ' |
                awk '{print $NF}' | tr '\n' ' ')
        what="LIVEPROBE_OPTIMIZE=$optimize, stopped $mode"
        if [ "$order" != "$want" ]; then
            echo "FAIL ($what): gdb's backtrace does not show ${want% } in order:"
            echo "$bt"; fail=1
        else
            echo "PASS ($what): gdb shows ${want% }"
        fi
        if ! grep -q "lp_gdb_outer returned 3, return handlers 2, pre handlers 1" "$out"; then
            echo "FAIL ($what): after the debugger left:"; cat "$out"; fail=1
        fi
        rm -f "$out"
    done
done
exit $fail
