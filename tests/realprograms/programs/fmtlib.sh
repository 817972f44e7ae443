# fmtlib 9.1.0 (Debian 12): C++, libfmt.so.9 shared as Debian builds it. Its GoogleTest suites
# throw and catch format_error, system_error and others all through (EXPECT_THROW_MSG), write
# through pipes and redirected descriptors (gtest-extra-test, os-test), and replace POSIX calls
# (posix-mock-test).
RP_SOURCE=fmtlib
RP_LANG=C++
# nocheck: the tests are built (FMT_TEST is on when fmt is the top project) but not run.
RP_DEB_OPTIONS="nocheck parallel=2"
RP_BUILT=bdir/bin/format-test
RP_TIMEOUT=60
RP_SPECS=('*' 'libfmt.so.9:*')

# ctest's tests of the build (bdir), less the four that configure and build other projects
# (compile-error-test, find-package-test, add-subdirectory-test, static-export-test): each a
# GoogleTest program, one process, run from bdir/test as ctest does.
rp_fmt_tests=(args-test assert-test chrono-test color-test core-test gtest-extra-test format-test
    format-impl-test ostream-test compile-test compile-fp-test printf-test ranges-test scan-test std-test
    unicode-test xchar-test enforce-checks-test posix-mock-test os-test)
rp_tests() {
    if [ -n "${RP_QUICK:-}" ]; then printf '%s\n' format-test core-test os-test; return; fi
    printf '%s\n' "${rp_fmt_tests[@]}"
}
rp_events_tests() { rp_tests; }
# Attached to: each program runs its tests 300 times over (--gtest_repeat), untraced and attached.
RP_ATTACH_LONG=1
rp_run() {
    cd "$RP_TREE/bdir/test" && "$LPW" "$RP_TREE/bdir/bin/$1" ${RP_LONG:+--gtest_repeat=300}
}
# Per test: GoogleTest's verdict of each test case.
# (The exec mode: ctest's verdict of each program.)
rp_result() {
    grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|Test +#[0-9]+:' "$2.out" | sed -E 's/ \([0-9]+ ms\)$//; s/ +[0-9.]+ sec$//' || true
}
rp_mask() { sed -E 's/\([0-9]+ ms( total)?\)/(T ms\1)/g; s/[0-9]+\.[0-9]+ sec/T sec/g'; }

# ctest, the suite's runner, under one trace (exec followed).
RP_EXEC=(ctest -E 'compile-error-test|find-package-test|add-subdirectory-test|static-export-test')
rp_exec_setup() { cd "$RP_TREE/bdir"; }
