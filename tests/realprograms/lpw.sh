#!/usr/bin/env bash
# lpw.sh PROG [ARGS]: runs one process of a program's test suite as the suite would, in the mode
# the driver (run.sh) sets, and keeps liveprobe's own output apart from the program's:
#   LPW_MODE=none    exec PROG (the baseline)
#   LPW_MODE=count   liveprobe trace --count SPECS -- PROG
#   LPW_MODE=hist    liveprobe trace --hist SPECS -- PROG
#   LPW_MODE=events  liveprobe trace -o FILE SPECS -- PROG (FILE's size noted, then deleted)
#   LPW_MODE=stacks  liveprobe trace --count --stacks --filter 'tid > 0' SPECS -- PROG
#   LPW_MODE=attach  PROG runs untraced while a loop attaches `liveprobe trace -p PID --count
#                    SPECS` to it and detaches, again and again, until it ends
# LPW_SPECS: the specs, one a line; LPW_LOG: the directory of liveprobe's logs (one pair of files
# per process); LIVEPROBE: the tool; LPW_SHIM: fdshim.so. The program gets the suite's stdin,
# stdout and stderr (through fdshim.so under trace -- PROG); the exit status is the program's,
# and a program killed by a signal kills this script with the same signal.
set -u
mode=${LPW_MODE:-none}
[ "$mode" = none ] && exec "$@"
: "${LIVEPROBE:?}" "${LPW_LOG:?}" "${LPW_SPECS:?}" "${LPW_SHIM:?}"
mapfile -t specs <<<"$LPW_SPECS"
id=$(date +%s%N).$$
log=$LPW_LOG/$id
die_like() {  # the program's fate as this script's own
    local rc=$1
    if [ "$rc" -gt 128 ] && [ "$rc" -lt 160 ]; then
        trap - "$((rc - 128))" 2>/dev/null
        kill -s "$((rc - 128))" $$ 2>/dev/null
        sleep 1
    fi
    exit "$rc"
}
case $mode in
count | hist | events | stacks)
    # --verbose: the probes on the breakpoint path, and which of them were called (the jump
    # path's share of the functions that ran, run.sh's jump_share).
    opts=(--"$mode" --verbose)
    if [ "$mode" = events ]; then opts=(-o "$log.lptrace"); fi
    if [ "$mode" = stacks ]; then opts=(--count --stacks --stack-depth 16 --filter 'tid > 0'); fi
    printf '%s\n' "$*" >"$log.cmd"
    # 61 and 62: the suite's stdout and stderr, which fdshim.so gives back to the program.
    (
        export LPW_FDSHIM_PARENT=$BASHPID LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$LPW_SHIM"
        exec "$LIVEPROBE" trace "${opts[@]}" "${specs[@]}" -- "$@" >"$log.out" 2>"$log.err"
    ) 61>&1 62>&2
    rc=$?
    if [ "$mode" = events ] && [ -e "$log.lptrace" ]; then
        stat -c %s "$log.lptrace" >"$log.size"
        rm -f "$log.lptrace"
    fi
    die_like "$rc"
    ;;
attach)
    printf '%s\n' "$*" >"$log.cmd"
    "$@" 0<&0 &
    pid=$!
    (
        # Cycles until the process ends: attach, trace for a while, end the trace (--duration,
        # or SIGINT to the tool as Ctrl-C would), and now and then detach the agent too.
        n=0
        while kill -0 "$pid" 2>/dev/null; do
            n=$((n + 1))
            [ "$n" = 1 ] || sleep "0.0$((RANDOM % 10))"  # the first at once: most processes are short
            kill -0 "$pid" 2>/dev/null || break
            if [ $((n % 2)) = 1 ]; then
                "$LIVEPROBE" trace -p "$pid" --count --duration 1 "${specs[@]}" >>"$log.out" 2>>"$log.err" </dev/null
                echo "cycle $n: rc=$? (--duration 1)" >>"$log.cycles"
            else
                "$LIVEPROBE" trace -p "$pid" --count "${specs[@]}" >>"$log.out" 2>>"$log.err" </dev/null &
                tpid=$!
                sleep "0.$((RANDOM % 9 + 1))"
                kill -INT "$tpid" 2>/dev/null
                wait "$tpid"
                echo "cycle $n: rc=$? (SIGINT)" >>"$log.cycles"
            fi
            if [ $((n % 3)) = 0 ] && kill -0 "$pid" 2>/dev/null; then
                "$LIVEPROBE" detach -p "$pid" >>"$log.detach" 2>&1
                echo "cycle $n: detach rc=$?" >>"$log.cycles"
            fi
        done
    ) </dev/null >>"$log.loop" 2>&1 &
    loop=$!
    wait "$pid"
    rc=$?
    wait "$loop"
    die_like "$rc"
    ;;
*)
    echo "lpw.sh: unknown LPW_MODE '$mode'" >&2
    exit 2
    ;;
esac
