# The common start of the behaviour scripts that run targets (tests/scripts/attach_test.sh,
# modules_test.sh, trace_test.sh), sourced with the test's name first:
#   source "$(dirname "${BASH_SOURCE[0]}")/../support/script_common.sh" NAME
# It lives outside tests/scripts/, where every .sh is a test of its own. It sets:
#   bin, lp            the build directory and its liveprobe tool
#   tmp                a directory of the test's own, removed at exit; LIVEPROBE_RUNTIME_DIR in it
#                      (this test's agent sockets, not the user's)
#   launch             the command prefix that starts a target: in sanitizer builds, the library
#                      loaded into targets is instrumented and its runtime must be there first
#   pids               background targets to kill at exit (append to it)
#   failures, pass, fail
set -uo pipefail
bin=${LIVEPROBE_BINARY_DIR:?LIVEPROBE_BINARY_DIR is not set}
lp=$bin/tools/liveprobe/liveprobe
tmp=$(mktemp -d "${TMPDIR:-/tmp}/liveprobe-$1.XXXXXX")
export LIVEPROBE_RUNTIME_DIR=$tmp/run
launch=()
if [ -n "${LIVEPROBE_SANITIZER_PRELOAD:-}" ]; then
    launch=(env "LD_PRELOAD=${LIVEPROBE_SANITIZER_PRELOAD% }" ASAN_OPTIONS=detect_leaks=0
            TSAN_OPTIONS="report_bugs=0 die_after_fork=0")
fi
pids=()
cleanup() { for p in "${pids[@]}"; do { kill -9 "$p" && wait "$p"; } 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
