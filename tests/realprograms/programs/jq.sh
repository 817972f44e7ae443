# jq 1.6 (Debian 12): C; libjq shared (libjq.so.1), Oniguruma.
RP_SOURCE=jq
RP_LANG=C
# nocheck: Debian's `make check` runs every test under valgrind (configure finds it); the
# driver runs the suite itself.
RP_DEB_OPTIONS="nocheck parallel=2"
RP_BUILT=.libs/jq
RP_TIMEOUT=60
RP_SPECS=('*' 'libjq.so.1:*')

# The suite (Makefile.am TESTS): jqtest, onigtest, base64test, optionaltest and mantest each run
# `jq --run-tests FILE` (one process); here the real executable (.libs/jq, not libtool's
# wrapper script) runs them. mantest's file is made from the manual (rake mantests, untraced, once
# per run). shtest and utf8test run jq many times from sh: the exec mode covers them
# (`make check` under one trace, once exec is followed).
rp_man_test() {
    [ -s "$RP_WORK/man.test" ] || (cd "$RP_TREE/docs" && rake mantests) >"$RP_WORK/man.test"
}
rp_tests() {
    if [ -n "${RP_QUICK:-}" ]; then printf '%s\n' base64.test optional.test onig.test; return; fi
    printf '%s\n' jq.test onig.test base64.test optional.test man.test
}
# Every call written to a file: ~6 million calls a test (jq compiles its builtins for each), so
# the shorter files only.
rp_events_tests() { printf '%s\n' base64.test optional.test onig.test; }
rp_run() {
    local file=tests/$1
    if [ "$1" = man.test ]; then rp_man_test; file=$RP_WORK/man.test; fi
    LD_LIBRARY_PATH=$RP_TREE/.libs "$LPW" "$RP_TREE/.libs/jq" -L "$RP_TREE/tests/modules" --run-tests "$file"
}
# Per test: the failures jq reports ("*** ... at line number N") and its verdict.
rp_result() { grep -E '^\*\*\*|tests passed' "$2.out" || true; }

# The suite's own runner: every test script, under one trace (exec followed).
RP_EXEC=(make check NO_VALGRIND=1)
rp_exec_setup() {
    # jq's tests run jq under valgrind unless NO_VALGRIND (a make variable: TESTS_ENVIRONMENT).
    rm -rf "$RP_WORK/jq-exec" && cp -a "$RP_TREE" "$RP_WORK/jq-exec" && cd "$RP_WORK/jq-exec"
}
