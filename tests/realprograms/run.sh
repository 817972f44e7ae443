#!/usr/bin/env bash
# The real-program suite (issue 31, item 8): programs nobody here wrote, built from their Debian
# 12 source packages as Debian builds them (scripts/realprograms-fetch.sh, into a cache), each
# running its OWN test suite in every mode:
#   none     untraced: the baseline
#   count    liveprobe trace --count SPECS -- PROG, for each process of the program
#   hist     liveprobe trace --hist SPECS -- PROG
#   events   liveprobe trace -o FILE SPECS -- PROG (a subset of the suite: the files are deleted
#            after each process, their sizes kept)
#   stacks   liveprobe trace --count --stacks --filter 'tid > 0' SPECS -- PROG (the same subset):
#            every call's stack walked, and a filter evaluated, at each return
#   attach   untraced, while a loop attaches `liveprobe trace -p PID --count SPECS` to each
#            process of the program (only those the suite started) and detaches, in cycles
#   exec     liveprobe trace --count SPECS -- the suite's own runner (`make check`, its script):
#            every process the suite runs, once `trace -- CMD` follows exec (before that, the
#            runner only)
# and checking that each mode gives the same per-test results (pass/fail of each test) and the
# same output, once times, addresses and random seeds are masked (each program's file says how).
# SPECS is '*' and the program's own shared libraries ('libjq.so.1:*'): every function of the
# program. Per-test timeouts are scaled in traced modes.
#
# Each program is described by tests/realprograms/programs/NAME.sh (how to fetch and build it:
# scripts/realprograms-fetch.sh; how to list, run and mask its tests: below). Each process of the
# program is started through lpw.sh, which runs it in the mode (and keeps liveprobe's own output
# apart from the program's through fdshim.c, preloaded).
#
#   tests/realprograms/run.sh                       # every program, every mode
#   tests/realprograms/run.sh jq xz-utils           # these programs
#   RP_MODES="none count" tests/realprograms/run.sh jq
#   RP_QUICK=1 tests/realprograms/run.sh xz-utils   # each program's short subset
#
# Environment: LIVEPROBE (the tool; default LIVEPROBE_BINARY_DIR/tools/liveprobe/liveprobe, or
# build/ of this checkout), LIVEPROBE_REALPROGRAMS_CACHE (default /var/cache/liveprobe/realprograms),
# RP_MODES, RP_QUICK, RP_WORK (where the runs' outputs go; default a new directory under /tmp, kept
# when something did not match), RP_RESULTS (also write the table, as markdown, to this file).
# Exit status: 0 when every mode of every program matched its baseline, 1 otherwise.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${LIVEPROBE_BINARY_DIR:-$src/build}
LIVEPROBE=${LIVEPROBE:-$build/tools/liveprobe/liveprobe}
cache=${LIVEPROBE_REALPROGRAMS_CACHE:-/var/cache/liveprobe/realprograms}
modes=${RP_MODES:-none count hist events stacks attach exec}
# exec is compared with the same runner untraced (execbase), run just before it.
# attach is compared with attachbase, the same runs untraced, where the program lengthens its
# runs for it (RP_ATTACH_LONG: processes that live long enough to be attached to many times).
modes=$(echo " $modes " | sed 's/ exec / execbase exec /; s/ attach / attachbase attach /; s/^ //; s/ $//')
say() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'realprograms: error: %s\n' "$*" >&2; exit 1; }

