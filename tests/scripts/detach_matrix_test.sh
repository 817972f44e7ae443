#!/usr/bin/env bash
# Return probes removed while calls are in flight, through the tool (issue 30's matrix): 4
# threads in recursions of return-probed frames (nap_rec, 6 frames each, the innermost in nap,
# asleep) while a module's kretprobe is loaded and removed (insmod/rmmod; on nap_rec and on
# nap in turn: one call in flight a thread, or six), and while a trace of both is started and
# ended by Ctrl-C (-p), 100 rounds each, on the jump path and on the breakpoint path
# (LIVEPROBE_OPTIMIZE=0 in the target). The program checks every frame's return value; it must
# live through all of it and report none wrong.
source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" detach-matrix
target=$bin/tests/lp_nap_target
samples=$bin/samples
rounds=${DETACH_MATRIX_ROUNDS:-100}

for path in jump breakpoint; do
    opt=1; [ "$path" = breakpoint ] && opt=0
    LIVEPROBE_OPTIMIZE=$opt "${launch[@]}" "$target" 2000 0 4 5 >"$tmp/$path.out" 2>&1 &
    pid=$!; pids+=("$pid")
    for _ in $(seq 500); do grep -q '^ready$' "$tmp/$path.out" 2>/dev/null && break; sleep 0.01; done
    "$lp" attach -p "$pid" >/dev/null 2>&1 || { fail "$path: attach failed"; continue; }

    # insmod/rmmod with nap_rec's frames in flight in 4 threads.
    bad=0
    for i in $(seq "$rounds"); do
        func=nap_rec; [ $((i % 2)) -eq 0 ] && func=nap
        out=$("$lp" insmod -p "$pid" "$samples/kretprobe_example.so" func=$func 2>&1) || { bad=$((bad + 1)); echo "    insmod $i: $out"; break; }
        sleep 0.02
        out=$("$lp" rmmod -p "$pid" kretprobe_example 2>&1) || { bad=$((bad + 1)); echo "    rmmod $i: $out"; break; }
        kill -0 "$pid" 2>/dev/null || break
    done
    if kill -0 "$pid" 2>/dev/null && [ "$bad" -eq 0 ]; then pass "$path: $rounds insmod/rmmod rounds with calls in flight"
    else fail "$path: insmod/rmmod: the target died or a command failed"; fi

    # trace -p ended by Ctrl-C, in turn --hist and per-event mode.
    bad=0
    for i in $(seq "$rounds"); do
        kill -0 "$pid" 2>/dev/null || break
        mode=--hist; [ $((i % 2)) -eq 0 ] && mode=
        "$lp" trace -p "$pid" $mode nap_rec nap >"$tmp/trace.out" 2>&1 & tr=$!
        for _ in $(seq 500); do grep -q '^liveprobe: placed' "$tmp/trace.out" 2>/dev/null && break; sleep 0.01; done
        sleep 0.05
        kill -INT "$tr"; wait "$tr"; rc=$?
        if [ "$rc" -ne 0 ]; then bad=$((bad + 1)); echo "    trace $i: exit $rc"; tail -2 "$tmp/trace.out"; break; fi
    done
    if kill -0 "$pid" 2>/dev/null && [ "$bad" -eq 0 ]; then pass "$path: $rounds traces ended by Ctrl-C with calls in flight"
    else fail "$path: trace -p: the target died or the tool failed"; fi

    "$lp" status -p "$pid" 2>/dev/null | grep -q '^probes: 0$' && pass "$path: no probe left" || fail "$path: probes left"
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"; rc=$?
    if [ "$rc" -eq 0 ] && grep -Eq '^naps [1-9][0-9]* bad 0$' "$tmp/$path.out"; then pass "$path: $(tail -1 "$tmp/$path.out")"
    else fail "$path: the target exited $rc:"; sed 's/^/    /' "$tmp/$path.out" | tail -3; fi
done

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all passed"
