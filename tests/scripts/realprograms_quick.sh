#!/usr/bin/env bash
# The real-program suite's bounded subset (issue 31, item 8), run by `make test`: a short part of
# the own test suites of two programs built from their Debian 12 source packages (fmtlib, C++
# whose tests throw format_error; jq, C, whose test runs last long enough to be attached to
# many times), in every mode of tests/realprograms/run.sh but exec:
# untraced, trace --count '*', --hist '*', -o FILE '*', and attached and detached in cycles,
# each of which must give the untraced run's per-test results and output. The builds come from
# the cache that scripts/realprograms-fetch.sh fills (`make test` and `make torture` do, and so does this test
# for a program not there yet, when its build dependencies are installed: scripts/deps.sh
# installs them); without them the test fails and says what to run. `make torture` runs every
# program's whole suite. REALPROGRAMS_QUICK names other programs.
set -euo pipefail
src=${LIVEPROBE_SOURCE_DIR:?}
bin=${LIVEPROBE_BINARY_DIR:?}
cache=${LIVEPROBE_REALPROGRAMS_CACHE:-/var/cache/liveprobe/realprograms}
read -r -a programs <<<"${REALPROGRAMS_QUICK:-fmtlib jq}"
for p in "${programs[@]}"; do
    if [ ! -e "$cache/build/$p/.rp-stamp" ]; then
        echo "realprograms_quick: $p is not built in $cache: building it (scripts/realprograms-fetch.sh $p)" >&2
        if ! "$src/scripts/realprograms-fetch.sh" "$p"; then
            echo "realprograms_quick: FAIL: no build of $p in $cache and it could not be made here;" \
                "run, as root: $src/scripts/deps.sh && $src/scripts/realprograms-fetch.sh $p" >&2
            exit 1
        fi
    fi
done
export LIVEPROBE_RUNTIME_DIR
LIVEPROBE_RUNTIME_DIR=$(mktemp -d)
work=$(mktemp -d /tmp/liveprobe-realprograms-quick.XXXXXX)
trap 'rm -rf "$LIVEPROBE_RUNTIME_DIR"' EXIT
rc=0
RP_QUICK=1 RP_WORK=$work RP_MODES="none count hist events attach" LIVEPROBE=$bin/tools/liveprobe/liveprobe \
    "$src/tests/realprograms/run.sh" "${programs[@]}" || rc=$?
if [ "$rc" = 0 ]; then
    rm -rf "$work"
    echo "realprograms_quick: every mode gave the untraced results (${programs[*]})"
else
    echo "realprograms_quick: FAIL: some runs differ from their untraced baseline; see $work/*/*/mismatches" >&2
fi
exit "$rc"