[ -x "$LIVEPROBE" ] || die "no liveprobe tool at $LIVEPROBE (build liveprobe first, or set LIVEPROBE)"
LIVEPROBE=$(cd "$(dirname "$LIVEPROBE")" && pwd)/$(basename "$LIVEPROBE")
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in "$here"/programs/*.sh; do names+=("$(basename "$f" .sh)"); done
fi
work=${RP_WORK:-$(mktemp -d /tmp/liveprobe-realprograms.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
export LIVEPROBE_RUNTIME_DIR
LIVEPROBE_RUNTIME_DIR=$(mktemp -d)
cleanup() { rm -rf "$LIVEPROBE_RUNTIME_DIR"; }
trap cleanup EXIT

# fdshim.so: built here, for this run.
gcc -shared -fPIC -O2 -o "$work/fdshim.so" "$here/fdshim.c" -ldl || die "cannot build fdshim.so"
export LIVEPROBE LPW_SHIM=$work/fdshim.so LPW=$here/lpw.sh

timeout_scale() {  # per-test timeout multiplier of a mode
    case $1 in none | execbase | attachbase) echo 1 ;; count | attach) echo 6 ;; hist) echo 25 ;; exec) echo 40 ;; events | stacks) echo 40 ;; esac
}

# Figures of one mode's liveprobe logs (LOGDIR/*.err): prints "probes jump calls dropped
# noring missed sessions unknown_missed" (probes: the most placed in one process).
figures() {
    cat "$1"/*.err 2>/dev/null | awk '
        /^liveprobe: (.*: )?placed [0-9]+ probes \(/ {
            for (i = 1; i < NF; i++) if ($i == "placed") { p = $(i + 1); j = $(i + 3); sub(/\(/, "", j) }
            if (p + 0 > best) { best = p + 0; bj = j + 0 } }
        /^liveprobe: [0-9]+ functions traced, [0-9]+ calls/ {
            s++; calls += $5
            for (i = 1; i <= NF; i++) {
                if ($i == "dropped") drop += $(i - 1)
                if ($i == "without") noring += $(i - 1)
                if ($i == "missed") { if ($(i + 1) ~ /^[0-9]+/) missed += $(i + 1); else unknown++ }
            }
        }
        END { printf "%d %d %d %d %d %d %d %d\n", best, bj, calls, drop, noring, missed, s, unknown }'
}

# The jump path's share of the functions that ran (issue 31, item 7), from the --count runs'
# logs (LOGDIR: *.out, the count tables; *.err, --verbose's list of the functions called on
# the breakpoint path), over every process of the program: prints "called short long slow
# hot_slow", where short are the called functions too short for the jump (a ret or the
# function's end less than 5 bytes from the entry), long the others, slow those of them on the
# breakpoint path, hot_slow those among the 20 most called of them; writes the slow ones, most
# called first, with their reasons, to OUT.
jump_share() {  # LOGDIR OUT
    : >"$2"
    # A name is the same function with or without its executable's name before it ("gawk:do_sub"
    # once a process ran more than one executable; a library's "libz.so.1:" stays).
    awk -v out="$2" '
        function own(n) { if (match(n, /^[A-Za-z0-9_.+-]+:[^:]/) && substr(n, 1, RLENGTH - 1) !~ /\.so/) return substr(n, RLENGTH); return n }
        FNR == 1 { err = FILENAME ~ /\.err$/ }
        !err && / [0-9]+$/ && !/^\(/ { n = $NF; name = $0; sub(/ +[0-9]+$/, "", name); calls[own(name)] += n; next }
        err && /^liveprobe:   / && match($0, /: [0-9]+ calls?: /) {
            why = substr($0, RSTART + RLENGTH)  # before own(), whose match() sets RSTART again
            name = own(substr($0, 14, RSTART - 14))
            reason[name] = why
            if (why ~ /^(a ret ends the code|the function ends|a jump through a pointer ends the code) [0-9]+ bytes/) short[name] = 1
        }
        END {
            for (f in calls) {
                if (f in short) { ns++; continue }
                long[++nl] = f
                if (f in reason) { nslow++; print calls[f] "\t" f "\t" reason[f] > out }
            }
            for (k = 1; k <= 20 && k <= nl; k++) {  # the 20 most called of them, by selection
                best = 0
                for (i = 1; i <= nl; i++)
                    if (!(i in taken) && (best == 0 || calls[long[i]] > calls[long[best]])) best = i
                taken[best] = 1
                if (long[best] in reason) hot++
            }
            printf "%d %d %d %d %d\n", ns + nl, ns, nl, nslow, hot
        }' "$1"/*.out "$1"/*.err 2>/dev/null
    sort -t "$(printf '\t')" -k1,1nr -o "$2" "$2"
}

rows=()
status=0
for name in "${names[@]}"; do
    pf=$here/programs/$name.sh
    [ -f "$pf" ] || die "no program '$name' (no $pf)"
    tree=$cache/build/$name
    # What one program's file sets is not the next one's.
    unset RP_BUILT RP_SPECS RP_EXEC RP_ATTACH_LONG RP_TIMEOUT RP_LANG RP_STDERR_UNORDERED
    unset -f rp_tests rp_events_tests rp_run rp_result rp_mask rp_exec_setup rp_build_extra
    # shellcheck source=/dev/null
    . "$pf"
    if [ ! -e "$tree/$RP_BUILT" ] || [ ! -e "$tree/.rp-stamp" ]; then
        die "$name: no build in $tree: run scripts/realprograms-fetch.sh $name first (as root: it fetches the source package and installs its build dependencies)"
    fi
    say "$name: $(cat "$tree/.rp-stamp") in $tree"
    pw=$work/$name
    mkdir -p "$pw"
    : >"$pw/figures"  # this run's only (an RP_WORK used before held another run's)
    declare -A secs=()
    for mode in $modes; do
        if [ "${mode#exec}" != "$mode" ] && [ -z "${RP_EXEC[*]:-}" ]; then continue; fi
        if [ "$mode" = attachbase ] && [ -z "${RP_ATTACH_LONG:-}" ]; then continue; fi
        long=
        if [ "${mode#attach}" != "$mode" ] && [ -n "${RP_ATTACH_LONG:-}" ]; then long=1; fi
        md=$pw/$mode
        rm -rf "$md"
        mkdir -p "$md/lp" "$md/t"
        if [ "${mode#exec}" != "$mode" ]; then
            ids=(suite)
        elif [ "$mode" = events ] || [ "$mode" = stacks ]; then
            mapfile -t ids < <(cd "$tree" && RP_TREE=$tree RP_WORK=$pw rp_events_tests)
        else
            mapfile -t ids < <(cd "$tree" && RP_TREE=$tree RP_WORK=$pw rp_tests)
        fi
        [ ${#ids[@]} -gt 0 ] || die "$name: no tests listed"
        lim=$((RP_TIMEOUT * $(timeout_scale "$mode")))
        say "$name: $mode: ${#ids[@]} tests (timeout ${lim} s each)"
        t0=$(date +%s.%N)
        for id in "${ids[@]}"; do
            f=$md/t/${id//\//_}
            rc=0
            if [ "${mode#exec}" != "$mode" ]; then
                # The suite's own runner under one trace (exec followed: every process it runs),
                # and untraced (execbase).
                lm=count
                [ "$mode" = exec ] || lm=none
                (cd "$tree" && export RP_TREE=$tree RP_WORK=$pw LPW_MODE=$lm LPW_LOG=$md/lp \
                    LPW_SPECS="$(printf '%s\n' "${RP_SPECS[@]}")" &&
                    if declare -F rp_exec_setup >/dev/null; then rp_exec_setup; fi &&
                    timeout -k 30 "$lim" "$LPW" "${RP_EXEC[@]}") >"$f.out" 2>"$f.err" </dev/null || rc=$?
            else
                lm=$mode
                [ "$mode" = attachbase ] && lm=none
                (cd "$tree" && RP_TREE=$tree RP_WORK=$pw LPW_MODE=$lm LPW_LOG=$md/lp RP_LONG=$long \
                    LPW_SPECS="$(printf '%s\n' "${RP_SPECS[@]}")" \
                    timeout -k 30 "$lim" bash -c '. "$1"; rp_run "$2"' rp "$pf" "$id") >"$f.out" 2>"$f.err" </dev/null || rc=$?
            fi
            echo "$rc" >"$f.rc"
            {
                echo "rc=$rc"
                (cd "$tree" && RP_TREE=$tree RP_WORK=$pw bash -c '. "$1"; if declare -F rp_result >/dev/null; then rp_result "$2" "$3"; fi' rp "$pf" "$id" "$f")
            } >"$f.result"
            (cd "$tree" && bash -c '. "$1"; if declare -F rp_mask >/dev/null; then rp_mask; else cat; fi' rp "$pf") <"$f.out" >"$f.mout"
            (cd "$tree" && bash -c '. "$1"; if declare -F rp_mask >/dev/null; then rp_mask; else cat; fi' rp "$pf") <"$f.err" >"$f.merr"
        done
        secs[$mode]=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
        say "$name: $mode: ${secs[$mode]} s"
    done

    # Every mode against the baseline, test by test.
    declare -A verdict=()
    for mode in $modes; do
        [ "$mode" = none ] || [ "$mode" = execbase ] || [ "$mode" = attachbase ] && continue
        base=$pw/none/t
        [ "$mode" = exec ] && base=$pw/execbase/t
        [ "$mode" = attach ] && [ -d "$pw/attachbase/t" ] && base=$pw/attachbase/t
        [ -d "$pw/$mode/t" ] || continue
        bad=0
        : >"$pw/$mode/mismatches"
        for r in "$pw/$mode"/t/*.result; do
            id=$(basename "$r" .result)
            if [ ! -e "$base/$id.result" ]; then
                echo "$id: no baseline" >>"$pw/$mode/mismatches"
                bad=$((bad + 1))
                continue
            fi
            what=()
            cmp -s "$r" "$base/$id.result" || what+=("results")
            cmp -s "$pw/$mode/t/$id.mout" "$base/$id.mout" || what+=("stdout")
            if [ -n "${RP_STDERR_UNORDERED:-}" ]; then
                cmp -s <(sort "$pw/$mode/t/$id.merr") <(sort "$base/$id.merr") || what+=("stderr")
            else
                cmp -s "$pw/$mode/t/$id.merr" "$base/$id.merr" || what+=("stderr")
            fi
            if [ ${#what[@]} -gt 0 ]; then
                bad=$((bad + 1))
                {
                    echo "== $id: ${what[*]} differ (rc $(cat "$base/$id.rc") untraced, $(cat "$pw/$mode/t/$id.rc") under $mode)"
                    diff "$base/$id.result" "$r" | head -n 20 || true
                    diff "$base/$id.mout" "$pw/$mode/t/$id.mout" | head -n 20 || true
                    diff "$base/$id.merr" "$pw/$mode/t/$id.merr" | head -n 20 || true
                } >>"$pw/$mode/mismatches"
            fi
        done
        n=$(find "$pw/$mode/t" -name '*.result' | wc -l)
        if [ "$bad" = 0 ]; then verdict[$mode]="same ($n)"; else verdict[$mode]="DIFFER ($bad of $n)"; status=1; fi
    done

    # The figures: per mode, then the row of the table.
    for mode in $modes; do
        [ -d "$pw/$mode/lp" ] || continue
        read -r probes jump calls drop noring missed sessions unknown < <(figures "$pw/$mode/lp")
        extra=
        if [ "$mode" = attach ]; then
            att=$(cat "$pw/$mode"/lp/*.cycles 2>/dev/null | grep -c 'rc=' || true)
            ok=$(cat "$pw/$mode"/lp/*.cycles 2>/dev/null | grep -c -E 'rc=(0|130)' || true)
            extra=" cycles=$att ended-ok=$ok detaches=$(cat "$pw/$mode"/lp/*.cycles 2>/dev/null | grep -c 'detach rc=0' || true)"
        fi
        if [ "$mode" = events ]; then
            extra=" bytes=$(cat "$pw/$mode"/lp/*.size 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')"
        fi
        say "$name: $mode: ${secs[$mode]:-?} s, sessions=$sessions probes=$probes jump=$jump calls=$calls dropped=$drop without-ring=$noring missed=$missed missed-unknown=$unknown$extra ${verdict[$mode]:-baseline}"
        echo "$name $mode ${secs[$mode]:-0} $sessions $probes $jump $calls $drop $noring $missed $unknown ${verdict[$mode]:-baseline}$extra" >>"$pw/figures"
    done
    read -r _ _ _ _ probes jump _ < <(grep ' count ' "$pw/figures" || echo "x x x x 0 0 x")
    u=${secs[none]:-0} c=${secs[count]:-} h=${secs[hist]:-}
    ratio() { [ -n "$1" ] && awk -v a="$1" -v b="$u" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "-" }' || echo "-"; }
    dm=$(awk '$2 !~ /^(none|execbase|attachbase)$/ { d += $8; m += $10; k += $11 } END { printf "%d / %d%s", d, m, k ? " (+" k " unknown)" : "" }' "$pw/figures")
    share=$(awk -v p="$probes" -v j="$jump" 'BEGIN { if (p > 0) printf "%.1f%%", 100 * j / p; else print "-" }')
    # Of the functions that ran (count mode), long enough for the jump: the share on it.
    ran=-
    if [ -d "$pw/count/lp" ]; then
        read -r called short long slow hot < <(jump_share "$pw/count/lp" "$pw/count/slow-called")
        ran=$(awk -v l="$long" -v s="$slow" -v c="$called" -v h="$hot" \
            'BEGIN { if (l > 0) printf "%.1f%% of %d (%d of %d called too short; %d of the 20 hottest off it)", 100 * (l - s) / l, l, c - l, c, h; else print "-" }')
        say "$name: of the $called functions called, $short too short for the jump; of the $long others, $slow on the breakpoint path ($hot of the 20 most called): $pw/count/slow-called"
    fi
    vs=$(awk '$2 !~ /^(none|execbase|attachbase)$/ { v = $12; for (i = 13; i <= NF && $i !~ /=/; i++) v = v " " $i; printf "%s%s: %s", sep, $2, v; sep = "; " }' "$pw/figures")
    line="| $name | $RP_LANG | $probes | $share | $ran | $u | ${c:--} (x$(ratio "$c")) | ${h:--} (x$(ratio "$h")) | $dm | $vs |"
    echo "realprograms: $name: probes=$probes jump-share=$share ran-share=$ran untraced=${u}s count=${c:--}s (x$(ratio "$c")) hist=${h:--}s (x$(ratio "$h")) dropped/missed=$dm; $vs"
    rows+=("$line")
    unset secs verdict
done

{
    echo "| program | lang | functions probed | on the jump path | of those called and long enough, on the jump path | untraced s | --count s (ratio) | --hist s (ratio) | dropped / missed | results against untraced |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
} >"$work/results.md"
cat "$work/results.md"
[ -z "${RP_RESULTS:-}" ] || cp "$work/results.md" "$RP_RESULTS"
if [ "$status" = 0 ]; then
    say "every mode matched its baseline (outputs in $work)"
else
    say "some runs did not match their baseline: see $work/*/*/mismatches"
fi
exit "$status"
