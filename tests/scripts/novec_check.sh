#!/usr/bin/env bash
# The jump path runs before the vector state is saved (arch/x86_64/jump_path.cpp): the objects
# of the dispatcher must hold no instruction that touches xmm/ymm/zmm/k/x87/mmx state.
set -euo pipefail
objdir="$LIVEPROBE_BINARY_DIR/src/CMakeFiles/liveprobe_objects.dir"
fail=0
for obj in arch/x86_64/jump_path.cpp.o core/dispatch.cpp.o core/thread_state.cpp.o core/probe_table.cpp.o \
           core/kret_hit.cpp.o core/kret_unwind.cpp.o core/jprobe_hit.cpp.o os/linux/clock.cpp.o; do
    f="$objdir/$obj"
    if [ ! -f "$f" ]; then echo "FAIL: $f not built"; fail=1; continue; fi
    # xsave/xrstor/fxsave themselves are the point of vector_state.hpp: allowed.
    # Instruction lines only ("addr:<TAB>mnemonic operands"); xsave/xrstor/fxsave themselves
    # are the point of vector_state.hpp: allowed.
    hits=$(objdump -d --no-show-raw-insn "$f" | awk -F'\t' 'NF >= 2 && $1 ~ /^ *[0-9a-f]+:$/ {print $2}' \
        | grep -E '%(x|y|z)mm[0-9]|%k[0-7]|%st|%mm[0-7]|^(f[a-z0-9]*|emms|ldmxcsr|stmxcsr|vzero[a-z]+|v[a-z0-9]+|[a-z]*ps|[a-z]*pd) ' \
        | grep -vE '^(xsave64|xrstor64|fxsave64|fxrstor64) ' || true)
    if [ -n "$hits" ]; then
        echo "FAIL: $obj touches vector state:"; echo "$hits" | head -5; fail=1
    else
        echo "PASS: $obj has no vector instruction"
    fi
done
exit $fail
