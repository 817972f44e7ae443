# gawk 5.2.1 (Debian 12): C. Its suite runs gawk once per test from make, through sh, and
# compares stdout and stderr with the expected output: pipes to and from commands and system()
# (fork, exec), SIGPIPE (sigpipe1), timeouts, extensions loaded with dlopen (AWKLIBPATH),
# MPFR arithmetic, locales.
RP_SOURCE=gawk
RP_LANG=C
RP_DEB_OPTIONS="nocheck parallel=2"
RP_BUILT=gawk
RP_TIMEOUT=300
# '*': gawk; the extensions it loads are left out (their names vary with each test).
RP_SPECS=('*')

# The groups of test/Makefile's `check` target, each run by make in a private copy of the built
# tree (the tests write their outputs there), with gawk run through lpw.sh: the Makefile's
# VALGRIND variable stands before gawk in every test's command (AWK = ... $(VALGRIND) $(AWKPROG)).
# A test that fails leaves _NAME; the list of those is each group's result.
rp_tests() {
    if [ -n "${RP_QUICK:-}" ]; then printf '%s\n' unix-tests; return; fi
    printf '%s\n' basic unix-tests gawk-extensions arraydebug-tests charset-tests-all shlib-tests mpfr-tests \
        pma-tests machine-tests
}
rp_events_tests() { printf '%s\n' unix-tests shlib-tests; }
rp_copy() {  # rp_copy DIR: DIR, a fresh copy of the built tree
    rm -rf "$1" && cp -a "$RP_TREE" "$1" && rm -f "$1"/test/_*
}
rp_run() {
    local d=$RP_WORK/gawk-$LPW_MODE rc=0
    [ -d "$d" ] || rp_copy "$d"
    rm -f "$d"/test/_*
    make -s -C "$d/test" "$1" VALGRIND="$LPW" || rc=$?
    echo "failed: $(cd "$d/test" && ls _* 2>/dev/null | tr '\n' ' ')"
    return "$rc"
}
rp_result() { grep '^failed:' "$2.out" || true; }
# make's messages name the copy's directory.
rp_mask() { sed -E 's|/tmp/[^ ]*/gawk-[a-z]+|GAWKDIR|g; s|make\[[0-9]+\]|make[N]|g'; }

# The whole `make check` under one trace (exec followed), in a copy of its own.
RP_EXEC=(make -s check)
rp_exec_setup() { rp_copy "$RP_WORK/gawk-exec" && cd "$RP_WORK/gawk-exec/test"; }
