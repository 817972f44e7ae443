#!/usr/bin/env bash
# Debuggers see through return probes: gdb attached to a process stopped below two frames
# whose return addresses liveprobe replaced shows their real callers, in order, on both entry
# paths; continued, the process still runs both return handlers.
set -euo pipefail
prog="$LIVEPROBE_BINARY_DIR/tests/lp_gdb_target"
command -v gdb >/dev/null || { echo "FAIL: gdb is not installed (scripts/deps.sh installs it)"; exit 1; }
fail=0
for optimize in 1 0; do
    out=$(mktemp)
    LIVEPROBE_OPTIMIZE=$optimize "$prog" >"$out" 2>&1 &
    pid=$!
    # Wait until it has stopped itself (state T).
    for _ in $(seq 1 200); do
        [ "$(awk '{print $3}' /proc/$pid/stat 2>/dev/null)" = "T" ] && break
        sleep 0.05
    done
    bt=$(gdb -batch -nx -p "$pid" -ex "bt" 2>&1 | grep -E '^#' || true)
    kill -CONT "$pid"
    wait "$pid" || true
    # The frames, in order, with nothing after lp_gdb_outer but main.
    order=$(echo "$bt" | grep -oE 'in (lp_gdb_inner|lp_gdb_middle|lp_gdb_outer|main) ' | awk '{print $2}' | tr '\n' ' ')
    if [ "$order" != "lp_gdb_inner lp_gdb_middle lp_gdb_outer main " ]; then
        echo "FAIL (LIVEPROBE_OPTIMIZE=$optimize): gdb's backtrace does not show the real callers in order:"
        echo "$bt"; fail=1
    else
        echo "PASS (LIVEPROBE_OPTIMIZE=$optimize): gdb shows lp_gdb_inner, lp_gdb_middle, lp_gdb_outer, main"
    fi
    if ! grep -q "lp_gdb_outer returned 3, return handlers 2" "$out"; then
        echo "FAIL (LIVEPROBE_OPTIMIZE=$optimize): after the debugger left:"; cat "$out"; fail=1
    fi
    rm -f "$out"
done
exit $fail
